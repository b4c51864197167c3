"""Every kind of fabric, derived from its YAML: the counts a designer would
check on paper (switches, links, ports, endpoints), rail wiring, and routes
that take every endpoint to every other without passing through a server, and
every GPU to the others of its server over the NVSwitch."""

import itertools
from collections import Counter
from pathlib import Path

import pytest

from controller.routes import compute_plan
from tests.flowtable import trace
from topologies.fabric import load_fabric, parse_fabric

TOPOLOGIES = Path(__file__).parent.parent / "topologies"


def ports(fabric):
    """Ports in use per switch."""
    used = Counter()
    for link in fabric.links:
        for node in (link.a, link.b):
            used[node] += 1
    return {s.name: used[s.name] for s in fabric.switches}


def roles(fabric):
    return Counter(s.role for s in fabric.switches)


def test_superpod_scalable_unit():
    f = load_fabric(TOPOLOGIES / "superpod-su.yaml")
    assert len(f.endpoints) == 256                                  # 32 nodes x 8 GPUs
    assert roles(f) == {"nvswitch": 32, "leaf": 8, "spine": 4}
    kinds = Counter(l.kind for l in f.links)
    assert kinds == {"intra_node": 256, "server_leaf": 256, "leaf_spine": 32}
    p = ports(f)
    assert all(p[f"leaf{r}"] == 32 + 4 for r in range(1, 9))      # 32 NICs down, 4 spines up
    assert all(p[f"spine{j}"] == 8 for j in range(1, 5))
    assert all(p[f"h{s}nv"] == 8 for s in range(1, 33))           # 8 GPUs on each NVSwitch
    gpu = f.endpoint("h7g3")                                        # two interfaces, as a DGX GPU
    assert (gpu.intf, gpu.nv_intf, gpu.nvswitch, gpu.server) == ("h7g3-eth0", "h7g3-eth1",
                                                                   "h7nv", "h7")
    assert gpu.ip == "10.0.3.7" and gpu.nv_ip == "172.31.0.51"
    assert f.oversubscription() == 1.0


def test_rail_wiring_puts_gpu_i_on_rail_leaf_i():
    f = load_fabric(TOPOLOGIES / "superpod-su.yaml")
    for gpu in f.endpoints:
        assert gpu.leaf == f"leaf{gpu.gpu}"
        link = next(l for l in f.links if (l.a, l.a_port) == (gpu.name, 0))
        assert link.kind == "server_leaf" and (link.b, link.b_port) == (gpu.leaf, gpu.port)
    # every server has exactly one NIC on each rail leaf
    nics = Counter((f.endpoint(l.a).server, l.b) for l in f.links if l.kind == "server_leaf")
    assert set(nics.values()) == {1} and len(nics) == 32 * 8


def test_two_units_have_their_own_rail_leaves():
    f = parse_fabric("""
fabric: {kind: rail-optimized, units: 2, servers_per_unit: 2, spines: 2}
server: {gpus: 2, nics: 2}
links: {server_leaf: {rate_mbit: 1}, leaf_spine: {rate_mbit: 1}, intra_node: {rate_mbit: 8}}
""", "t.yaml")
    assert [(g.name, g.leaf) for g in f.endpoints] == [
        ("h1g1", "leaf1"), ("h1g2", "leaf2"), ("h2g1", "leaf1"), ("h2g2", "leaf2"),
        ("h3g1", "leaf3"), ("h3g2", "leaf4"), ("h4g1", "leaf3"), ("h4g2", "leaf4")]


@pytest.mark.parametrize("name,switches,links,endpoints", [
    ("fat-tree-k4.yaml", {"leaf": 8, "agg": 8, "core": 4}, 16 + 16 + 16, 16),
    ("single-switch.yaml", {"leaf": 1}, 8, 8),
    ("full-mesh.yaml", {"leaf": 6}, 6 + 15, 6),
    ("rail-optimized.yaml", {"nvswitch": 8, "leaf": 4, "spine": 2}, 32 + 32 + 8, 32),
    ("leaf-spine-4gpu.yaml", {"nvswitch": 8, "leaf": 4, "spine": 2}, 32 + 32 + 8, 32),
    # 4 GPUs share one NIC: a PCIe switch per server as well
    ("multi-gpu.yaml", {"nvswitch": 4, "node": 4, "leaf": 2, "spine": 2}, 16 + 16 + 4 + 4, 16),
    ("default.yaml", {"leaf": 2, "spine": 2}, 4 + 4, 4),
])
def test_counts_of_each_kind(name, switches, links, endpoints):
    f = load_fabric(TOPOLOGIES / name)
    assert roles(f) == switches
    assert len(f.links) == links and len(f.endpoints) == endpoints
    assert len({s.dpid for s in f.switches}) == len(f.switches)
    assert len({h.ip for h in f.endpoints}) == len(f.endpoints)
    nv = [h.nv_ip for h in f.endpoints if h.nv_ip]
    assert len(set(nv)) == len(nv)


