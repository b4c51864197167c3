"""NCCL collectives replayed on a real fabric: 6 ranks (not a power of two)
on 2 leaves, every collective and algorithm through the rank agents with
checked data, and the iperf3 and Scapy engines."""

import pytest

from harness.fabrics import leaf_spine
from harness.labs import built
from harness.verdicts import assert_verdict_follows_from_runs
from collectives import metrics as M
from collectives import registry as R
from runs.experiment import Experiment
from runs.lab_parts import UNMEASURED_ALPHA_S, Latency
from runs.measured import run_experiment

# (hierarchical needs multi-GPU servers: tests/privileged/test_multi_gpu_lab.py)
CASES = [(c, a) for c, algs in R.ALGORITHMS.items() for a in algs if a != "hierarchical"]


@pytest.fixture(scope="module")
def lab6(tmp_path_factory):
    with built(leaf_spine(2, 2, 3, rate=20), tmp_path_factory) as lab:
        yield lab


def small(**kw):
    base = dict(minbytes=48 * 1024, maxbytes=48 * 1024, iters=1, warmup=0, piece_bytes=8192,
                idle_seconds=0.2)
    return Experiment(**{**base, **kw})


@pytest.mark.parametrize("collective,algorithm", CASES, ids=[f"{c}-{a}" for c, a in CASES])
def test_every_collective_is_right_through_the_rank_agents(lab6, tmp_path, collective, algorithm):
    root = 4 if collective in R.ROOTED else 0
    result = run_experiment(lab6, small(collective=collective, algorithm=algorithm, root=root,
                                        channels=2), tmp_path)
    run = result.runs[0]
    assert run["wrong"] == 0 and run["bad_chunk_elements"] == 0
    assert run["ranks"] == 6 and run["root"] == (4 if collective in R.ROOTED else -1)
    assert run["time_s"] > 0
    assert run["busbw_gbps"] == pytest.approx(run["algbw_gbps"] * M.bus_factor(collective, 6))
    assert result.idle_latency["samples"] > 0                 # the probe ran
    # the verdict, and its advice, as this size's own figures decide it
    assert_verdict_follows_from_runs(result.fidelity, result.runs)


def test_a_sweep_runs_with_only_the_parts_it_is_given(lab6, tmp_path):
    """The parts alongside a sweep are optional: with the latency probe
    alone the collective is still replayed and checked, its latency measured
    and probes.json written, and nothing of the parts it was not given is
    there (no link windows, verdict, simulation beside or samples.json);
    with none, the model's alpha is the stated default."""
    result = run_experiment(lab6, small(), tmp_path / "latency", parts=[Latency()])
    [run] = result.runs
    assert run["wrong"] == 0 and run["time_s"] > 0 and "p50_us" in run["latency"]
    assert not {"links", "wire_bytes", "simulated_s"} & set(run)
    assert result.idle_latency["samples"] > 0 and result.alpha_s != UNMEASURED_ALPHA_S
    assert "fidelity" not in result.to_dict() and "tiers" not in result.to_dict()
    assert [p.name for p in (tmp_path / "latency").iterdir()] == ["probes.json"]
    bare = run_experiment(lab6, small(), tmp_path / "bare", parts=[])
    assert bare.runs[0]["wrong"] == 0 and bare.alpha_s == UNMEASURED_ALPHA_S
    assert "latency" not in bare.runs[0] and not (tmp_path / "bare").exists()


def test_the_agents_windows_keep_every_queue_from_overflowing(lab6, tmp_path):
    """Each receiver clamps its window to a few frames or the NIC over 10 ms
    (lab/shaping.py): where three flows of a tree meet, a loss-based TCP
    would fill the 100-packet queue and drop; the clamped ones do not."""
    result = run_experiment(lab6, small(algorithm="tree", minbytes=2 << 20, maxbytes=2 << 20,
                                        piece_bytes=64 * 1024), tmp_path)
    run = result.runs[0]
    assert run["wrong"] == 0
    queued = max(l["peak_backlog_bytes"] or 0 for l in run["links"].values())
    assert queued > 0                                    # the queues were used
    assert sum(l["drops"] or 0 for l in run["links"].values()) == 0, {i: (l["drops"], l["peak_backlog_bytes"]) for i, l in run["links"].items()}


def test_iperf3_engine_replays_the_schedule_and_reports(lab6, tmp_path):
    result = run_experiment(lab6, small(collective="allgather", engine="iperf3",
                                        minbytes=256 * 1024, maxbytes=256 * 1024), tmp_path)
    run = result.runs[0]
    assert run["engine"] == "iperf3" and run["wrong"] is None and run["time_s"] > 0
    assert isinstance(run["retransmits"], int) and run["retransmits"] >= 0
    # AllGather moves (n-1)/n of the buffer out of every rank: it crossed the fabric
    moved = sum(l["tx_bytes"] for i, l in run["links"].items() if i.startswith("leaf"))
    assert moved >= 6 * 5 / 6 * 256 * 1024


def test_scapy_engine_sends_rocev2_that_a_fabric_link_captures_as_bth(lab6, tmp_path):
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import UDP
    from scapy.utils import rdpcap

    pcap = tmp_path / "roce.pcap"
    # h3 (leaf1) sends to h4 (leaf2) in a SendRecv ring: capture where leaf2 hands it to h4
    tcpdump = lab6.host("leaf2").popen(["tcpdump", "-i", "leaf2-eth1", "-Q", "out", "-U", "-c", "8", "-w",
                                        str(pcap), "udp port 4791"], text=True)
    assert "listening on leaf2-eth1" in tcpdump.stderr.readline()
    try:
        result = run_experiment(lab6, small(collective="sendrecv", engine="scapy",
                                            minbytes=64 * 1024, maxbytes=64 * 1024), tmp_path)
        tcpdump.wait(10)
    finally:
        if tcpdump.poll() is None:
            tcpdump.kill()
    run = result.runs[0]
    assert run["engine"] == "scapy" and run["frames_sent"] == 6 * 64 and run["frames_lost"] == 0
    packets = rdpcap(str(pcap))
    assert len(packets) == 8
    for pkt in packets:
        assert pkt[UDP].dport == 4791 and pkt.haslayer(BTH)
        bth = pkt[BTH]
        assert bth.opcode in (0x00, 0x01, 0x02)                 # RC SEND first/middle/last
        assert (bth.dqpn >> 16) == 2                            # sent by rank 2 (h3)
        assert 0xC000 <= pkt[UDP].sport <= 0xFFFF               # RoCEv2 entropy range
    # the invariant CRC is right: Scapy computes the same one again
    first = packets[0][BTH]
    rebuilt = packets[0].copy()
    rebuilt[BTH].icrc = None
    assert bytes(rebuilt)[-4:] == bytes(packets[0])[-4:] and first.icrc is not None

