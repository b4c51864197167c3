"""The NCCL model (sim/nccl/): its graphs, its tuner's figures worked out
here by hand from NCCL's published formulas, its choice, its overrides, and
its answers against published measurements of real clusters
(bench/reality_bench.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import reality_bench
from networks import network
from sim import nccl
from sim.clos import ClosShape
from topologies.hardware import SERVERS, partition, server
from sim.nccl import delivered, graph, overrides, rails, rccl, tuner

H100, A100 = server("hgx-h100"), server("dgx-a100")
NVL72, MI300X = server("gb200-nvl72"), server("mi300x")
GIB = 1 << 30
NO_NVLS = reality_bench.NO_NVLS


def tuned(e):
    return e.time_us if e.tuned_us is None else e.tuned_us


def busbw(where, size, algo=None, proto=None):
    e = nccl.predict(where, "allreduce", size, algo, proto).chosen
    n = where.topo.ranks
    return size / (e.time_us * 1e3) * 2 * (n - 1) / n


# --- the published measurements -------------------------------------------------------------

def test_the_model_meets_published_measurements_of_real_clusters():
    """Issue 35's bar: large sizes' busbw median |sim/meas - 1| <= 0.10 and
    worst <= 0.30; small sizes' time median within 1.3x and worst 2x."""
    out = reality_bench.run()
    rows = out["rows"]
    assert len(rows) >= 24
    table = reality_bench.format_table(out)
    assert out["large"]["median_error"] <= 0.10 and out["large"]["worst_error"] <= 0.30, table
    assert out["small"]["median_factor"] <= 1.3 and out["small"]["worst_factor"] <= 2.0, table
    assert all(abs(r["ratio"] - 1) <= 0.35 for r in rows if r["nodes"] > 1)


def test_the_bench_covers_what_the_issue_names():
    rows = reality_bench.CASES
    gens = {server(c.server).gpu.arch for c in rows}
    assert {"ampere", "hopper"} <= gens
    assert any(c.nodes == 1 and c.algo for c in rows) and any(c.nodes == 1 and not c.algo
                                                              for c in rows)
    for nodes in (2, 4):
        assert any(c.nodes == nodes and c.algo and c.unit == "busbw" for c in rows)
        assert any(c.nodes == nodes and not c.algo and c.unit == "busbw" for c in rows)
    assert any(c.nodes * server(c.server).gpus >= 1000 for c in rows)
    assert any(c.unit == "us" and c.size == 8 for c in rows)
    assert any(c.unit == "speedup" for c in rows)
    assert all(c.source.startswith("https://") for c in rows)
    # scale-up as sold: a rack-scale NVLink domain alone and across racks, its partitions, and
    # AMD's Infinity Fabric mesh with RCCL, on one node and several
    nvl72 = [c for c in rows if c.tech == "nvl72"]
    assert any(c.nodes == 1 for c in nvl72) and any(c.nodes > 1 and not c.domain for c in nvl72)
    assert {c.algo for c in nvl72 if c.domain} >= {"tree", NO_NVLS}
    amd = [c for c in rows if c.tech == "amd-rccl"]
    assert any(c.nodes == 1 for c in amd) and any(c.nodes > 1 for c in amd)
    assert any(c.nodes >= 20 for c in nvl72)
    # every case names the technology it ran on; the issue's technologies and collectives
    assert {"infiniband", "roce", "efa", "tcpxo", "tcp", "nvlink"} <= {c.tag for c in rows}
    assert {"allgather", "reducescatter", "alltoall"} <= {c.collective for c in rows}
    # a case that set a parameter says which; most cases check
    assert 0 < sum(bool(c.fitted) for c in rows) <= len(rows) // 4


# --- graphs: NCCL's channels ----------------------------------------------------------------

def test_one_h100_server_rings_are_twelve_channels_of_30():
    g = graph.ring(graph.Topology(H100, 1, 8))
    assert (g.channels, g.bw_intra) == (12, 30)          # 6 x 60 found, then duplicated


