"""The NCCL model's formulas, one by one, against figures worked out here by
hand from NCCL 2.30's published formulas and constants, as
/work/nccl-notes/nccl_model.md gives them (its section in each comment):
the search's graphs and duplication (3.2, 3.3), the tuner's latencies
(1.2-1.4), bandwidths (1.5-1.7), channels per call (1.8), what is allowed
and the choice (2). No figure here is computed with the model's own
functions; servers made up for a test are built from their counts."""

from __future__ import annotations

import pytest

from topologies.hardware import Gpu, Server, server
from sim.nccl import graph, tuner
from sim.nccl.graph import Graph, Topology
from sim.nccl.tuner import Cluster
from networks import network

H100, A100, B200 = server("hgx-h100"), server("dgx-a100"), server("hgx-b200")
NVL72 = server("gb200-nvl72")


def topo(hw, nodes, ppn=None):
    return Topology(hw, nodes, hw.gpus if ppn is None else ppn)


def where(hw, nodes, ppn=None, **options):
    """NCCL's own formulas: on InfiniBand, whose figures its constants are."""
    return Cluster(topo(hw, nodes, ppn), **{"network": network("infiniband"), **options})


def made_up(arch, links, link_gbytes, nvls=False, gpus=8, nics=8, nic_gbps=400, pcie=48.0,
            cpu="intel"):
    """A server of `gpus` GPUs of `arch` with `links` NVLinks of `link_gbytes`."""
    gpu = Gpu(f"{arch}-{links}x{link_gbytes}", arch, links, link_gbytes, nvls)
    return Server(f"test-{arch}", gpu, gpus, nics, nic_gbps, pcie, cpu)


def bus(cluster, coll, algo, proto):
    return tuner.bus_bandwidth(cluster, coll, algo, proto)


def lat(cluster, coll, algo, proto):
    return tuner.latency_us(cluster, coll, algo, proto)


# --- the search's graphs (3.1, 3.2) --------------------------------------------------------------

def test_the_graphs_of_common_servers():
    # 1 x H100: 370.8 GB/s of NVLink; 6 x 60 = 360 is the largest (9 x 40 = 360 ties, later),
    # duplicated (60 >= 50) to 12 x 30. NVLS: 9 x 40 <= 370.8, inter 2 x 40 capped at 60.
    assert graph.search(topo(H100, 1)) == {
        "ring": Graph("ring", 12, 30, 30), "tree": Graph("tree", 12, 30, 30),
        "nvls": Graph("nvls", 8, 40, 60), "collnet": Graph("collnet", 8, 30, 48)}
    # 2 x H100: one channel per NIC at 48 (NIC 50, PCIe 48); 48 < 50 with 8 > 4 channels: no
    # duplication. Tree: the fastest intra s with 8 s <= 370.8 is 40, below the ring's 48.
    assert graph.search(topo(H100, 2)) == {
        "ring": Graph("ring", 8, 48, 48), "tree": Graph("tree", 8, 48, 48),
        "nvls": Graph("nvls", 8, 40, 48), "collnet": Graph("collnet", 8, 48, 48)}


def test_tree_on_two_servers_raises_its_intra_speed_and_not_on_three():
    # 2 x A100 (200G NIC 25, PCIe Gen4 24): ring 8 x 24; tree's chain: 8 s <= 240 and
    # s <= 2 x 24 -> 30 (8 x 30 = 240 exactly) (3.2 pass 2, "higher bwIntra on <= 2 nodes")
    assert graph.tree(topo(A100, 2)) == Graph("tree", 8, 30, 24)
    assert graph.tree(topo(A100, 3)) == Graph("tree", 8, 24, 24)
    # NVLink of 239.5: 8 x 30 = 240 no longer fits -> 20, below the ring's 24
    assert graph.tree(topo(made_up("ampere", 1, 239.5, nic_gbps=200, pcie=24.0), 2)) \
        == Graph("tree", 8, 24, 24)
    # PCIe 15: ring 8 x 15; the chain may reach 2 x 15 = 30 exactly
    assert graph.tree(topo(made_up("ampere", 12, 20.0, nic_gbps=200, pcie=15.0), 2)) \
        == Graph("tree", 8, 30, 15)
    # PCIe 10: ring 8 x 10; the chain is held to 2 x 10 = 20 (30 would fit the NVLink)
    assert graph.tree(topo(made_up("ampere", 12, 20.0, nic_gbps=200, pcie=10.0), 2)) \
        == Graph("tree", 8, 20, 10)


