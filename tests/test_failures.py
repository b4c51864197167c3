"""Link failures during a sweep (--fail), the pure parts: the flag and the
YAML key refused in one sentence, `random` drawn from the links between
switches, the probe pair whose paths may cross the link, the probe's
interval within what its queue is guaranteed, the probe flows' arrivals
read into how long traffic stopped (the probe starting, a sender the host
kept waiting, flows taking turns), the probe programs over loopback, and
the iteration a failure slowed."""

import json
import random
import subprocess
import sys
import socket
import threading
import time

import pytest

from harness import REPO, TOPOLOGIES
from harness.commands import run
from harness.fabrics import with_rate
from lab.shaping import ACK_CLASS_SHARE
from programs import failprobe
from topologies.fabric import FabricError, load_fabric, parse_fabric
from runs.experiment import experiment_from
from traffic.measure.failures import (BASE_SPORT, FLOWS, INTERVAL_S, PROBE_FRAME, PROBE_SHARE,
                                      ProbeSend, analyse, missing_runs, parse, probe_interval,
                                      probe_pair, slowdown)

DEFAULT = load_fabric(TOPOLOGIES / "default.yaml")
FAT = load_fabric(TOPOLOGIES / "fat-tree-k4.yaml")


@pytest.mark.parametrize("value,message", [
    ("leaf1-spine9@1", "error: --fail 'leaf1-spine9@1': there is no 'spine9' in this fabric"),
    ("h1-leaf1@1", "error: --fail 'h1-leaf1@1': h1-leaf1 is a server's own link: without it "
                   "the collective cannot finish; name a link between two switches"),
    ("leaf1-leaf2@1", "error: --fail 'leaf1-leaf2@1': leaf1 and leaf2 are not linked"),
    ("leaf1@1", "error: argument --fail: expected LINK@SECONDS[+DURATION][:down|silent|flap] "
                "such as leaf1-spine1@2+1 (the link's two nodes, or random), got 'leaf1@1'"),
    ("leaf1-spine1@1+0", "error: argument --fail: 'leaf1-spine1@1+0': expected seconds from 0 "
                         "to 86400 and a duration above 0"),
    ("leaf1-spine1@-1", "error: argument --fail: expected LINK@SECONDS[+DURATION]"
                        "[:down|silent|flap] such as leaf1-spine1@2+1 (the link's two nodes, "
                        "or random), got 'leaf1-spine1@-1'"),
    ("leaf1-spine1@1:flap", "error: argument --fail: 'leaf1-spine1@1:flap': a flap needs a "
                            "duration, such as leaf1-spine1@2+3:flap"),
    ("leaf1-spine1@1+1:gone", "error: argument --fail: expected LINK@SECONDS[+DURATION]"
                              "[:down|silent|flap] such as leaf1-spine1@2+1 (the link's two "
                              "nodes, or random), got 'leaf1-spine1@1+1:gone'"),
])
def test_a_bad_failure_is_one_sentence(value, message):
    proc = run("--check", "--fail", value)
    assert proc.returncode == 2 and proc.stderr == message + "\n"


def test_failures_come_from_flags_and_the_yaml_and_are_listed_by_check():
    proc = run("--check", "--fail", "leaf1-spine1@1+0.5", "--fail", "random@2")
    assert proc.returncode == 0, proc.stderr
    assert "  failures: leaf1-spine1@1+0.5, random@2 (LINK@SECONDS+DURATION" in proc.stdout
    f = parse_fabric(TOPOLOGIES.joinpath("default.yaml").read_text()
                     + "experiment: {fail: [leaf2-spine2@3]}\n", "f.yaml")
    assert experiment_from(f).fail == ["leaf2-spine2@3"]
    bad = parse_fabric(TOPOLOGIES.joinpath("default.yaml").read_text()
                       + "experiment: {fail: [leaf2-spine7@3]}\n", "f.yaml")
    with pytest.raises(FabricError) as exc:
        experiment_from(bad)
    assert str(exc.value) == ("f.yaml: experiment.fail: 'leaf2-spine7@3': there is no 'spine7' "
                              "in this fabric")
    with pytest.raises(ValueError) as exc:
        experiment_from(DEFAULT, {"engine": "sim", "fail": ["random@1"]})
    assert str(exc.value) == ("--fail: the simulator has no links to take down; failures need "
                              "a lab")


