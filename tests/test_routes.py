"""ECMP path computation on several fabric shapes, traced hop by hop."""

import pytest

from controller.routes import compute_plan
from harness.fabrics import leaf_spine
from tests.flowtable import trace

SHAPES = [(2, 2, 2, 1), (4, 8, 4, 1), (2, 3, 2, 2), (3, 2, 1, 3)]


@pytest.mark.parametrize("spines,leaves,servers,parallel", SHAPES,
                         ids=lambda v: str(v))
def test_ecmp_uses_every_shortest_path(spines, leaves, servers, parallel):
    f = leaf_spine(spines, leaves, servers, parallel)
    plans = compute_plan(f)
    for src in f.endpoints:
        for dst in f.endpoints:
            if src is dst:
                continue
            paths = trace(f, plans, src.name, dst.ip)
            assert all(p[-1] == dst.name for p in paths), paths
            if src.leaf == dst.leaf:
                assert paths == ((src.name, src.leaf, dst.name),)
            else:
                # one path per spine (parallel links share the node sequence)
                assert {p[2] for p in paths} == {s.name for s in f.spines}
                assert all(len(p) == 5 for p in paths)


def test_leaf_groups_hold_every_uplink_including_parallel_ones():
    f = leaf_spine(2, 3, 2, parallel=2)
    plan = compute_plan(f)["leaf1"]
    assert plan.groups == {2: (3, 4, 5, 6), 3: (3, 4, 5, 6)}
    assert plan.routes["10.0.1.2"] == ("output", 2)
    assert plan.routes["10.0.3.1"] == ("group", 3)
    # a spine spreads over its parallel links to the destination leaf
    assert compute_plan(f)["spine2"].groups == {1: (1, 2), 2: (3, 4), 3: (5, 6)}
    assert plan.arp_to_controller and not compute_plan(f)["spine1"].arp_to_controller


def test_single_path_pins_each_destination_leaf_to_one_spine():
    f = leaf_spine(4, 8, 2, policy="single-path")
    plans = compute_plan(f)
    assert all(not p.groups for p in plans.values())
    for dst in f.endpoints:
        spines = {trace(f, plans, src.name, dst.ip)[0][2] for src in f.endpoints
                  if src.leaf != dst.leaf}
        assert len(spines) == 1
    used = {trace(f, plans, "h1", d.ip)[0][2] for d in f.endpoints if d.leaf != "leaf1"}
    assert used == {"spine1", "spine2", "spine3", "spine4"}   # leaves spread over spines


def test_a_dead_uplink_is_avoided_everywhere():
    f = leaf_spine(2, 3, 1)
    # leaf2 <-> spine1 down (leaf2 port 2, spine1 port 2)
    plans = compute_plan(f, frozenset({("leaf2", 2)}))
    assert plans["leaf1"].routes["10.0.2.1"] == ("output", 3)    # only via spine2
    assert plans["leaf1"].groups.get(3) == (2, 3)                # leaf3 still has both
    for src in f.endpoints:
        for dst in f.endpoints:
            if src is not dst:
                for p in trace(f, plans, src.name, dst.ip):
                    assert p[-1] == dst.name and ("leaf2" not in (p[0], p[-1]) or "spine1" not in p)


def test_a_dead_server_link_removes_only_that_server():
    f = leaf_spine(2, 2, 2)
    plans = compute_plan(f, frozenset({("leaf1", 1)}))
    assert "10.0.1.1" not in plans["leaf2"].routes and "10.0.1.1" not in plans["spine1"].routes
    assert "10.0.1.2" in plans["leaf2"].routes