def test_one_server_ring_search_keeps_the_largest_total_and_the_first_of_a_tie():
    # NVLink 121: 2 x 60 = 120, ..., 10 x 12 = 120, then 11 x 11 = 121 wins by 1;
    # 11 < 25: no duplication (3.2)
    assert graph.ring(topo(made_up("hopper", 11, 11.0), 1)) == Graph("ring", 11, 11, 11)
    # NVLink below the slowest speed: one channel at the slowest (3)
    assert graph.ring(topo(made_up("hopper", 1, 2.0), 1)) == Graph("ring", 1, 3, 3)
    # 1 x A100: 6 x 40 = 240 = 8 x 30 (a tie keeps 6 x 40), duplicated to 12 x 20 (3.3 table)
    assert graph.ring(topo(A100, 1)) == Graph("ring", 12, 20, 20)


def test_inter_node_rings_are_held_by_the_nvlink_and_the_nic():
    # NVLink 84 = 4 x 21: 8 NICs x s x 7/8 <= 84 -> s = 12 exactly (15 would need 105)
    assert graph.ring(topo(made_up("hopper", 4, 21.0), 2)) == Graph("ring", 8, 12, 12)
    # NVLink 104.5: 7 x 15 = 105 does not fit -> 12
    assert graph.ring(topo(made_up("hopper", 1, 104.5), 2)) == Graph("ring", 8, 12, 12)
    # PCIe 44.5 under a 50 GB/s NIC: 45 does not fit -> 42 (3.1, 3.2 sm90 inter speeds)
    slow_pcie = made_up("hopper", 18, 20.6, pcie=44.5)
    assert graph.nic_speed(topo(slow_pcie, 2)) == 42
    assert graph.ring(topo(slow_pcie, 2)) == Graph("ring", 8, 42, 42)
    # one GPU per server: one NIC, 48, duplicated (1 channel, not > 4) to 2 x 24
    assert graph.ring(topo(H100, 2, 1)) == Graph("ring", 2, 24, 24)
    # 6 GPUs per server: 6 NICs at 48, not duplicated (6 > 4 channels, 48 < 50)
    assert graph.ring(topo(H100, 2, 6)) == Graph("ring", 6, 48, 48)


def test_duplication_boundary_on_hopper_and_later():
    # connect.cc (3.2): doubled at half speed when bwIntra >= 25, except sm > 80 with
    # bwIntra < 50 and more than 4 channels; at most 64 channels
    h1, b1, a1 = topo(H100, 1), topo(B200, 1), topo(A100, 1)
    assert graph.duplicated(h1, 8, 50) == (16, 25)          # exactly 50 is not below 50
    assert graph.duplicated(h1, 8, 49) == (8, 49)
    assert graph.duplicated(h1, 4, 40) == (8, 20)           # exactly 4 channels is not more
    assert graph.duplicated(h1, 5, 40) == (5, 40)
    assert graph.duplicated(b1, 8, 40) == (8, 40)           # Blackwell is sm > 80 too
    assert graph.duplicated(a1, 8, 40) == (16, 20)          # Ampere always doubles
    assert graph.duplicated(a1, 4, 25) == (8, 12.5)         # exactly 25 doubles
    assert graph.duplicated(a1, 4, 24) == (4, 24)
    assert graph.duplicated(a1, 40, 30) == (64, 15)         # 80 capped at 64


def test_fastest_falls_back_to_the_slowest():
    assert graph.fastest_speed((5, 4, 3), lambda s: False) == 3
    assert graph.fastest_speed((5, 4, 3), lambda s: s < 5) == 4