def test_across_servers_one_ring_channel_per_nic_at_the_nic_speed():
    g = graph.ring(graph.Topology(H100, 4, 8))
    assert (g.channels, g.bw_inter) == (8, 48)            # 400G NIC 50, PCIe Gen5 48
    a = graph.ring(graph.Topology(A100, 4, 8))
    assert (a.channels, a.bw_inter) == (8, 24)            # 200G NIC 25, PCIe Gen4 24
    four = graph.ring(graph.Topology(replace(H100, nics=4), 4, 8))
    # 4 channels at 48, then duplicated (4 is not more than 4): 8 at 24
    assert (four.channels, four.bw_inter) == (8, 24)


def test_execution_channels_double_the_search_and_honour_min_channels():
    topo = graph.Topology(H100, 2, 8)
    g = graph.ring(topo)
    assert graph.execution_channels(topo, g) == 16
    assert graph.execution_channels(topo, g, 24) == 24
    assert graph.execution_channels(topo, g, 1000) == graph.MAX_CHANNELS


# --- the tuner's figures, by hand --------------------------------------------------------------

IB = network("infiniband")          # NCCL's own constants are InfiniBand's


def test_tree_ll_latency_is_nccls_formula():
    # base 6.8 + 2 x (chain of 7 NVLink hops at 0.6 + log2(servers) network hops at 5.0)
    for nodes in (2, 4, 16):
        where = nccl.cluster(H100, nodes, network=IB)
        expect = 6.8 + 2 * (7 * 0.6 + math.floor(math.log2(nodes)) * 5.0)
        assert tuner.latency_us(where, "allreduce", "tree", "LL") == pytest.approx(expect)
        choice = nccl.predict(where, "allreduce", 8).chosen
        assert choice.name == "Tree/LL"
        assert choice.time_us == pytest.approx(expect, rel=1e-3)


def test_ring_latency_pays_the_network_overhead_on_every_step_inside_a_server():
    where = nccl.cluster(H100, 2, network=IB)
    # 30 steps, 2 of them between servers (2.7 us), 28 at max(0.6 NVLink, 1.0 Intel overhead)
    assert tuner.latency_us(where, "allreduce", "ring", "LL") == pytest.approx(
        6.6 + 28 * 1.0 + 2 * 2.7)
    amd = nccl.cluster(replace(H100, cpu="amd"), 2, network=IB)
    assert tuner.latency_us(amd, "allreduce", "ring", "LL") == pytest.approx(
        6.6 + 28 * 2.0 + 2 * 2.7)


def test_every_step_between_servers_pays_what_the_network_adds_and_only_those():
    ib = tuner.latency_us(nccl.cluster(H100, 4, network=IB), "allreduce", "tree", "LL")
    # RoCE's switch (0.6 us against InfiniBand's 0.13) on each of the 2 x log2(4) network hops
    roce = nccl.cluster(H100, 4, network=network("roce"))
    assert roce.extra_us == pytest.approx(0.6 - 0.13)
    assert tuner.latency_us(roce, "allreduce", "tree", "LL") == pytest.approx(ib + 4 * 0.47)
    # a path of 3 switches and 2 us of cable, and a transport of 20 us a message
    far = nccl.cluster(H100, 4, network=network("tcp"),
                       net_extra_us=network("tcp").path_extra_us(3, 2.0))
    assert far.extra_us == pytest.approx(3 * 0.6 + 2.0 - 0.13 + 20.0)
    assert tuner.latency_us(far, "allreduce", "tree", "LL") == pytest.approx(ib + 4 * far.extra_us)
    # inside one server nothing of the network is paid
    one = [tuner.latency_us(nccl.cluster(H100, 1, network=network(n)), "allreduce", "ring", "LL")
           for n in ("infiniband", "tcp")]
    assert one[0] == one[1]


