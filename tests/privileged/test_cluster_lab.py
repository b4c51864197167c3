"""A fabric spread over two machines of the test bed (devtools/testbed.py) in
cluster mode (lab/cluster/cluster.py, lab/cluster/machine.py): the default fabric and a
rail-optimized fabric of multi-GPU servers reach every pair and give every
collective right; a link between the machines fails and every pair still
reaches every other; run_topology.py runs across them, a training step too; teardown, Ctrl-C,
SIGTERM and a SIGKILLed head leave nothing on either machine or here."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from devtools import testbed
from lab.cluster.cluster import ClusterLab
from lab.ecn import kernel_support
from lab.reachability import all_pairs_reachability
from lab import records
from harness import TOPOLOGIES
from harness.commands import run, start
from harness.labs import OWNER_VARIABLE, ensure_no_testbed, foreign_records, our_state
from topologies.fabric import load_fabric, parse_fabric
from topologies.placement import cluster_of, place
from collectives import registry as R
from runs.experiment import Experiment
from runs.measured import run_experiment

MACHINES = ("10.77.0.11", "10.77.0.12")
pytestmark = [] if testbed.rootfs_current() else [pytest.mark.slow]

RAIL = """
name: rail-2units
fabric: {kind: rail-optimized, servers_per_unit: 2, units: 2, spines: 2, mtu: 9000}
server: {gpus: 2, nics: 2}
links:
  intra_node:  {rate_mbit: 40, queue_packets: 64}
  server_leaf: {rate_mbit: 10, queue_packets: 32}
  leaf_spine:  {rate_mbit: 10, queue_packets: 32}