def test_nvls_heads_fit_the_nvlink():
    # (heads + 1) x speed <= NVLink (3.3 "NVLS graph"): NVLink 360 = 18 x 20: 9 x 40 exactly
    assert graph.nvls(topo(made_up("hopper", 18, 20.0, True), 1)) == Graph("nvls", 8, 40, 60)
    # NVLink 359.5: 40 no longer fits -> 30; inter 2 x 30 = 60
    assert graph.nvls(topo(made_up("hopper", 1, 359.5, True), 1)) == Graph("nvls", 8, 30, 60)
    # NVLink 180: 9 x 20 -> 20; inter 2 x 20 = 40, under the table's top 60
    assert graph.nvls(topo(made_up("hopper", 9, 20.0, True), 1)) == Graph("nvls", 8, 20, 40)
    # several servers, 4 NICs for 8 heads: each head gets half a NIC, 48 / 2
    four_nics = made_up("hopper", 18, 20.6, True, nics=4)
    assert graph.nvls(topo(four_nics, 2)) == Graph("nvls", 8, 40, 24)
    # 4 heads and 8 NICs: a NIC per head at most, 48
    assert graph.nvls(topo(H100, 2, 4)) == Graph("nvls", 4, 60, 48)


def test_collnet_takes_a_channel_per_nic_in_use():
    # ring of 2 GPUs on 2 servers: 2 NICs at 48, duplicated -> 4 x 24; collnet: 2 NICs
    assert graph.collnet(topo(H100, 2, 2)) == Graph("collnet", 2, 24, 48)
    assert graph.collnet(topo(A100, 2)) == Graph("collnet", 8, 24, 24)
    # one GPU per server: one NIC in use (its ring: 1 x 48 duplicated to 2 x 24)
    assert graph.collnet(topo(H100, 2, 1)) == Graph("collnet", 1, 24, 48)


def test_execution_channels_on_hopper_across_servers():
    # 3.3: 2 x the search's; Hopper multi-node doubles again if bwIntra > 45 and < 16
    assert graph.execution_channels(topo(H100, 2, 6), graph.ring(topo(H100, 2, 6))) == 24
    assert graph.execution_channels(topo(B200, 2, 6), Graph("ring", 6, 48, 48)) == 24
    assert graph.execution_channels(topo(A100, 2, 6), Graph("ring", 6, 48, 48)) == 12
    assert graph.execution_channels(topo(H100, 1), Graph("ring", 6, 48, 48)) == 12
    assert graph.execution_channels(topo(H100, 2), Graph("ring", 4, 45, 45)) == 8
    assert graph.execution_channels(topo(H100, 2), Graph("ring", 4, 45.5, 45.5)) == 16
    assert graph.execution_channels(topo(H100, 3), Graph("ring", 4, 48, 48)) == 16
    assert graph.execution_channels(topo(H100, 2), Graph("ring", 8, 48, 48)) == 16
    assert graph.execution_channels(topo(H100, 2), Graph("ring", 8, 48, 48), 20) == 20


def test_log2_floor():
    assert [graph.log2_floor(n) for n in (0, 1, 2, 3, 4, 5, 8, 16)] == [0, 0, 1, 1, 2, 2, 3, 4]


# --- latencies (1.2-1.4; Intel host, NVLink row, IB plugin latency 0) ------------------------------

