"""AMD Instinct servers on a real fabric (topologies/amd-mesh.yaml): 2 servers
x 4 GPUs, no NVSwitch, a direct link between every pair of a server's GPUs
and a NIC per GPU. Every GPU reaches every other (its server's at their
NVLink address, over the mesh), traffic to a peer of the same server leaves
by the link to that peer and no other, and a ring AllReduce is right."""

import re

import pytest

from harness import TOPOLOGIES
from harness.labs import built
from harness.traffic import settled
from lab.counters import interface_counters
from lab.reachability import all_pairs_reachability
from runs.experiment import Experiment
from runs.measured import run_experiment
from topologies.fabric import load_fabric

AMD_MESH = TOPOLOGIES / "amd-mesh.yaml"


@pytest.fixture(scope="module")
def mesh_lab(tmp_path_factory):
    with built(load_fabric(AMD_MESH), tmp_path_factory) as lab:
        yield lab


def sent(lab, gpu: str) -> dict:
    """Bytes sent on each interface of a GPU, read in its own namespace."""
    return interface_counters("tx_bytes", lab.host(gpu).pid)


def test_every_gpu_reaches_every_other(mesh_lab):
    reach = all_pairs_reachability(mesh_lab)
    assert reach.complete and reach.total == 8 * 7, reach.failures


def test_a_peer_of_the_server_is_reached_by_the_link_to_it(mesh_lab):
    fabric = mesh_lab.fabric
    h1g2, h1g4 = fabric.endpoint("h1g2"), fabric.endpoint("h1g4")
    route = mesh_lab.host("h1g2").cmd(f"ip -o route get {h1g4.nv_ip}")
    assert f"dev {h1g2.mesh_intf(4)} " in route and f"src {h1g2.nv_ip}" in route, route
    before = settled(lambda: sent(mesh_lab, "h1g2"))
    out = mesh_lab.host("h1g2").cmd(f"ping -n -q -c 20 -i 0.01 -s 1000 {h1g4.nv_ip}")
    received = int(re.search(r"(\d+) received", out).group(1))
    after = settled(lambda: sent(mesh_lab, "h1g2"))
    grew = {i: after[i] - before[i] for i in after if i.startswith("h1g2-")}
    assert received == 20 and grew[h1g2.mesh_intf(4)] >= 20 * 1000, (out, grew)
    others = [h1g2.intf, h1g2.mesh_intf(1), h1g2.mesh_intf(3)]
    assert all(grew[i] < 2000 for i in others), grew      # not the NIC, not another peer


def test_ring_allreduce_is_right_and_crosses_each_mesh_hop_once(mesh_lab, tmp_path):
    fabric = mesh_lab.fabric
    before = {g.name: settled(lambda g=g: sent(mesh_lab, g.name)) for g in fabric.endpoints}
    exp = Experiment(algorithm="ring", minbytes=64 * 1024, maxbytes=64 * 1024, iters=1,
                     warmup=0, piece_bytes=8192, idle_seconds=0.2)
    result = run_experiment(mesh_lab, exp, tmp_path)
    run_ = result.runs[0]
    assert run_["wrong"] == 0 and run_["bad_chunk_elements"] == 0 and run_["ranks"] == 8
    # the monitor reads the mesh links in the GPUs' namespaces: the payload, headers on top
    assert run_["wire_bytes"]["intra_node"] >= run_["payload_bytes"]["intra"] > 0
    after = {g.name: settled(lambda g=g: sent(mesh_lab, g.name)) for g in fabric.endpoints}
    # ring h1g1 -> h1g2 -> h1g3 -> h1g4 -> h2g1 ... -> h2g4 -> h1g1: inside a server
    # each hop carries 2 x 7/8 of the 64 KiB on the link from g to g+1
    share = 2 * 7 * 64 * 1024 // 8
    for g in fabric.endpoints:
        grew = {i: after[g.name][i] - before[g.name][i] for i in after[g.name]
                if i.startswith(f"{g.name}-")}
        if g.gpu < 4:
            assert grew[g.mesh_intf(g.gpu + 1)] >= share, (g.name, grew)
            assert grew[g.intf] < share // 4, (g.name, grew)    # not over the network
        else:
            assert grew[g.intf] >= share, (g.name, grew)         # to the next server