"""


def machine_state(ip):
    """What a lab could leave on a machine: bridges, interfaces besides lo
    and eth0, lab records, lab-like processes."""
    out = subprocess.run(
        ["ssh", ip, "ovs-vsctl --timeout=5 list-br; echo ---; ip -o link show | "
         "grep -v ': lo:' | grep -v ': eth0@'; echo ---; ls /run/fabric-lab 2>/dev/null; "
         "echo ---; ps -eo args"], capture_output=True, text=True, timeout=30).stdout
    bridges, links, recs, procs = (part.split("\n") for part in out.split("---\n"))
    lab_like = re.compile(r"mininet:|lab\.cluster\.machine|-m controller|traffic\.programs|iperf3? ")
    return {"bridges": [b for b in bridges if b], "interfaces": [l for l in links if l],
            "records": [r for r in recs if r], "processes": [p for p in procs if lab_like.search(p)]}


def clean_everywhere(timeout=0):
    """{where: what is left}, empty when nothing is; waits up to `timeout`
    seconds for machines that tear down on their own."""
    deadline = time.monotonic() + timeout
    while True:
        left = {ip: {k: v for k, v in machine_state(ip).items() if v} for ip in MACHINES}
        left = {ip: v for ip, v in left.items() if v}
        theirs = set(foreign_records(os.environ[OWNER_VARIABLE]))
        here = [p for p in records.records() if p not in theirs]
        if here:
            left["head records"] = [p.name for p in here]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


@pytest.fixture(scope="module")
def bed():
    ensure_no_testbed()          # a live one fails the test; a dead one's record is removed
    up = subprocess.run(["scripts/lab", "testbed", "up", "2"], capture_output=True, text=True,
                        timeout=1800, cwd=testbed.PROJECT)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield MACHINES
    finally:
        down = subprocess.run(["scripts/lab", "testbed", "down"], capture_output=True,
                              text=True, timeout=300, cwd=testbed.PROJECT)
        assert down.returncode == 0, down.stdout + down.stderr


def cluster_lab(fabric, tmp_path):
    cluster = cluster_of(fabric, list(MACHINES))
    return ClusterLab(fabric, tmp_path, cluster, place(fabric, len(MACHINES)))


def small(**kw):
    base = dict(minbytes=48 * 1024, maxbytes=48 * 1024, iters=1, warmup=0, piece_bytes=8192,
                idle_seconds=0.2)
    return Experiment(**{**base, **kw})


def every_collective(lab, tmp_path, cases):
    """(collective, algorithm, #wrong) of each case that was not right."""
    bad = []
    for collective, algorithm in cases:
        root = 1 if collective in R.ROOTED else 0
        result = run_experiment(lab, small(collective=collective, algorithm=algorithm, root=root),
                                tmp_path / f"{collective}-{algorithm}")
        r = result.runs[0]
        if r["wrong"] != 0 or r["bad_chunk_elements"] != 0:
            bad.append((collective, algorithm, r["wrong"]))
        assert len(r["machines"]) == 2                 # each machine's CPU, reported
    return bad


def test_default_fabric_across_two_machines(bed, tmp_path):
    fabric = load_fabric(TOPOLOGIES / "default.yaml")
    before = our_state()
    with cluster_lab(fabric, tmp_path) as lab:
        assert {m.built["tag"] for m in lab.machines} and len(lab.tunnels) == 2
        for ip in MACHINES:                            # each machine holds its half
            assert len(machine_state(ip)["bridges"]) == 2
        reach = all_pairs_reachability(lab)
        assert reach.complete and reach.total == 12
        cases = [(c, R.ALGORITHMS[c][0]) for c in R.ALGORITHMS]
        assert every_collective(lab, tmp_path, cases) == []
        # a link between the machines fails: every pair still reaches every other
        crossing = next(l for l in fabric.links
                        if lab.placement.node[l.a] != lab.placement.node[l.b])
        lab.set_link(crossing.a, crossing.b, up=False)
        ends = {f"{crossing.a}:{crossing.a_port}", f"{crossing.b}:{crossing.b_port}"}
        lab.wait_programmed(timeout=10, until=lambda s: ends <= set(s["down_ports"]))
        reach = all_pairs_reachability(lab)
        assert reach.complete, reach.failures
        lab.set_link(crossing.a, crossing.b, up=True)
        lab.wait_programmed(timeout=10, until=lambda s: s["down_ports"] == [])
        assert all_pairs_reachability(lab).complete
    assert clean_everywhere() == {}
    assert our_state() == before


def test_rail_optimized_multi_gpu_across_two_machines(bed, tmp_path):
    fabric = parse_fabric(RAIL, "rail-2units.yaml")
    with cluster_lab(fabric, tmp_path) as lab:
        reach = all_pairs_reachability(lab)
        assert reach.complete and reach.total == 8 * 7
        cases = [(c, a) for c, algs in R.ALGORITHMS.items() for a in algs
                 if c != "allreduce" or a in ("ring", "hierarchical")]
        assert every_collective(lab, tmp_path, cases) == []
    assert clean_everywhere() == {}


def test_run_topology_across_two_machines(bed, tmp_path):
    proc = run("--cluster", ",".join(MACHINES), "-b", "64K", "-e", "64K",
               "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "cluster  2 machines: 1 10.77.0.11 built in" in proc.stdout
    assert "machines busiest during a size: 1 10.77.0.11 CPU" in proc.stdout
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    assert [m["host"] for m in summary["cluster"]["machines"]] == list(MACHINES)
    assert all(m["teardown_s"] is not None for m in summary["cluster"]["machines"])
    assert summary["collectives"]["runs"][0]["wrong"] == 0
    # the default technology marks ECN: each machine's part did what its kernel can, and said so
    have = kernel_support()
    assert [m["ecn"] for m in summary["cluster"]["machines"]] == \
        [{"marking": have["red"], "dctcp": have["dctcp"]}] * 2
    assert (summary["ecn"]["marking"], summary["ecn"]["dctcp"]) == (have["red"], have["dctcp"])
    assert [m["machine"] for m in summary["ecn"]["machines"]] == \
        [f"machine {i} ({h})" for i, h in enumerate(MACHINES, 1)]
    assert f": {summary['ecn']['note']}" in proc.stdout
    assert clean_everywhere() == {}


def test_a_training_step_across_two_machines(bed, tmp_path):
    """The rank agents on both machines run a step: compute timers, four
    buckets launched as the backward pass makes them, data right."""
    proc = run("--cluster", ",".join(MACHINES), "--step", "--layers", "4", "--params", "64Ki",
               "--bucket", "32K", "-n", "1", "-w", "0", "-d", "bfloat16", "--json",
               "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    step = json.loads(proc.stdout)["step"]
    assert step["wrong"] == 0 and [c["bucket"] for c in step["collectives"]] == [0, 1, 2, 3]
    run_ = step["runs"][0]
    assert run_["step_s"] >= max(run_["compute_s"], run_["comm_s"])
    assert clean_everywhere() == {}


def test_a_link_between_the_machines_fails_mid_collective(bed, tmp_path):
    """--fail on a VXLAN tunnel: both machines take their end down; the
    probe flows (started from a thread, over ssh) report it; #wrong 0."""
    proc = run("--cluster", ",".join(MACHINES), "-b", "1M", "-e", "1M", "-n", "8",
               "--fail", "leaf1-spine2@2+2", "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    [event] = summary["collectives"]["failures"]
    # the hit flows came back on another path while the tunnel was still down (waiting for
    # it would stop them about as long as it was down; tests/privileged/test_failures_lab.py)
    assert event["probe"]["flows"] == 8, event
    assert event["probe"]["stopped_ms"] < 0.75 * event["down_for_s"] * 1e3, event
    assert summary["collectives"]["runs"][0]["wrong"] == 0
    assert clean_everywhere() == {}


@pytest.mark.parametrize("how,when", [(signal.SIGINT, "building"), (signal.SIGINT, "reach"),
                                      (signal.SIGTERM, "# Collective test")])
def test_an_interruption_leaves_nothing_anywhere(bed, tmp_path, how, when):
    before = our_state()
    proc = start("--cluster", ",".join(MACHINES), "-b", "1M", "-e", "4M",
                 "--results", str(tmp_path))
    if when == "building":                 # as soon as a machine has begun building
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
                machine_state(ip)["processes"] for ip in MACHINES):
            time.sleep(0.05)
    else:
        for line in proc.stdout:
            if line.startswith(when):
                break
    proc.send_signal(how)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "the lab was torn down" in err
    assert clean_everywhere() == {}
    assert our_state() == before


def test_a_killed_head_leaves_nothing_on_the_machines(bed, tmp_path):
    """SIGKILL: no teardown here; each machine tears its part down as its ssh
    session ends, and --cleanup removes the head's record."""
    proc = start("--cluster", ",".join(MACHINES), "-b", "1M", "-e", "4M",
                 "--results", str(tmp_path))
    for line in proc.stdout:
        if line.startswith("reach"):
            break
    proc.kill()
    proc.communicate(timeout=30)
    left = clean_everywhere(timeout=60)
    left.pop("head records", None)
    assert left == {}
    cleanup = run("--cleanup")
    assert cleanup.returncode == 0 and "cleaned up after lab" in cleanup.stdout
    assert clean_everywhere() == {}


def test_a_machine_that_cannot_take_part_stops_the_run_before_anything_starts(bed, tmp_path):
    before = our_state()
    proc = run("--cluster", "10.77.0.11,10.77.0.19", "--results", str(tmp_path), timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == "error: not every machine can take part:"
    assert len(lines) == 2 and lines[1].startswith(
        "  10.77.0.19: cannot log in with ssh as root without a password")
    assert clean_everywhere() == {} and our_state() == before


def test_the_head_can_be_one_of_the_machines(bed, tmp_path):
    """run_topology.py on m1 with m1 and m2 as the cluster: m1 runs the
    controller and its own part (ssh to itself), on a machine that has never
    run a lab (no /run/fabric-lab yet)."""
    key = testbed.KEY
    subprocess.run(["scp", "-q", str(key), f"{MACHINES[0]}:/root/.ssh/id_ed25519"], check=True,
                   timeout=30)
    # the machine's ssh checks host keys too: the test bed's known_hosts is there
    setup = "chmod 600 /root/.ssh/id_ed25519 && rm -rf /run/fabric-lab"
    subprocess.run(["ssh", MACHINES[0], setup], check=True, timeout=30)
    try:
        proc = subprocess.run(
            ["ssh", MACHINES[0], f"cd {testbed.PROJECT} && .venv/bin/python run_topology.py "
             f"--cluster {','.join(MACHINES)} -b 256K -e 256K --results /tmp/head-run"],
            capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "reach    12/12 server pairs reach each other" in proc.stdout
        assert re.search(r"controller 10\.77\.0\.11:\d+", proc.stdout)
    finally:
        subprocess.run(["ssh", MACHINES[0], "rm -rf /root/.ssh/id_ed25519 /root/.ssh/config "
                        "/tmp/head-run"], timeout=30)
    assert clean_everywhere() == {}