def test_kinds_silent_and_flap_and_the_flap_flag():
    [silent, flap] = parse(DEFAULT, ["leaf1-spine1@1+2:silent", "leaf2-spine1@4+1:flap"])
    assert silent.kind == "silent" and silent.actions() == [(1.0, "down"), (3.0, "up")]
    assert flap.kind == "flap" and flap.actions() == [
        (4.0, "down"), (4.25, "up"), (4.5, "down"), (4.75, "up")]
    assert parse(DEFAULT, ["leaf1-spine1@1"])[0].actions() == [(1.0, "down")]
    proc = run("--check", "--flap", "leaf1-spine1@1+2", "--fail", "leaf2-spine2@1")
    assert proc.returncode == 0, proc.stderr
    assert "failures: leaf1-spine1@1+2:flap, leaf2-spine2@1" in proc.stdout
    proc = run("--check", "--flap", "leaf1-spine1@1+2:silent")
    assert proc.returncode == 2 and proc.stderr.endswith(
        "--flap takes LINK@SECONDS+DURATION such as leaf1-spine1@2+3, got "
        "'leaf1-spine1@1+2:silent'\n"), proc.stderr
    # a flap is a failure like any other: it may not overlap one of the same link
    proc = run("--check", "--flap", "leaf1-spine1@1+2", "--fail", "leaf1-spine1@2")
    assert proc.returncode == 2 and "is still down then" in proc.stderr


def test_parse_orders_by_time_and_draws_random_links_between_switches():
    failures = parse(FAT, ["random@5", "leaf1-agg1@1+2"], random.Random(7))
    assert [(f.at, f.duration) for f in failures] == [(1.0, 2.0), (5.0, None)]
    switches = {s.name for s in FAT.switches}
    assert {failures[1].a, failures[1].b} <= switches
    assert all({f.a, f.b} <= switches for f in parse(FAT, ["random@1"] * 30, random.Random(1)))