@pytest.mark.parametrize("hw,nodes,ppn,coll,algo,proto,us", [
    # Ring AG/RS: base + (nsteps - nInter) x max(intra, overhead) + nInter x net
    (H100, 1, 8, "allgather", "ring", "LL", 6.6 + 7 * 0.6),
    (H100, 1, 8, "reducescatter", "ring", "LL", 6.6 + 7 * 0.6),
    (H100, 2, 8, "allgather", "ring", "LL", 6.6 + 14 * 1.0 + 1 * 2.7),
    (H100, 3, 8, "reducescatter", "ring", "LL", 6.6 + 21 * 1.0 + 2 * 2.7),
    (H100, 3, 8, "allreduce", "ring", "LL", 6.6 + 42 * 1.0 + 4 * 2.7),
    # Simple: the overhead x3 (3.0 on Intel, under NVLink's 3.4; 6.0 on AMD, over it)
    (H100, 2, 8, "allgather", "ring", "Simple", 8.4 + 14 * 3.4 + 1 * 14.0),
    (A100, 2, 8, "allgather", "ring", "Simple", 8.4 + 14 * 6.0 + 1 * 14.0),
    # one GPU per server: the Tree NET latency (5.0 for LL) for every algorithm
    (H100, 2, 1, "allreduce", "ring", "LL", 6.6 + 2 * 5.0),
    # Broadcast/Reduce: base + one hw latency (sameChannels)
    (H100, 1, 8, "broadcast", "ring", "LL", 6.6 + 0.6),
    (H100, 2, 8, "broadcast", "ring", "LL", 6.6 + 2.7),
    (H100, 1, 8, "reduce", "ring", "Simple", 8.4 + 3.4),
    (H100, 2, 8, "reduce", "ring", "Simple", 8.4 + 14.0),
    # CollNetDirect: base + 2 (min(1, ppn-1) intra + 0.4 (ppn-1)) + net
    (H100, 2, 8, "allreduce", "collnet_direct", "Simple", 0 + 2 * (3.7 + 0.4 * 7) + 31),
    (H100, 2, 4, "allreduce", "collnet_direct", "Simple", 0 + 2 * (3.7 + 0.4 * 3) + 31),
    (H100, 2, 1, "allreduce", "collnet_direct", "Simple", 0 + 0 + 14.0),
    # CollNetChain: base + 2 (ppn-1) intra + net
    (H100, 2, 8, "allreduce", "collnet_chain", "Simple", 0 + 2 * 7 * 2.8 + 30),
    (H100, 2, 1, "allreduce", "collnet_chain", "Simple", 0 + 0 + 14.0),
    # NVLS: the hw latency replaces the base, + net on several servers
    (H100, 1, 8, "allreduce", "nvls", "Simple", 25.0),
    (H100, 2, 8, "allreduce", "nvls", "Simple", 25.0 + 18.0),
    (H100, 3, 8, "allreduce", "nvls", "Simple", 25.0 + 18.0),
    # NVLSTree: base + intra + 2 floor(log2 nodes) net
    (H100, 2, 8, "allreduce", "nvls_tree", "Simple", 0 + 25.0 + 2 * 1 * 20.9),
    (H100, 4, 8, "allreduce", "nvls_tree", "Simple", 0 + 25.0 + 2 * 2 * 20.9),
    # PAT (one GPU per server): base + floor(log2 nodes) x net / 3.5 + 2.8 nRanks
    (H100, 4, 1, "allgather", "pat", "LL", 8.0 + 2 * 5.0 / 3.5 + 2.8 * 4),
    (H100, 4, 1, "allgather", "pat", "Simple", 8.0 + 2 * 14.0 / 3.5 + 2.8 * 4),
    (H100, 8, 1, "reducescatter", "pat", "Simple", 8.0 + 3 * 14.0 / 3.5 + 2.8 * 8),
])
def test_latency_is_nccls_formula(hw, nodes, ppn, coll, algo, proto, us):
    assert lat(where(hw, nodes, ppn), coll, algo, proto) == pytest.approx(us, rel=1e-12)


# --- bandwidths (1.5-1.7) ----------------------------------------------------------------------

@pytest.mark.parametrize("hw,nodes,proto,cap", [
    # Ring LL: min(llMaxBw, 0.5 busBw); llMaxBws by GPU on one server, by CPU vendor on several:
    # row 0 (Intel and any vendor but AMD/mixed, so Arm) 39.0 / 20.4, row 1 (AMD) 22.5 / 19.0
    (H100, 1, "LL", 141.0), (H100, 2, "LL", 39.0), (H100, 3, "LL", 20.4),
    (A100, 2, "LL", 22.5), (A100, 3, "LL", 19.0),
    (NVL72, 2, "LL", 39.0), (NVL72, 3, "LL", 20.4),
])
def test_ring_ll_caps_by_gpu_then_by_host_cpu(hw, nodes, proto, cap):
    assert bus(where(hw, nodes, 8), "allreduce", "ring", proto) == pytest.approx(cap)


