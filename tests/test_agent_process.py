"""Rank agents hosting several ranks per process, without a lab: the real
agent program and the lab's JSON-lines driver, over loopback (ranks share the
test's namespace, each listening on its own 127.0.0.x address), real float32
data and #wrong as a lab run computes them."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from traffic.engines import Job
from traffic.engines.agents import RankAgents, by_server
from collectives.datatypes import PERIOD
from harness.collectives import expected_sum
from collectives.metrics import payload_share
from traffic.engines.rank_processes import AgentProcesses
from lab.processes import CheckError
from topologies.fabric import Routing


class Endpoint:
    def __init__(self, i, server):
        self.ip, self.nv_ip, self.server = f"127.0.0.{i + 1}", "", server


class Link:
    def __init__(self, kind, rate_mbit):
        self.kind = kind
        self.spec = type("Spec", (), {"rate_mbit": rate_mbit, "delay_ms": 0.0})


NVLINK_MBIT = 20


class LoopbackFabric:
    """The little of a fabric the engine reads: endpoints, their servers, link rates."""
    def __init__(self, n, gpus, mtu=9000, nic_mbit=1000.0, policy="ecmp"):
        self.mtu, self.links = mtu, (Link("server_leaf", nic_mbit), Link("intra_node", NVLINK_MBIT))
        self.policy = policy
        self.routing = Routing(policy, entropy=8, flowlet_gap_ms=1, adaptive_interval_ms=200,
                               bfd_ms=0)
        self.hosts = {f"h{i // gpus + 1}g{i % gpus + 1}": Endpoint(i, f"h{i // gpus + 1}")
                      for i in range(n)}

    def endpoint(self, name):
        return self.hosts[name]


class LocalLauncher:
    """Starts the agents as plain local processes: the lab's popen, minus the namespace."""
    def __init__(self):
        self.procs = []
        self.run_dir = Path(f"/tmp/agents-{os.getpid()}-{id(self)}")   # names the source ports

    def netns(self, name):
        return ""                                  # the test's own

    def popen(self, server, args, **kwargs):
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        self.procs.append(subprocess.Popen(args, **kwargs))
        return self.procs[-1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def agents_of():
    made = []

    def make(n, gpus, **fabric_kw):
        fabric = LoopbackFabric(n, gpus, **fabric_kw)
        engine = RankAgents(fabric, list(fabric.hosts), LocalLauncher(), port=free_port())
        made.append(engine)
        return engine
    yield make
    for engine in made:
        engine.close()
        assert all(p.poll() is not None for p in engine.procs)


@pytest.mark.parametrize("algorithm,collective,n,gpus", [
    ("hierarchical", "allreduce", 8, 4), ("ring", "allreduce", 8, 4), ("rhd", "allreduce", 8, 2),
    ("tree", "allreduce", 6, 3), ("ring", "allgather", 6, 2), ("pairwise", "alltoall", 4, 2),
    ("ring", "broadcast", 4, 4)])
def test_one_process_per_server_gives_the_right_result(agents_of, algorithm, collective, n, gpus):
    engine = agents_of(n, gpus)
    assert len(engine.procs) == n // gpus                        # one per server
    assert engine.groups == [list(range(s * gpus, (s + 1) * gpus)) for s in range(n // gpus)]
    engine.prepare(Job(collective, algorithm, count=50_400, channels=2, piece_bytes=16384,
                       local=gpus))
    for i in range(2):
        out = engine.iterate(i, timeout=60)
        assert out["wrong"] == 0 and out["bad_chunk_elements"] == 0
        assert out["t1"] > out["t0"]


@pytest.mark.parametrize("policy", ["ecmp", "flowlet", "spray"])
def test_spreading_senders_deliver_every_piece_and_count_what_overtook(agents_of, policy):
    """Under flowlet and spray a rank opens routing.entropy connections to a
    peer and picks one per piece: the data is still right, every piece is
    counted once, spray (every piece to the least-queued connection) has
    pieces overtaking each other, and a flowlet never moves to another
    connection while the one it leaves has bytes unacknowledged (so nothing
    of it can arrive after the next piece). On loopback the kernel stamps
    few TCP reads with their arrival time, so the receivers' `reordered`
    is judged here only for spray; the lab's veths judge it for both
    (tests/privileged/test_policies_lab.py)."""
    engine = agents_of(4, 1, policy=policy, nic_mbit=20)
    engine.prepare(Job("allreduce", "ring", count=1 << 20, piece_bytes=16384))
    pieces = 4 * 2 * 3 * (4 << 20) // 4 // 16384     # each rank: 2(n-1) blocks of 1/n, cut
    for i in range(2):
        out = engine.iterate(i, timeout=60)
        assert out["wrong"] == 0 and out["bad_chunk_elements"] == 0
        assert out["pieces"] == pieces
        if policy == "spray":
            assert out["reordered"] > 0 and out["unsettled"] > 0
        elif policy == "flowlet":
            assert out["unsettled"] == 0
        else:
            assert out["reordered"] == out["unsettled"] == 0


@pytest.mark.parametrize("algorithm", ["hierarchical", "ring"])
def test_scale_up_in_memory_is_right_and_takes_the_nvlink_time(agents_of, algorithm):
    """GPUs of one server hand their messages over in memory, each paced at
    the NVLink rate on its sender's and receiver's port: the data is still
    right, every byte between GPUs of a server went that way, and no
    iteration is quicker than a GPU's port needs for its bytes."""
    engine = agents_of(8, 4)
    count, size = 50_400, 50_400 * 4
    engine.prepare(Job("allreduce", algorithm, count=count, piece_bytes=16384, local=4,
                       scale_up="memory"))
    # hierarchical: each GPU sends 2 x 3/4 of the buffer to its server's
    # others; the ring (0..7): 6 of its 8 hops stay inside a server, each
    # carrying a block (1/8) in each of its 14 steps
    per_port, senders = (2 * 3 * size // 4, 8) if algorithm == "hierarchical" else \
        (14 * size // 8, 6)
    need = per_port * 8 / (NVLINK_MBIT * 1e6 * payload_share(9000))
    for i in range(2):
        out = engine.iterate(i, timeout=60)
        assert out["wrong"] == 0 and out["bad_chunk_elements"] == 0
        assert out["seconds"] >= need * 0.99
        assert out["scale_up_bytes"] == senders * per_port


def test_a_rank_done_sending_still_delivers_what_waits_for_the_window(agents_of):
    """A send is done when handed to the connection; what TCP cannot take
    yet (the window, the send buffer) waits in the process. A rank whose last
    operation is a send is done before its data left: its process must keep
    sending, or the peer waits forever. Here messages of 8 MiB, more than a
    send buffer grows to (4 MiB), against windows of 4 frames."""
    engine = agents_of(4, 1, mtu=65000, nic_mbit=0.5)
    assert "--windows 260056," in " ".join(engine.procs[0].args)
    engine.prepare(Job("reduce", "ring", count=8 << 20, piece_bytes=32 << 20))
    assert engine.iterate(0, timeout=60)["wrong"] == 0


def test_a_process_that_dies_is_one_sentence(agents_of):
    engine = agents_of(4, 2)
    engine.procs[1].kill()
    engine.procs[1].wait()
    with pytest.raises(CheckError, match=r"the agent of rank 2 .*(exited|is gone)"):
        engine.prepare(Job("allreduce", "ring", count=1000))
        engine.iterate(0, timeout=10)


def test_ranks_are_grouped_by_server_in_rank_order():
    hosts = [Endpoint(i, s) for i, s in enumerate("aabbab")]
    assert by_server(hosts) == [[0, 1, 4], [2, 3, 5]]


def test_expected_sums_are_read_only_views_equal_to_the_pattern():
    contributors = (0, 3, 5)
    for offset, length in [(0, 10), (1030, 5), (5 * PERIOD + 17, 70_000), (3, 2_000_000)]:
        got = expected_sum(contributors, offset, length)
        j = np.arange(offset, offset + length)
        want = sum(((3 * j + 7 * r) % PERIOD) - PERIOD // 2 for r in contributors)
        assert np.array_equal(got, want.astype(np.float32))
    assert not expected_sum(contributors, 5, 100).flags.writeable


def test_the_driver_reads_several_replies_written_at_once():
    """A process hosting many ranks writes their replies in one go: every
    one must be read, none left waiting in a buffer the selector cannot see."""
    script = ("import json,sys\n"
              "for r in range(50): print(json.dumps({'event': 'ready', 'rank': r}))\n"
              "sys.stdout.flush()\n"
              "sys.stdin.readline()\n")
    procs = AgentProcesses(LocalLauncher(), [f"e{r}" for r in range(50)],
                           lambda group, s: [sys.executable, "-c", script],
                           groups=[list(range(50))], timeout=10)
    assert procs.n == 50
    procs.close()


def test_a_piece_is_overtaken_by_when_it_landed_not_when_it_was_read():
    from programs.agent import overtaken
    assert overtaken([(1.0, 0), (2.0, 1), (3.0, 2)]) == 0
    assert overtaken([(3.0, 2), (1.0, 0), (2.0, 1)]) == 0      # read late, landed in order
    assert overtaken([(2.0, 0), (1.0, 1), (3.0, 2)]) == 1      # 1 landed before 0
    assert overtaken([(1.0, 3), (2.0, 0), (3.0, 1), (4.0, 2)]) == 3
    assert overtaken([(1.0, 5), (1.0, 4)]) == 0                # the same instant: no order
    assert overtaken([]) == 0


def test_the_arrival_time_comes_from_the_reads_timestamp_message():
    import socket
    import struct

    from programs.agent import SO_TIMESTAMPNS, landed
    stamp = (socket.SOL_SOCKET, SO_TIMESTAMPNS, struct.pack("qq", 5, 250_000_000))
    assert landed([stamp], 1.0) == 5.25
    assert landed([(socket.SOL_SOCKET, 1, b"\0" * 16)], 1.0) == 1.0   # not a timestamp
    assert landed([], 7.0) == 7.0


def test_the_driver_waits_for_agents_slower_than_its_patience_while_they_work():
    """Patience is for a reply or the agents' CPU: an agent that computes for
    twice as long as the patience before it answers is waited for."""
    script = ("import json, sys, time\n"
              "while time.process_time() < 2.0: pass\n"
              "print(json.dumps({'event': 'ready', 'rank': 0}), flush=True)\n"
              "sys.stdin.readline()\n")
    launcher = LocalLauncher()
    procs = AgentProcesses(launcher, ["e0"], lambda group, s: [sys.executable, "-c", script],
                           timeout=1.0)
    assert procs.n == 1
    procs.close()


def test_the_driver_gives_up_on_an_agent_that_neither_answers_nor_works():
    launcher = LocalLauncher()
    script = "import time\nprint('{\"event\": \"ready\", \"rank\": 0}', flush=True)\ntime.sleep(600)\n"
    try:
        with pytest.raises(CheckError, match=r"e1 did not report 'ready' \(1 of 2 did; "
                                             r"they made no progress for 1 s\)"):
            AgentProcesses(launcher, ["e0", "e1"],
                           lambda group, s: [sys.executable, "-c", script if s == "e0" else
                                             "import time; time.sleep(600)"], timeout=1.0)
    finally:
        for proc in launcher.procs:
            proc.kill()
            proc.wait()
