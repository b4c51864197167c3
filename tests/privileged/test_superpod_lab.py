"""run_topology.py on multi-GPU fabrics, end to end: the figures it writes,
and the SuperPOD scalable unit (256 GPUs, 44 switches) built, checked pair by
pair, running a hierarchical AllReduce with the right data, and torn down to
nothing."""

import csv
import json
import os

import pytest

from harness import TOPOLOGIES
from harness.commands import run
from report.plots import is_png


PROBE_FRAME_BYTES = 64 + 8 + 20 + 14      # probe payload, UDP, IPv4, Ethernet


def test_run_topology_compares_algorithms_and_writes_the_figures(tmp_path, clean_host):
    proc = run(str(TOPOLOGIES / "multi-gpu.yaml"), "--json", "--results", str(tmp_path),
               "-a", "hierarchical", "--compare", "ring", "-b", "32K", "-e", "128K", "-n", "1",
               "-w", "0", timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    ring = summary["compared"]["ring"]["runs"]
    assert [r["algorithm"] for r in ring] == ["ring", "ring"]
    assert all(r["wrong"] == 0 for r in ring + summary["collectives"]["runs"])
    folder = tmp_path / os.path.basename(summary["results"])
    assert summary["collectives"]["figures"] == ["fabric.png", "busbw.png", "timeline.png"]
    for name in summary["collectives"]["figures"]:
        assert is_png(folder / name)
    # results.csv: every algorithm's rows, the one asked for first
    rows = list(csv.DictReader((folder / "results.csv").read_text().splitlines()))
    runs = summary["collectives"]["runs"] + ring
    assert [(r["algorithm"], int(r["payload_inter_node_bytes"])) for r in rows] == [
        (r["algorithm"], r["payload_bytes"]["inter"]) for r in runs]


@pytest.mark.slow
def test_the_superpod_unit_builds_runs_and_leaves_nothing(tmp_path, clean_host):
    proc = run(str(TOPOLOGIES / "superpod-su.yaml"), "--json", "--results", str(tmp_path),
               "-b", "64K", "-e", "64K", "-n", "1", "-w", "0", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["reachability"]["ok"] == summary["reachability"]["total"] == 256 * 255
    run_ = summary["collectives"]["runs"][0]
    assert (run_["algorithm"], run_["ranks"], run_["wrong"]) == ("hierarchical", 256, 0)
    # NVLink in memory (the YAML's scale_up): every byte between GPUs of a
    # server handed over in the agents (2 x 7/8 of 64 KiB per GPU), none on
    # the NVLink-class links
    wire = run_["wire_bytes"]
    assert wire["intra_node_in_memory"] == run_["payload_bytes"]["intra"] == 256 * 2 * 7 * 8192
    assert wire["intra_node"] < 10_000         # a stray neighbour discovery at most
    # rail-optimized: the inter-node step stays on the rail leaves; only the
    # latency probe (GPU 1 of server 1 to GPU 8 of server 32) crosses a spine,
    # a 106-byte frame each way per probe, however long the run took: from
    # its two rail leaves, and from no other
    per_leaf = {leaf: sum(v.values())
                for leaf, v in summary["collectives"]["uplink_tx_bytes"].items()}
    assert len(per_leaf) == 8 and sum(1 for b in per_leaf.values() if b) <= 2, per_leaf
    probes = json.loads((tmp_path / os.path.basename(summary["results"]) / "probes.json")
                        .read_text())
    # probes still in flight when the prober stopped are in no record: at
    # most one timeout's worth (1 s at 100 probes a second)
    assert sum(per_leaf.values()) <= (len(probes) + 100 + 20) * 2 * PROBE_FRAME_BYTES