def test_ring_ll128_per_channel_cap_and_min_channels():
    # min(0.92 busBw, nCh x perChMaxRingLL128Bw) (1.6): 1 x H100 0.92 x 360 = 331.2 under
    # 12 x 36.7; 2 x H100 0.92 x 384 = 353.28 over 8 x 36.7 = 293.6, under 16 x 36.7
    assert bus(where(H100, 1), "allreduce", "ring", "LL128") == pytest.approx(331.2)
    assert bus(where(H100, 2), "allreduce", "ring", "LL128") == pytest.approx(293.6)
    assert bus(where(H100, 2, min_channels=16), "allreduce", "ring", "LL128") \
        == pytest.approx(353.28)


def test_tree_bandwidth_factors():
    one, two = where(H100, 1), where(H100, 2)
    # one H100: 12 x 30 = 360; min(0.92 x 360, 12 x 38.7) = 331.2
    assert bus(one, "allreduce", "tree", "Simple") == pytest.approx(331.2)
    assert bus(one, "allreduce", "tree", "LL") == pytest.approx(331.2 / 3.8)
    assert bus(one, "allreduce", "tree", "LL128") == pytest.approx(331.2 * 7 / 9)
    # two H100: 8 x 48 = 384; min(353.28, 8 x 41.4 = 331.2); LL128 x 120/128 = 310.5 over
    # 8 x 36.7 = 293.6
    assert bus(two, "allreduce", "tree", "Simple") == pytest.approx(331.2)
    assert bus(two, "allreduce", "tree", "LL128") == pytest.approx(293.6)
    # NCCL_MIN_NCHANNELS 16 lifts the per-channel caps: 353.28, then x 120/128 = 331.2
    lifted = where(H100, 2, min_channels=16)
    assert bus(lifted, "allreduce", "tree", "Simple") == pytest.approx(353.28)
    assert bus(lifted, "allreduce", "tree", "LL128") == pytest.approx(353.28 * 120 / 128)
    # two A100: the chain's 30 (a tree between two servers moves the buffer once each way,
    # which its bus bandwidth counts twice: held to twice the NIC's 24, not reached):
    # 240; min(220.8, 8 x 23.6 = 188.8), as tuning.cc's bwIntra for two servers gives it
    assert bus(where(A100, 2), "allreduce", "tree", "Simple") == pytest.approx(8 * 23.6)
    # but a NIC the fabric halves holds it: 8 x min(30, 2 x 24 x 0.5) x 0.92
    assert bus(where(A100, 2, fabric_share=0.5), "allreduce", "tree", "Simple") == \
        pytest.approx(0.92 * 8 * 24)
    # one B200: 8 x 90 duplicated to 16 x 45 = 720; min(662.4, 16 x 70); LL128 x 7/9 = 515.2
    # under the one-server cap 16 x 55.6 (two servers' 31.67 would cap it at 506.72)
    assert bus(where(B200, 1), "allreduce", "tree", "LL128") == pytest.approx(662.4 * 7 / 9)


def test_nvls_bandwidth():
    one = where(H100, 1)
    # intra = 40 x 0.85 x 7/8 = 29.75; AllReduce x 2 = 59.5 < inter 60: 8 x 59.5 = 476
    assert bus(one, "allreduce", "nvls", "Simple") == pytest.approx(476.0)
    # AG/RS x (ppn-1)/ppn: 29.75 x 7/8 = 26.03125: 8 x = 208.25
    assert bus(one, "allgather", "nvls", "Simple") == pytest.approx(208.25)
    assert bus(one, "reducescatter", "nvls", "Simple") == pytest.approx(208.25)
    # the fabric's share does not touch one server
    assert bus(where(H100, 1, fabric_share=0.5), "allreduce", "nvls", "Simple") \
        == pytest.approx(476.0)
    # NVLink 450: intra 50 (9 x 50), inter min(100, 60) = 60 < 50 x 0.85 x 7/8 x 2 = 74.375
    wide = made_up("hopper", 18, 25.0, True)
    assert bus(where(wide, 1, fabric_share=0.5), "allreduce", "nvls", "Simple") \
        == pytest.approx(8 * 60)
    # NVLSTree: inter 48 doubled on <= 2 servers; perChMaxNVLSTreeBw 57.7 (2) / 45.5 (>2)
    assert bus(where(H100, 2), "allreduce", "nvls_tree", "Simple") == pytest.approx(8 * 57.7)
    assert bus(where(H100, 3), "allreduce", "nvls_tree", "Simple") == pytest.approx(8 * 45.5)
    half = {"fabric_share": 0.5}
    assert bus(where(H100, 2, **half), "allreduce", "nvls_tree", "Simple") \
        == pytest.approx(8 * 48)                                # 48 x 2 x 0.5
    assert bus(where(H100, 3, **half), "allreduce", "nvls_tree", "Simple") \
        == pytest.approx(8 * 24)                                # 48 x 0.5
    assert bus(where(H100, 2, collnet=True, **half), "allreduce", "nvls", "Simple") \
        == pytest.approx(8 * 24)                                # NVLS: not doubled