def test_a_transport_that_copies_through_the_cpus_caps_each_nic():
    sockets, verbs = (nccl.cluster(H100, 2, network=network(n)) for n in ("tcp", "roce"))
    big = 16 << 30
    slow = nccl.predict(sockets, "allreduce", big).chosen
    assert slow.busbw_model <= 8 * network("tcp").nic_gbytes_cap * 2 + 1e-9
    assert nccl.predict(verbs, "allreduce", big).chosen.time_us < slow.time_us / 10


def test_nvls_on_one_h100_server():
    # 8 heads: 9 x speed within 370.8 GB/s of NVLink -> 40; x 0.85 x 7/8 x 2 for AllReduce,
    # against the graph's inter figure 60; 8 channels
    where = nccl.cluster(H100, 1)
    expect_bus = 8 * min(40 * 0.85 * 7 / 8 * 2, 60)
    assert tuner.bus_bandwidth(where, "allreduce", "nvls", "Simple") == pytest.approx(expect_bus)
    assert tuner.algorithm_bandwidth(where, "allreduce", "nvls", "Simple") == pytest.approx(
        expect_bus * 8 / 14)
    assert nccl.predict(where, "allreduce", 4 * GIB).chosen.name == "NVLS/Simple"


def test_nvlstree_hits_its_per_channel_cap_across_servers():
    assert tuner.bus_bandwidth(nccl.cluster(H100, 2), "allreduce", "nvls_tree",
                               "Simple") == pytest.approx(8 * 57.7)
    assert tuner.bus_bandwidth(nccl.cluster(H100, 4), "allreduce", "nvls_tree",
                               "Simple") == pytest.approx(8 * 45.5)


def test_protocol_efficiencies():
    where = nccl.cluster(H100, 4)
    simple = tuner.bus_bandwidth(where, "allreduce", "ring", "Simple")
    assert simple == pytest.approx(8 * 48)
    assert tuner.bus_bandwidth(where, "allreduce", "ring", "LL") == pytest.approx(
        min(20.4, 0.5 * simple))                     # Intel, more than two servers
    assert tuner.bus_bandwidth(where, "allreduce", "ring", "LL128") == pytest.approx(
        min(0.92 * simple, 8 * 36.7))
    slow = nccl.cluster(replace(H100, nic_gbps=25), 4)   # 3.125 GB/s NICs: 8 channels at 3
    assert tuner.bus_bandwidth(slow, "allreduce", "ring", "LL") == pytest.approx(0.5 * 8 * 3)


def test_one_h100_server_switches_from_ring_ll_to_nvls_near_a_megabyte():
    where = nccl.cluster(H100, 1)
    assert nccl.predict(where, "allreduce", 512 << 10).chosen.name == "Ring/LL"
    assert nccl.predict(where, "allreduce", 2 << 20).chosen.name == "NVLS/Simple"


def test_a_ring_of_small_size_runs_on_fewer_channels():
    where = nccl.cluster(H100, 1)
    small = nccl.predict(where, "allreduce", 64 << 10, "ring", "Simple").chosen
    big = nccl.predict(where, "allreduce", GIB, "ring", "Simple").chosen
    assert small.channels < big.channels == 24


# --- what NCCL allows ----------------------------------------------------------------------

@pytest.mark.parametrize("coll,algo,proto,where,ok", [
    ("allreduce", "nvls", "Simple", nccl.cluster(A100, 1), False),       # no NVLink SHARP
    ("allreduce", "nvls", "LL", nccl.cluster(H100, 1), False),           # Simple only
    ("allreduce", "nvls_tree", "Simple", nccl.cluster(H100, 1), False),  # several servers
    ("allreduce", "nvls", "Simple", nccl.cluster(H100, 2), False),       # needs CollNet
    ("allreduce", "nvls", "Simple", nccl.cluster(H100, 2, collnet=True), True),
    ("allreduce", "collnet_direct", "Simple", nccl.cluster(H100, 2), False),
    ("allreduce", "collnet_chain", "Simple", nccl.cluster(H100, 2, collnet=True), True),
    ("broadcast", "tree", "Simple", nccl.cluster(H100, 2), False),
    ("allgather", "pat", "Simple", nccl.cluster(H100, 4), False),        # one GPU a server
    ("allgather", "pat", "Simple", nccl.cluster(H100, 4, ppn=1), True),
    ("allreduce", "pat", "Simple", nccl.cluster(H100, 4, ppn=1), False),
])
def test_what_nccl_allows(coll, algo, proto, where, ok):
    assert tuner.allowed(where, coll, algo, proto) is ok