def test_fat_tree_is_k_ary():
    f = load_fabric(TOPOLOGIES / "fat-tree-k4.yaml")
    p = ports(f)
    assert set(p.values()) == {4}                   # every switch uses all k ports
    # each aggregation switch reaches k/2 cores, each core one agg in every pod
    for core in (s.name for s in f.switches if s.role == "core"):
        aggs = [l.a for l in f.links if l.b == core]
        pods = {(int(a[3:]) - 1) // 2 for a in aggs}
        assert len(aggs) == 4 and pods == {0, 1, 2, 3}


def test_oversubscription_by_counts_and_by_rates():
    f = load_fabric(TOPOLOGIES / "oversubscribed.yaml")
    assert f.oversubscription() == 3.0
    slow = f.edited(lambda s: s["links"]["leaf_spine"].update(rate_mbit=5))
    assert slow.oversubscription() == 6.0


ALL_PAIRS = ["fat-tree-k4.yaml", "single-switch.yaml", "full-mesh.yaml", "rail-optimized.yaml",
             "leaf-spine-4gpu.yaml", "multi-gpu.yaml"]


@pytest.mark.parametrize("name", ALL_PAIRS)
def test_every_endpoint_reaches_every_other_and_no_server_is_transit(name):
    f = load_fabric(TOPOLOGIES / name)
    plans = compute_plan(f)
    nodes = {s.name for s in f.nodes}
    for src, dst in itertools.permutations(f.endpoints, 2):
        for path in trace(f, plans, src.name, dst.ip):
            assert path[-1] == dst.name, path
            inner = set(path[1:-1]) & nodes
            assert inner <= {src.node, dst.node}, path
            if src.node and src.node == dst.node:
                assert path == (src.name, src.node, dst.name)     # over PCIe, not the network


@pytest.mark.parametrize("name", ["multi-gpu.yaml", "rail-optimized.yaml"])
def test_gpus_of_a_server_reach_each_other_over_the_nvswitch(name):
    f = load_fabric(TOPOLOGIES / name)
    plans = compute_plan(f)
    for gpu in f.endpoints:
        plan = plans[gpu.nvswitch]
        assert plan.routes[gpu.nv_ip] == ("output", gpu.nv_port)
        assert set(plan.routes) == {h.nv_ip for h in f.endpoints if h.server == gpu.server}
        assert not plan.groups and not plan.uplinks           # nothing leaves the server


def test_fat_tree_spreads_over_all_cores_between_pods():
    f = load_fabric(TOPOLOGIES / "fat-tree-k4.yaml")
    paths = trace(f, compute_plan(f), "h1", f.endpoint("h16").ip)
    assert len(paths) == 4                           # (k/2)^2 equal-cost paths
    assert {p[3] for p in paths} == {"core1", "core2", "core3", "core4"}


def test_rail_traffic_stays_on_its_rail_leaf():
    f = load_fabric(TOPOLOGIES / "superpod-su.yaml")
    plans = compute_plan(f)
    same_rail = trace(f, plans, "h1g3", f.endpoint("h32g3").ip)
    assert same_rail == (("h1g3", "leaf3", "h32g3"),)
    cross_rail = trace(f, plans, "h1g3", f.endpoint("h32g5").ip)
    assert {p[2] for p in cross_rail} == {"spine1", "spine2", "spine3", "spine4"}
    assert all(p[1] == "leaf3" and p[3] == "leaf5" for p in cross_rail)


def test_a_gpu_whose_nic_is_down_still_sends_by_another():
    f = parse_fabric("""
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
server: {gpus: 4, nics: 2}
links: {server_leaf: {rate_mbit: 1}, leaf_spine: {rate_mbit: 1}, intra_node: {rate_mbit: 8}}
""", "t.yaml")
    gpu = f.endpoint("h1g1")
    plans = compute_plan(f, frozenset({(gpu.node, gpu.nic_port)}))
    assert plans["h1"].uplinks[gpu.node_port] != gpu.nic_port
    for path in trace(f, plans, "h1g1", f.endpoint("h4g2").ip):
        assert path[-1] == "h4g2"


def test_calibration_rates_keep_every_link_class_in_proportion():
    """--calibrate changes the NIC rate; the rest follows in proportion."""
    from runs.rate_calibration import at_rate
    topologies = TOPOLOGIES
    single = at_rate(load_fabric(topologies / "single-switch.yaml"), 40)   # no uplinks at all
    assert single.spec["links"]["server_leaf"]["rate_mbit"] == 40
    gpus = at_rate(load_fabric(topologies / "multi-gpu.yaml"), 20)          # 10 -> 20 Mbit/s
    links = gpus.spec["links"]
    assert (links["server_leaf"]["rate_mbit"], links["leaf_spine"]["rate_mbit"],
            links["intra_node"]["rate_mbit"]) == (20, 20, 200)