def test_collnet_and_pat_bandwidth():
    # CollNetDirect: / (r - (r-1)/2), r = ppn / channels, x 0.85 on sm90+ (1.6)
    four_nics = made_up("hopper", 18, 20.6, True, nics=4)
    # ring 4 x 48 duplicated to 8 x 24; collnet 4 channels at the ring's 24: 96 / 1.5 x 0.85
    assert bus(where(four_nics, 2, collnet=True), "allreduce", "collnet_direct", "Simple") \
        == pytest.approx(96 / 1.5 * 0.85)
    assert bus(where(A100, 2, collnet=True), "allreduce", "collnet_direct", "Simple") \
        == pytest.approx(192.0)                                 # r = 1, Ampere: no 0.85
    assert bus(where(B200, 2, collnet=True), "allreduce", "collnet_direct", "Simple") \
        == pytest.approx(384 * 0.85)
    # CollNet's per channel is the graph's intra figure (24) even past two servers, not its
    # NIC's 48
    for nodes in (2, 3):
        c = where(H100, nodes, 2, collnet=True)
        assert bus(c, "allreduce", "collnet_direct", "Simple") == pytest.approx(2 * 24 * 0.85)
        assert bus(c, "allreduce", "collnet_chain", "Simple") == pytest.approx(2 * 24)
    # PAT on the ring's graph (2 x 24) x 0.75, on two servers and on four
    for nodes in (2, 4):
        assert bus(where(H100, nodes, 1), "allgather", "pat", "Simple") \
            == pytest.approx(48 * 0.75)


@pytest.mark.parametrize("hw,nodes,coll,algo,algbw", [
    # ring / NVLS: busBw x n / nsteps; tree and CollNet AllReduce: x 0.5; others as they are
    (H100, 1, "allreduce", "ring", 360 * 8 / 14),
    (H100, 1, "allgather", "ring", 360 * 8 / 7),
    (H100, 1, "reducescatter", "ring", 360 * 8 / 7),
    (H100, 1, "broadcast", "ring", 360.0),
    (H100, 1, "allreduce", "tree", 331.2 / 2),
    (H100, 1, "allgather", "nvls", 208.25 * 8 / 7),
    (H100, 2, "allreduce", "nvls_tree", 8 * 57.7 * 16 / 30),
])
def test_bus_to_algorithm_bandwidth(hw, nodes, coll, algo, algbw):
    assert tuner.algorithm_bandwidth(where(hw, nodes), coll, algo, "Simple") \
        == pytest.approx(algbw)


def test_pat_and_collnet_keep_their_bus_bandwidth_outside_allreduce():
    assert tuner.algorithm_bandwidth(where(H100, 2, 1), "allgather", "pat", "Simple") \
        == pytest.approx(36.0)
    assert tuner.algorithm_bandwidth(where(H100, 2, 2, collnet=True), "allreduce",
                                     "collnet_chain", "Simple") == pytest.approx(24.0)


# --- channels per call (1.8) ---------------------------------------------------------------------

def test_nvls_runs_on_a_fixed_channel_count():
    # 16 on sm90, 24 on sm100 in one NVLink domain, 32 on sm100 across (transport/nvls.cc)
    assert tuner.channels_used(where(H100, 1), "nvls", "Simple", 1 << 30) == 16
    assert tuner.channels_used(where(H100, 1, min_channels=32), "nvls", "Simple", 8) == 16
    assert tuner.channels_used(where(B200, 1, min_channels=40), "nvls", "Simple", 8) == 24
    assert tuner.channels_used(where(B200, 2, min_channels=40), "nvls_tree", "Simple", 8) == 32
    # CollNet: the execution channels, whatever the size (2 x 8 search channels)
    assert tuner.channels_used(where(H100, 2, collnet=True), "collnet_direct", "Simple", 8) == 16