def test_every_collective_has_a_choice_on_every_server():
    for hw in SERVERS.values():
        for nodes in (1, 2, 5):
            where = nccl.cluster(hw, nodes)
            for coll in tuner.COLLECTIVES:
                assert nccl.predict(where, coll, 1 << 20).chosen.time_us > 0


# --- overrides -------------------------------------------------------------------------------

def test_overrides_narrow_the_choice():
    where = nccl.cluster(H100, 2)
    assert {e.algorithm for e in nccl.predict(where, "allreduce", GIB, "ring").table} == {"ring"}
    table = nccl.predict(where, "allreduce", GIB, "^nvls,nvlstree", "^LL128").table
    assert not any(e.algorithm.startswith("nvls") or e.protocol == "LL128" for e in table)
    per = overrides.enabled("ring;allreduce:tree")
    assert per["allreduce"]["algorithms"] == ["tree"]
    assert per["broadcast"]["algorithms"] == ["ring"]
    assert overrides.enabled(None, "LL128")["reduce"]["protocols"] == ["LL128"]


@pytest.mark.parametrize("algo,proto,words", [
    ("rign", None, "NCCL_ALGO: 'rign' is not one of"),
    (None, "LL256", "NCCL_PROTO: 'LL256'"),
    ("ring;tree", None, "needs a collective"),
    ("alltoall:ring", None, "'alltoall' is not one of"),
    ("", None, None),
])
def test_bad_overrides_are_one_sentence(algo, proto, words):
    if words is None:
        assert overrides.enabled(algo, proto)["allreduce"]["algorithms"] == list(tuner.ALGORITHMS)
        return
    with pytest.raises(overrides.OverrideError, match=words.replace("(", r"\(")):
        overrides.enabled(algo, proto)


def test_nothing_left_to_run_is_one_sentence():
    with pytest.raises(ValueError, match="no algorithm/protocol available for broadcast"):
        nccl.predict(nccl.cluster(H100, 2), "broadcast", GIB, "tree")


# --- laws --------------------------------------------------------------------------------------



@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(SERVERS)), nodes=st.integers(1, 4096),
       coll=st.sampled_from(tuner.COLLECTIVES),
       a=st.integers(0, 40), b=st.integers(0, 40))
def test_the_choice_is_the_quickest_and_time_grows_with_size(name, nodes, coll, a, b):
    where = nccl.cluster(SERVERS[name], nodes)
    small, big = sorted((1 << a, 1 << b))
    c1, c2 = (nccl.predict(where, coll, s) for s in (small, big))
    # NCCL compares its tuner's times (a run may go faster than its tuner thought: delivered.py)
    assert tuned(c1.chosen) == min(tuned(e) for e in c1.table)
    assert tuned(c2.chosen) >= tuned(c1.chosen)
    assert all(e.time_us <= tuned(e) + 1e-9 for e in c1.table + c2.table)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(SERVERS)), nodes=st.integers(2, 4096),
       size=st.integers(1, 1 << 36), share=st.floats(0.05, 1.0))
def test_a_ring_never_moves_more_than_the_nics_carry(name, nodes, size, share):
    hw = SERVERS[name]
    where = nccl.cluster(hw, nodes, fabric_share=share)
    e = nccl.predict(where, "allreduce", size, "ring").chosen
    n = where.topo.ranks
    bus = size / (e.time_us * 1e3) * 2 * (n - 1) / n
    # a ring's bus bandwidth is what each GPU sends; a server's GPUs send through its NICs
    assert bus * hw.gpus <= hw.nics * hw.nic_gbytes * share * hw.gpus + 1e-6
    assert bus <= hw.nics * min(hw.nic_gbytes, hw.pcie_gbytes) * share + 1e-6


