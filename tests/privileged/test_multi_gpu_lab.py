"""Multi-GPU servers on a real fabric: 4 servers x 4 GPUs, each GPU on its
server's NVSwitch (NVLink-class links) and, through a PCIe switch, on the
server's one NIC. Every GPU reaches every other, traffic between GPUs of one
server stays on the NVSwitch, and the hierarchical AllReduce is right."""

import re

import pytest

from lab.reachability import all_pairs_reachability
from harness import TOPOLOGIES
from harness.labs import built
from harness.traffic import read_counter, settled
from topologies.fabric import load_fabric
from traffic.engines import Job, make_engine
from runs.experiment import Experiment
from runs.measured import run_experiment

MULTI_GPU = TOPOLOGIES / "multi-gpu.yaml"


@pytest.fixture(scope="module")
def lab16(tmp_path_factory):
    with built(load_fabric(MULTI_GPU), tmp_path_factory) as lab:
        yield lab


def counters(intfs):
    return {i: read_counter(i) for i in intfs}


def test_every_gpu_reaches_every_other(lab16):
    reach = all_pairs_reachability(lab16)
    assert reach.complete and reach.total == 16 * 15


def test_traffic_inside_a_server_stays_on_nvlink(lab16):
    fabric = lab16.fabric
    nic = [l.a_intf for l in fabric.links if l.kind == "server_leaf" and l.a == "h1"]
    pcie = [l.b_intf for l in fabric.links if l.kind == "pcie" and l.b == "h1"]
    gpu2 = next(l.b_intf for l in fabric.links if l.kind == "intra_node" and l.a == "h1g2")
    before = counters(nic + pcie + [gpu2])
    proc = lab16.popen("h1g1", ["ping", "-n", "-q", "-c", "20", "-i", "0.01", "-s", "1000",
                                fabric.endpoint("h1g2").nv_ip], text=True)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    received = int(re.search(r"(\d+) received", out).group(1))
    after = settled(lambda: counters(nic + pcie + [gpu2]))
    assert after[gpu2] - before[gpu2] >= received * 1000 > 0   # delivered by the NVSwitch
    assert all(after[i] - before[i] < 2000 for i in nic + pcie)   # not by PCIe or the NIC


@pytest.mark.parametrize("algorithm", ["hierarchical", "ring"])
def test_allreduce_is_right_and_traffic_is_split(lab16, tmp_path, algorithm):
    exp = Experiment(algorithm=algorithm, minbytes=64 * 1024, maxbytes=64 * 1024, iters=1,
                     warmup=0, piece_bytes=8192, idle_seconds=0.2)
    result = run_experiment(lab16, exp, tmp_path)
    run_ = result.runs[0]
    assert result.gpus_per_server == 4
    assert run_["wrong"] == 0 and run_["bad_chunk_elements"] == 0 and run_["ranks"] == 16
    payload, wire = run_["payload_bytes"], run_["wire_bytes"]
    size, n, local, m = 64 * 1024, 16, 4, 4
    if algorithm == "hierarchical":
        assert payload["inter"] == n * 2 * (m - 1) * size // (m * local)
        assert payload["intra"] == n * 2 * (local - 1) * size // local
    else:                          # the ring leaves each server once: 4 of its 16 hops
        assert payload["inter"] == 4 * 2 * (n - 1) * size // n
    assert wire["intra_node"] >= payload["intra"]           # and headers on top
    assert wire["network_to_servers"] >= payload["inter"]
    events = result.timeline["events"]
    assert {e["rank"] for e in events} == set(range(16))
    if algorithm == "hierarchical":
        assert {e["phase"] for e in events} == {"intra-node reduce-scatter",
                                                "inter-node allreduce", "intra-node allgather"}



def test_one_agent_process_drives_each_servers_gpus_from_their_namespaces(lab16):
    """The engine starts one process per server; each rank's sockets are
    made in its GPU's namespace, so its packets leave by that GPU's links:
    every GPU's NVLink port carries what the collective gives it."""
    fabric = lab16.fabric
    ranks = [e.name for e in fabric.endpoints]
    # the NVSwitch's side of each GPU's NVLink (in the root namespace)
    gpu_ports = [l.b_intf for l in fabric.links if l.kind == "intra_node"]
    before = settled(lambda: counters(gpu_ports))
    engine = make_engine("agents", fabric, ranks, lab16)
    try:
        assert len(engine.procs) == 4 and engine.groups == [
            list(range(s * 4, s * 4 + 4)) for s in range(4)]
        engine.prepare(Job("allreduce", "hierarchical", count=64 * 1024, local=4))
        assert engine.iterate(0, timeout=120)["wrong"] == 0
    finally:
        engine.close()
    after = settled(lambda: counters(gpu_ports))
    # the NVSwitch delivered to each GPU 2 x 3/4 of 256 KiB from its server's others
    assert all(after[p] - before[p] >= 2 * 3 * 64 * 1024 for p in gpu_ports), (before, after)