def test_the_probe_pair_crosses_the_link():
    assert probe_pair(DEFAULT, "leaf1", "spine1") == ("h1", "h3")
    assert probe_pair(DEFAULT, "spine2", "leaf2") == ("h1", "h3")
    src, dst = probe_pair(FAT, "agg1", "core1")           # a core link: between pods
    assert FAT.endpoint(src).leaf.startswith("leaf") and src != dst
    pods = {h.name: i // 4 for i, h in enumerate(FAT.endpoints)}
    assert pods[src] != pods[dst]


def test_the_probe_stays_within_what_its_queue_is_guaranteed():
    """The probe leaves by the first-served class, guaranteed 1/ACK_CLASS_SHARE
    of a link; under a collective the data class takes the rest. Sent every
    2 ms in 106-byte frames, 8 flows offered 3.4 Mbit/s to a 20 Mbit/s
    link's 1 Mbit/s, and lost half their packets before any failure."""
    old_bits = FLOWS * 106 * 8 / 0.002
    assert old_bits > 3 * 20e6 / ACK_CLASS_SHARE
    assert probe_interval(DEFAULT, "h1", "h3") == 0.008
    assert probe_interval(with_rate(DEFAULT, 100), "h1", "h3") == INTERVAL_S    # the floor
    for name in ("default", "fat-tree-k4", "multi-gpu", "rail-optimized", "superpod-su"):
        fabric = load_fabric(TOPOLOGIES / f"{name}.yaml")
        src, dst = fabric.endpoints[0].name, fabric.endpoints[-1].name
        slowest = min(l.spec.rate_mbit for l in fabric.links if l.kind != "intra_node")
        bits = FLOWS * PROBE_FRAME * 8 / probe_interval(fabric, src, dst)
        assert bits <= PROBE_SHARE * slowest * 1e6 / ACK_CLASS_SHARE, name
    assert PROBE_FRAME >= 14 + 20 + 8 + failprobe.PAYLOAD       # what the probe sends fits
    # only the links a path may take count: a slow link elsewhere does not slow the probe
    slow_elsewhere = DEFAULT.edited(lambda spec: spec["links"].update(
        {"server_leaf": {**spec["links"]["server_leaf"], "rate_mbit": 100},
         "leaf_spine": {**spec["links"]["leaf_spine"], "rate_mbit": 100}}))
    assert probe_interval(slow_elsewhere, "h1", "h3") == INTERVAL_S


def arrivals(lost, sent=500, interval=INTERVAL_S, stagger=0.0):
    """Every flow's arrivals, flow f's seq s sent at s x interval + f x stagger,
    minus `lost` (flow -> seqs)."""
    return {str(BASE_SPORT + f): [[s, s * interval + f * stagger + 0.01] for s in range(sent)
                                  if s not in lost.get(f, ())] for f in range(FLOWS)}


def test_a_failure_is_the_run_of_packets_lost_from_it_on():
    # the link goes down at seq 250 (0.5 s): flows 0 and 3 lose 6 and 15 packets in a row
    # flows 0, 3 and 6 lose 6, 15 and 2 packets in a row; 5 lost 4 long before
    lost = {0: range(250, 256), 3: range(251, 266), 5: {100, 101, 102, 103}, 6: {252, 253}}
    out = analyse(arrivals(lost), ProbeSend(500, 0.0), 0.5)
    assert out == {"flows": FLOWS, "flows_hit": 3, "lost_packets": 23,
                   "stopped_ms": pytest.approx(30.0), "interval_ms": 2.0,
                   "path_stopped_ms": pytest.approx(30.7)}
    # a flow that had lost as many in a row before was not hit by the failure
    lost[3] = list(range(251, 257)) + list(range(10, 20))
    assert analyse(arrivals(lost), ProbeSend(500, 0.0), 0.5)["flows_hit"] == 2
    # a loss long after the failure is not the failure's
    assert analyse(arrivals({1: {900}}, 1000), ProbeSend(1000, 0.0), 0.5)["flows_hit"] == 0
    # nothing lost: nothing stopped
    assert analyse(arrivals({}), ProbeSend(500, 0.0), 0.5)["stopped_ms"] == 0
    assert missing_runs({0, 1, 4}, 7) == [(2, 2), (5, 2)]


def test_the_probe_starting_is_not_a_stop():
    """Seen on a loaded host: every flow lost its first 4-8 packets (the
    receiver not yet listening), all at once. A failover that stopped every
    flow for fewer packets than that read as hitting none of them (CI:
    single-path, `assert (0 >= 1)`)."""
    startup = set(range(8))
    lost = {f: startup | set(range(250, 256)) for f in range(FLOWS)}
    out = analyse(arrivals(lost), ProbeSend(500, 0.0), 0.5)
    assert out["flows_hit"] == FLOWS and out["lost_packets"] == 6 * FLOWS
    assert out["stopped_ms"] == pytest.approx(12.0)
    # the probe still fails a failure it did not see: the start alone is no hit
    assert analyse(arrivals({f: startup for f in range(FLOWS)}), ProbeSend(500, 0.0), 0.5)[
        "flows_hit"] == 0
    # a loss before the failure, once the flow has begun, still outweighs a shorter stop
    lost[2] = lost[2] | set(range(100, 110))
    assert analyse(arrivals(lost), ProbeSend(500, 0.0), 0.5)["flows_hit"] == FLOWS - 1
    # a flow that never arrived tells nothing: not hit, its packets not counted
    flows = arrivals(lost)
    flows[str(BASE_SPORT + 4)] = []
    out = analyse(flows, ProbeSend(500, 0.0), 0.5)
    assert out["flows_hit"] == FLOWS - 2 and out["lost_packets"] == 6 * (FLOWS - 2)


def test_ticks_the_sender_skipped_are_not_losses():
    """A sender the host kept waiting skips the ticks it missed instead of
    bursting them; those seqs were never sent. Before the failure they are
    no run of losses; during a stop the run lasts through them."""
    stall = [[100, 20]]                                       # 40 ms without a tick
    lost = {f: set(range(100, 120)) | set(range(250, 256)) for f in range(FLOWS)}
    out = analyse(arrivals(lost), ProbeSend(500, 0.0, skipped=stall), 0.5)
    assert out["flows_hit"] == FLOWS and out["stopped_ms"] == pytest.approx(12.0)
    assert missing_runs(set(range(500)) - set(range(100, 120)), 500,
                        frozenset(range(100, 120))) == []
    # stalled mid-stop: lost 250-253, never sent 254-263, lost 264-265: stopped 16 ticks
    during = [[254, 10]]
    lost = {0: set(range(250, 266))}
    out = analyse(arrivals(lost), ProbeSend(500, 0.0, skipped=during), 0.5)
    assert (out["flows_hit"], out["lost_packets"]) == (1, 16)
    assert missing_runs(set(range(500)) - set(range(250, 266)), 500,
                        frozenset(range(254, 264))) == [(250, 16)]


def test_a_probe_send_is_read_from_the_senders_reply():
    """What the sender reported, with the interval and ports it was given;
    a reply that names no skipped ticks or stagger means none."""
    assert ProbeSend.of({"sent": 5, "start": 1.5}, 0.008, BASE_SPORT + FLOWS) == ProbeSend(
        5, 1.5, 0.008, BASE_SPORT + FLOWS, (), 0.0)
    got = ProbeSend.of({"sent": 5, "start": 1.5, "skipped": [[2, 1]], "stagger": 0.001},
                       0.008, BASE_SPORT)
    assert (got.skipped, got.stagger) == ([[2, 1]], 0.001)


def test_flows_taking_turns_see_a_stop_shorter_than_an_interval():
    """Seen under single-path on a loaded host: a failover shorter than 8 ms,
    the probe's interval at 20 Mbit/s, cost 7 of the 8 flows one packet. The
    flows take turns 1 ms apart, so a stop shorter than an interval still
    costs a packet to each flow that sent during it: down from 2002.5 to
    2009.5 ms, flow f sends seq 250 at 2000 + f ms and 251 at 2008 + f ms."""
    interval, stagger = 0.008, 0.001
    lost = {f: {250} for f in range(3, FLOWS)} | {0: {251}, 1: {251}}
    out = analyse(arrivals(lost, 500, interval, stagger),
                  ProbeSend(500, 0.0, interval, stagger=stagger), 2.0025)
    assert out == {"flows": FLOWS, "flows_hit": FLOWS - 1, "lost_packets": FLOWS - 1,
                   "stopped_ms": 8.0, "interval_ms": 8.0, "path_stopped_ms": 7.1}


@pytest.mark.parametrize("stop_ms,per_flow,path", [(5, 8.0, 6.0), (7, 8.0, 7.6), (10.5, 16.0, 10.3),
                                                    (13, 16.0, 13.3), (20, 24.0, 20.3)])
def test_the_paths_stop_is_read_from_the_flows_together(stop_ms, per_flow, path):
    """Six of the eight flows cross the link (as the default fabric hashes
    the probe's ports), taking turns 1 ms apart, a packet every 8 ms each.
    Each flow alone reads a stop in whole intervals (a 5 ms stop costs it
    one packet: 8 ms); together they sample the path every 1.3 ms, and the
    span of what they lost, plus that spacing, reads it to within it."""
    interval, stagger, crossing = 0.008, 0.001, (1, 2, 3, 4, 6, 7)
    t0 = 2.0025
    lost = {f: {s for s in range(500) if t0 <= s * interval + f * stagger < t0 + stop_ms / 1e3}
            for f in crossing}
    out = analyse(arrivals(lost, 500, interval, stagger),
                  ProbeSend(500, 0.0, interval, stagger=stagger), t0)
    assert (out["stopped_ms"], out["path_stopped_ms"]) == (per_flow, path)
    assert abs(out["path_stopped_ms"] - stop_ms) < interval * 1e3 / len(crossing)
    # nothing hit: nothing to read
    assert analyse(arrivals({}, 500, interval, stagger),
                   ProbeSend(500, 0.0, interval, stagger=stagger), t0)["path_stopped_ms"] is None


def test_the_probe_programs_over_loopback(capsys):
    """The receiver says when it listens; the sender's flows take turns,
    and every packet it sent arrives with its seq. The receiver stops when
    told (after the sender is done), however late the sender started."""
    box, stop = {}, threading.Event()
    receiver = threading.Thread(target=lambda: box.update(failprobe.receive(47211, 600, stop)))
    receiver.start()
    while "ready" not in capsys.readouterr().out and receiver.is_alive():
        time.sleep(0.01)
    sent = failprobe.send("127.0.0.1", 47211, range(47300, 47304), 0.02, 0.2)
    stop.set()
    receiver.join()
    assert sent["stagger"] == pytest.approx(0.005) and sent["start"] > 0
    never = {s for first, count in sent["skipped"] for s in range(first, first + count)}
    assert set(box["arrivals"]) == {str(p) for p in range(47300, 47304)}
    for got in box["arrivals"].values():
        assert sorted(seq for seq, _t in got) == sorted(set(range(sent["sent"])) - never)
    assert json.loads(json.dumps(sent)) == sent


def test_the_receiver_program_ends_when_its_stdin_closes():
    """The lab closes the receiver's stdin once the sender is done: it
    ends then, not at its (here ten-minute) cap."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as free:    # a port no one holds
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "programs.failprobe", "recv", "--port",
                             str(port), "--seconds", "600", "--until-eof"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert json.loads(proc.stdout.readline()) == {"ready": True}
        out, _ = proc.communicate(timeout=120)          # closes stdin
    finally:
        proc.kill()
    assert proc.returncode == 0 and json.loads(out) == {"arrivals": {}}


def test_the_slowdown_is_the_hit_iteration_against_its_size_untouched():
    its = [{"size_bytes": 1024, "iteration": i, "t0": i * 1.0, "t1": i * 1.0 + s, "seconds": s}
           for i, s in enumerate([0.5, 0.5, 0.9, 0.6, 0.5])]
    out = slowdown(its, 2.3, busy=[(2.3, 2.6)])
    assert out == {"size_bytes": 1024, "iteration": 2, "seconds": 0.9, "usual_seconds": 0.5,
                   "slowdown": 1.8}
    assert slowdown(its, 9.0, busy=[]) is None


def test_a_link_cannot_fail_again_while_it_is_down():
    proc = run("--check", "--fail", "leaf1-spine1@1+2", "--fail", "spine1-leaf1@2")
    assert proc.returncode == 2 and proc.stderr == (
        "error: --fail 'spine1-leaf1@2': spine1-leaf1 is still down then ('leaf1-spine1@1+2')\n")
    assert run("--check", "--fail", "leaf1-spine1@1+2", "--fail", "leaf1-spine1@3").returncode == 0
    assert run("--check", "--fail", "random@1", "--fail", "random@1").returncode == 0