# --- the fabric ---------------------------------------------------------------------------------

def test_rail_rings_on_a_rail_fabric_never_collide():
    shape = ClosShape(servers=16, gpus=8, nics=8, down=16, up=16, wiring="rail")
    assert rails.share(shape, 1, seeds=3) == 1.0


def test_ecmp_collisions_cost_and_more_flows_recover_some():
    shape = ClosShape(servers=64, gpus=8, nics=8, down=32, up=32, wiring="server")
    one, eight = rails.share(shape, 1), rails.share(shape, 8)
    assert one < eight < 1.0
    slow = nccl.cluster(H100, 64, fabric_share=one)
    assert busbw(slow, 16 * GIB, "ring") < busbw(nccl.cluster(H100, 64), 16 * GIB, "ring")


def test_one_server_needs_no_fabric():
    assert rails.share(ClosShape(servers=1, gpus=8, nics=8, down=8, up=8)) == 1.0


@pytest.mark.parametrize("servers,connections", [(16, 1), (64, 2), (100, 3)])
def test_the_rings_time_where_nothing_collides_is_the_simulators(servers, connections):
    from sim.clos import ClosNetwork
    from sim.phases import allreduce_phases, phase_seconds
    shape = ClosShape(servers=servers, gpus=8, nics=8, down=32, up=32, wiring="server")
    phases = [p for p in allreduce_phases("hierarchical", shape.n, 1 << 20, 8,
                                          channels=connections) if p.name.startswith("inter")]
    simulated = phase_seconds(ClosNetwork(replace(shape, fabric_bps=1e30)), phases)
    assert rails.ideal_seconds(shape, phases) == pytest.approx(simulated, rel=1e-9)


def test_the_reality_bench_prints_every_case_and_its_source(tmp_path, capsys):
    out = tmp_path / "reality.json"
    assert reality_bench.main(["--json", str(out)]) == 0
    text = capsys.readouterr().out
    for case in reality_bench.CASES:
        assert case.name in text and case.source in text
    assert "median |sim/meas - 1|" in text
    import json
    data = json.loads(out.read_text())
    assert len(data["rows"]) == len(reality_bench.CASES)


# --- scale-up as sold: an NVL72 rack, its partitions, AMD's full mesh ----------------------------

def _bench(name):
    return next(r for r in reality_bench.run()["rows"] if r["name"] == name)


def test_one_nvl72_rack_is_one_nccl_node_and_runs_nvls_at_the_published_figure():
    # MNNVL: the 72 GPUs are NCCL's node (its clique), reduced in the NVLink Switches
    where = nccl.cluster(NVL72, 1)
    assert where.topo.ppn == 72
    e = nccl.predict(where, "allreduce", 8 * GIB).chosen
    assert e.name == "NVLS/Simple"
    row = _bench("1x72 GB200 NVL72 default")
    assert row["ran"] == "NVLS/Simple" and abs(row["ratio"] - 1) <= 0.15


def test_partitions_change_what_nccl_runs():
    rack, nvl8 = nccl.cluster(NVL72, 1), nccl.cluster(partition(NVL72, 8), 9)
    assert rack.topo.ranks == nvl8.topo.ranks == 72
    assert nccl.predict(rack, "allreduce", 8 * GIB).chosen.name == "NVLS/Simple"
    # across 9 partitions the reduction leaves the NVLink domain: NVLSTree over the NICs
    assert nccl.predict(nvl8, "allreduce", 8 * GIB).chosen.name == "NVLSTree/Simple"
    assert busbw(nvl8, 8 * GIB) < busbw(rack, 8 * GIB)
    # NVLS off: rings through the partition's NICs, so NVL4 gets half of NVL8
    ring8 = busbw(nccl.cluster(partition(NVL72, 8), 3), 16 * GIB, NO_NVLS)
    ring4 = busbw(nccl.cluster(partition(NVL72, 4), 3), 16 * GIB, NO_NVLS)
    assert ring4 == pytest.approx(ring8 / 2, rel=0.03)
    for name in ("3 x NVL8 partitions ring", "3 x NVL4 partitions ring"):
        row = _bench(name)
        assert row["ran"] == "Ring/Simple" and abs(row["ratio"] - 1) <= 0.1, row