def test_small_calls_drop_channels_by_bytes_per_thread():
    one = where(H100, 1)                            # 24 execution channels
    # Ring/LL: 512 threads x 8 B x nRanks (8) = 32 KiB per channel
    assert tuner.channels_used(one, "ring", "LL", 10 * 32768) == 10
    assert tuner.channels_used(one, "ring", "LL", 10 * 32768 - 1) == 9
    # Ring/Simple: 512 threads x 64 B = 32 KiB per channel, not times nRanks
    assert tuner.channels_used(one, "ring", "Simple", 5 * 32768) == 5
    # LL128: 640 x 8 B = 5 KiB per channel: a GiB uses all 24
    assert tuner.channels_used(one, "ring", "LL128", 1 << 30) == 24
    # Tree and PAT drop too, down to one channel
    assert tuner.channels_used(one, "tree", "LL", 8) == 1
    assert tuner.channels_used(one, "ring", "Simple", 8) == 1
    pat = where(H100, 2, 1)                         # ring 2 x 24 -> 4 execution channels
    assert tuner.channels_used(pat, "pat", "Simple", 8) == 1
    assert tuner.channels_used(pat, "pat", "Simple", 1 << 30) == 4


# --- estimate and choice (1.1, 1.7, 2) ------------------------------------------------------------

def test_the_ring_plateau_from_64_bytes_per_channel_and_rank():
    two = where(H100, 2)
    # 8 x 400G H100: 8 search channels x 16 ranks x 64 B = 8192 B
    base = 8.4 + 28 * 3.4 + 2 * 14.0                       # 131.6 us
    assert tuner.estimate(two, "allreduce", 8191, "ring", "Simple").latency_us \
        == pytest.approx(base)
    assert tuner.estimate(two, "allreduce", 8192, "ring", "Simple").latency_us \
        == pytest.approx(base * 1.4)
    # only Ring/Simple AllReduce on several servers
    assert tuner.estimate(where(H100, 1), "allreduce", 1 << 30, "ring", "Simple").latency_us \
        == pytest.approx(8.4 + 14 * 3.4)
    assert tuner.estimate(two, "allreduce", 1 << 30, "ring", "LL").latency_us \
        == pytest.approx(6.6 + 28 * 1.0 + 2 * 2.7)
    assert tuner.estimate(two, "allgather", 1 << 30, "ring", "Simple").latency_us \
        == pytest.approx(8.4 + 14 * 3.4 + 14.0)


def test_an_estimate_carries_its_figures():
    one = where(H100, 1)
    e = tuner.estimate(one, "allreduce", 1 << 20, "ring", "LL")
    assert (e.busbw_model, e.algbw) == (pytest.approx(141.0), pytest.approx(141.0 * 8 / 14))
    assert e.time_us == pytest.approx(6.6 + 14 * 0.6 + (1 << 20) / (1000 * 141.0 * 8 / 14))
    e = tuner.estimate(one, "allreduce", 1 << 30, "nvls", "Simple")
    assert (e.busbw_model, e.algbw) == (pytest.approx(476.0), pytest.approx(476.0 * 8 / 14))


def test_a_pair_of_no_bandwidth_is_not_run_and_a_slow_one_is():
    # an Ampere GPU whose switch would reduce: nvlsEfficiency 0 -> bw 0 -> skipped (1.1)
    nvls_ampere = made_up("ampere", 12, 20.0, True)
    assert tuner.estimate(where(nvls_ampere, 1), "allreduce", 1 << 20, "nvls", "Simple") is None
    # a 1 GB/s NIC: one channel at 0.24 GB/s, algbw 0.24 (AllReduce of 2 ranks: x 2/2)
    slow = made_up("hopper", 18, 20.6, nic_gbps=8)
    e = tuner.estimate(where(slow, 2, 1), "allreduce", 1 << 20, "ring", "Simple")
    assert e is not None and e.algbw == pytest.approx(0.24)