def test_a_partition_keeps_its_share_of_the_nics_and_refuses_what_cannot_split():
    p = partition(NVL72, 8)
    assert (p.gpus, p.nics, p.name) == (8, 8, "gb200-nvl72/nvl8")
    assert partition(NVL72, 72) is NVL72
    for bad, words in ((10, "a divisor of its 72 GPUs, got 10"), (144, "got 144")):
        with pytest.raises(ValueError, match=words):
            partition(NVL72, bad)
    with pytest.raises(ValueError, match="one full mesh of links"):
        partition(MI300X, 4)


def test_tree_across_partitions_runs_at_its_nics_though_nccl_picks_ring():
    where = nccl.cluster(partition(NVL72, 8), 3)
    tree = nccl.predict(where, "allreduce", 16 * GIB, "tree").chosen
    # 8 NIC channels at 48 GB/s, the busiest NIC of a 3-node double binary tree carrying 1.5x
    assert tree.algbw == pytest.approx(8 * 48 / 1.5)
    assert delivered.tree_load(2) == 1 and delivered.tree_load(4) == 2
    # the tuner's own figure (8 channels capped at 24 GB/s) is why NCCL runs Ring by default
    assert tree.tuned_us > tree.time_us
    assert nccl.predict(where, "allreduce", 16 * GIB, NO_NVLS).chosen.name == "Ring/Simple"
    assert abs(_bench("3 x NVL8 partitions tree")["ratio"] - 1) <= 0.05
    # before Blackwell a tree runs at the tuner's caps
    h100 = nccl.predict(nccl.cluster(H100, 3), "allreduce", 16 * GIB, "tree").chosen
    assert h100.tuned_us is None


def test_a_full_mesh_ring_gets_one_link_a_hop_and_as_many_rings_as_links():
    g = graph.ring(graph.Topology(MI300X, 1, 8))
    assert (g.channels, g.bw_intra) == (7, 48)           # 7 links of 48 GB/s, one ring each
    for links, link in ((3, 48.0), (7, 20.0), (4, 30.0)):
        gpu = replace(MI300X.gpu, nvlinks=links, link_gbytes=link)
        g = graph.ring(graph.Topology(replace(MI300X, gpu=gpu), 1, 8))
        assert g.bw_intra <= link                          # no channel outruns its link
        assert g.channels * g.bw_intra <= links * link + 1e-9


def test_rccl_prices_the_mesh_with_its_own_ratios_and_no_switch_reduction():
    one, two = nccl.cluster(MI300X, 1), nccl.cluster(MI300X, 2)
    names = {e.name for e in nccl.predict(one, "allreduce", 8 * GIB).table}
    assert not any(n.startswith("NVLS") for n in names)            # no switch to reduce in
    assert "Tree/Simple" not in names and "Ring/LL128" not in names
    assert "Tree/Simple" in {e.name for e in nccl.predict(two, "allreduce", 8 * GIB).table}
    assert tuner.bus_bandwidth(one, "allreduce", "ring", "Simple") == pytest.approx(7 * 48)
    g = graph.tree(two.topo)
    assert tuner.bus_bandwidth(two, "allreduce", "tree", "Simple") == pytest.approx(
        g.channels * g.bw_intra * rccl.BW_RATIO["tree"][0][2])
    for name in ("1x8 MI300X default", "2x8 MI300X default", "8x8 MI325X ring"):
        row = _bench(name)
        assert row["ran"] == "Ring/Simple" and abs(row["ratio"] - 1) <= 0.1, row