def test_the_choice_of_a_tie_is_the_earlier_and_defaults_fill_what_is_not_narrowed():
    # one GPU per server: CollNetDirect and CollNetChain both cost 14 us (the Tree NET
    # latency), so a 0-byte call ties and goes to the earlier, CollNetDirect (2)
    c = where(H100, 2, 1, collnet=True)
    choice = tuner.choose(c, "allreduce", 0, {"algorithms": ["collnet_chain", "collnet_direct"]})
    assert [e.time_us for e in choice.table] == [pytest.approx(14.0)] * 2
    assert choice.chosen.algorithm == "collnet_direct"
    assert (choice.collective, choice.nbytes) == ("allreduce", 0)
    only_ring = tuner.choose(where(H100, 1), "allreduce", 1 << 20, {"algorithms": ["ring"]})
    assert [e.protocol for e in only_ring.table] == ["LL", "LL128", "Simple"]
    only_ll = tuner.choose(where(H100, 1), "allreduce", 1 << 20, {"protocols": ["LL"]})
    assert [e.algorithm for e in only_ll.table] == ["tree", "ring"]


def test_an_unknown_collective_is_one_sentence():
    with pytest.raises(ValueError, match="prices allreduce, allgather, reducescatter, "
                                         "broadcast, reduce, not 'alltoall'"):
        tuner.choose(where(H100, 1), "alltoall", 1 << 20)


@pytest.mark.parametrize("c,coll,algo,proto,ok", [
    (where(H100, 1), "allgather", "tree", "Simple", False),
    (where(H100, 1), "reducescatter", "tree", "Simple", False),
    (where(H100, 1), "allgather", "nvls", "Simple", True),
    (where(H100, 1), "reducescatter", "nvls", "Simple", True),
    (where(H100, 1), "reduce", "tree", "Simple", False),
    (where(H100, 1), "broadcast", "tree", "Simple", False),
    (where(H100, 1), "reduce", "ring", "LL", True),
    (where(H100, 1, 2), "allreduce", "nvls", "Simple", True),
    (where(H100, 1, 1), "allreduce", "nvls", "Simple", False),
    (where(H100, 1, collnet=True), "allreduce", "collnet_direct", "Simple", False),
    (where(H100, 2, collnet=True), "allreduce", "collnet_direct", "Simple", True),
    (where(H100, 2, collnet=True), "allreduce", "collnet_chain", "Simple", True),
    (where(H100, 2, collnet=True), "allreduce", "collnet_chain", "LL", False),
    (where(H100, 2, collnet=True), "allreduce", "collnet_direct", "LL128", False),
    (where(H100, 2, collnet=True), "allgather", "collnet_direct", "Simple", False),
    (where(NVL72, 2, 8, collnet=True), "allreduce", "collnet_chain", "Simple", True),
    (where(NVL72, 2, 9, collnet=True), "allreduce", "collnet_chain", "Simple", False),
])
def test_what_nccl_allows_at_the_edges(c, coll, algo, proto, ok):
    assert tuner.allowed(c, coll, algo, proto) is ok


# --- NCCL_ALGO / NCCL_PROTO (2.4) ----------------------------------------------------------------

@pytest.mark.parametrize("algo,proto,words", [
    ("^rign", None, "NCCL_ALGO: 'rign' is not one of collnetchain, collnetdirect, nvls, "
                    "nvlstree, pat, ring, tree"),
    (" ", None, "NCCL_ALGO: an empty list"),
    ("ring;allreduce:", None, "NCCL_ALGO: an empty list"),
    (None, "allreduce:LL256", "NCCL_PROTO: 'LL256' is not one of ll, ll128, simple"),
    ("alltoall:ring", None, "NCCL_ALGO: 'alltoall' is not one of allreduce, allgather, "
                            "reducescatter, broadcast, reduce"),
    # the first ':' splits a collective from its list
    ("allreduce:ring:tree", None, "NCCL_ALGO: 'ring:tree' is not one of"),
])
def test_bad_overrides_name_the_variable_and_the_choices(algo, proto, words):
    from sim.nccl import overrides
    with pytest.raises(overrides.OverrideError) as err:
        overrides.enabled(algo, proto)
    assert str(err.value).startswith(words)
