"""Cluster mode's pure layer: where each node of a fabric runs when it is
spread over several machines, the cluster: section and --cluster, and what
--check prints of it. Nothing is built."""

import pytest

import run_topology
from runner import on_lab
from harness import TOPOLOGIES
from harness.commands import run
from topologies.fabric import FabricError, load_fabric, parse_fabric
from topologies.placement import (Placement, PlacementError, spread_over, brief, cluster_of,
                                  groups_of, place, placement_text)

FILES = ["default.yaml", "multi-gpu.yaml", "rail-optimized.yaml", "superpod-su.yaml",
         "fat-tree-k4.yaml", "leaf-spine-4x4.yaml", "leaf-spine-4x8.yaml", "full-mesh.yaml",
         "leaf-spine-4gpu.yaml", "parallel-uplinks.yaml"]
LOCAL_KINDS = ("server_leaf", "pcie", "intra_node")    # never cut: a server stays whole


def fabric(name):
    return load_fabric(TOPOLOGIES / name)


def two_units():
    """superpod-su.yaml as two scalable units of 16 servers (the file has one)."""
    return fabric("superpod-su.yaml").edited(
        lambda spec: spec["fabric"].update(units=2, servers_per_unit=16))


def cases():
    for name in FILES:
        f = fabric(name)
        for n in range(1, len(groups_of(f)[0]) + 1):
            yield pytest.param(name, n, id=f"{name}-{n}")


@pytest.mark.parametrize("name,n", list(cases()))
def test_placement_keeps_servers_with_their_leaf_and_cuts_only_the_top_tier(name, n):
    f = fabric(name)
    p = place(f, n)
    assert set(p.node) == {s.name for s in f.switches} | {h.name for h in f.endpoints}
    assert set(p.node.values()) == set(range(n))                  # no machine left empty
    for l in f.links:
        if l.kind in LOCAL_KINDS:
            assert p.node[l.a] == p.node[l.b], l
    crossing = p.crossing_links(f)
    assert {l.kind for l in crossing} <= set(f.kind_class.cut)
    for h in f.endpoints:                         # a GPU with its NVSwitch, PCIe switch, leaf
        assert len({p.node[x] for x in (h.name, h.leaf, h.node, h.nvswitch) if x}) == 1
    _check_sums(f, p)
    group = max(sum(1 for x in g if x in p.node and x in {h.name for h in f.endpoints})
                for g in groups_of(f)[0])
    endpoints = [c["endpoints"] for c in p.counts]
    assert max(endpoints) - min(endpoints) <= group


def _check_sums(f, p: Placement):
    crossing = p.crossing_links(f)
    assert sum(p.crossing.values()) == len(crossing)
    assert all(i < j for i, j in p.crossing)
    assert sum(c["links"] for c in p.counts) + len(crossing) == len(f.links)
    assert sum(c["tunnels"] for c in p.counts) == 2 * len(crossing)
    assert sum(c["switches"] for c in p.counts) == len(f.switches)
    assert sum(c["endpoints"] for c in p.counts) == len(f.endpoints)
    assert sum(c["servers"] for c in p.counts) == len({h.server for h in f.endpoints})
    for (i, j), k in p.crossing.items():
        assert k == sum(1 for l in crossing if {p.node[l.a], p.node[l.b]} == {i, j})


@pytest.mark.parametrize("name", FILES + ["single-switch.yaml"])
def test_one_machine_holds_everything_and_nothing_crosses(name):
    f = fabric(name)
    p = place(f, 1)
    assert set(p.node.values()) == {0} and p.crossing == {}
    assert p.counts[0]["links"] == len(f.links) and p.counts[0]["tunnels"] == 0


def test_leaf_spine_two_machines_spread_the_spines_round_robin():
    f = fabric("default.yaml")
    p = place(f, 2)
    assert [p.node[x] for x in ("leaf1", "h1", "h2", "spine1")] == [0] * 4
    assert [p.node[x] for x in ("leaf2", "h3", "h4", "spine2")] == [1] * 4
    assert p.crossing == {(0, 1): 2}                 # leaf1-spine2, leaf2-spine1


def test_rail_optimized_units_stay_whole():
    f = two_units()
    p = place(f, 2)
    for unit, machine in ((range(1, 9), 0), (range(9, 17), 1)):
        assert {p.node[f"leaf{i}"] for i in unit} == {machine}
    assert {p.node[h.name] for h in f.endpoints if h.leaf in ("leaf1", "leaf8")} == {0}
    assert [c["endpoints"] for c in p.counts] == [128, 128]
    assert p.crossing == {(0, 1): 32}        # 16 leaves x 4 spines: each spine's 8 far ones
    _check_sums(f, p)


def test_fat_tree_pods_stay_whole_and_cores_spread():
    f = fabric("fat-tree-k4.yaml")
    p = place(f, 4)
    for pod in range(4):
        names = [f"leaf{2 * pod + 1}", f"leaf{2 * pod + 2}", f"agg{2 * pod + 1}",
                 f"agg{2 * pod + 2}"]
        assert {p.node[x] for x in names} == {pod}
    assert sorted(p.node[f"core{i}"] for i in range(1, 5)) == [0, 1, 2, 3]


def test_full_mesh_spreads_servers_and_every_cable_between_machines_crosses():
    f = fabric("full-mesh.yaml")
    p = place(f, 3)
    assert [c["endpoints"] for c in p.counts] == [2, 2, 2]
    assert sum(p.crossing.values()) == 15 - 3          # 15 cables, 3 inside machines


@pytest.mark.parametrize("name,n,words", [
    ("default.yaml", 3, "a leaf-spine fabric keeps each leaf with its servers on one machine, "
                        "and this one has 2 leaves: at most 2 machines, got 3"),
    ("superpod-su.yaml", 4, "a rail-optimized fabric keeps each unit (its servers and rail "
                            "leaves) on one machine, and this one has 1 unit: at most 1 "
                            "machine, got 4"),
    ("fat-tree-k4.yaml", 5, "this one has 4 pods: at most 4 machines, got 5"),
    ("single-switch.yaml", 2, "this one has 1 switch: at most 1 machine, got 2"),
    ("full-mesh.yaml", 7, "this one has 6 servers: at most 6 machines, got 7"),
])
def test_too_many_machines_is_one_sentence(name, n, words):
    with pytest.raises(PlacementError) as exc:
        place(fabric(name), n)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_unequal_groups_are_balanced_within_one_group():
    sizes = [8, 1, 1, 1, 1, 4, 4, 2]
    machines = spread_over(sizes, 3)
    load = [sum(s for s, m in zip(sizes, machines) if m == k) for k in range(3)]
    assert max(load) - min(load) <= max(sizes) and set(machines) == {0, 1, 2}
    assert spread_over([2] * 5, 2) == [0, 0, 0, 1, 1]


def test_brief_shortens_runs():
    assert brief(["leaf1", "leaf2", "spine1", "h1", "h2", "h3", "h5"]) == \
        "leaf1, leaf2, spine1, h1..h3, h5"
    assert brief([f"h{i}" for i in range(1, 40, 2)]).endswith("and 8 more")


# --- the cluster: section and --cluster ------------------------------------------------------

BASE = open(TOPOLOGIES / "default.yaml").read()


@pytest.mark.parametrize("section,message", [
    ("{machines: [a, 'b c']}", "cluster.machines: expected a host name such as gpu-node1 or an "
                               "IPv4 address such as 10.77.0.11, got 'b c' as machine 2"),
    ("{machines: ['-oProxyCommand=x']}", "cluster.machines: expected a host name"),
    ("{machines: ['root@a']}", "cluster.machines: expected a host name"),
    ("{machines: [300.1.1.1]}", "cluster.machines: expected a host name such as gpu-node1 or "
                                "an IPv4 address such as 10.77.0.11, got '300.1.1.1' as "
                                "machine 1"),
    ("{machines: [a, b, a]}", "cluster.machines: expected each machine once, got 'a' twice"),
    ("{machines: []}", "cluster.machines: expected a list of 1 to 64 machines (host names or "
                       "IPv4 addresses), got an empty list"),
    ("{machines: a}", "cluster.machines: expected a list of 1 to 64 machines"),
    ("{machines: [a], tunel: ssh}", "cluster.tunel: unknown key (did you mean 'tunnel'?); "
                                    "expected one of machines, user, tunnel, controller"),
    ("{machines: [a], tunnel: gre}", "cluster.tunnel: expected one of vxlan, ssh, got 'gre'"),
    ("{machines: [a], user: 'x;y'}", "cluster.user: expected a user name"),
    ("{machines: [a], controller: 'a b'}", "cluster.controller: expected a host name"),
    ("{machines: [a], tls: 'no'}", "cluster.tls: expected true or false, got 'no'"),
    ("{machines: [a], tls: 1}", "cluster.tls: expected true or false, got 1"),
    ("{user: root}", "cluster.machines: missing; this key is required"),
])
def test_the_cluster_section_is_checked_in_one_sentence(section, message):
    with pytest.raises(FabricError) as exc:
        parse_fabric(f"{BASE}\ncluster: {section}\n", "c.yaml")
    assert str(exc.value).startswith(f"c.yaml: {message}") and "\n" not in str(exc.value)


def test_the_cluster_section_and_its_defaults():
    f = parse_fabric(f"{BASE}\ncluster: {{machines: [10.77.0.11, gpu-b.lab]}}\n", "c.yaml")
    c = cluster_of(f)
    assert (c.machines, c.user, c.tunnel, c.controller, c.tls) == (
        ("10.77.0.11", "gpu-b.lab"), "root", "vxlan", None, True)
    off = parse_fabric(f"{BASE}\ncluster: {{machines: [a], tls: false}}\n", "c.yaml")
    assert cluster_of(off).tls is False and cluster_of(off, ["x"]).tls is False
    assert "OpenFlow in plain TCP (tls: false)" in placement_text(off, cluster_of(off),
                                                                  place(off, 1))
    assert cluster_of(f, ["x", "y"]).machines == ("x", "y")
    assert cluster_of(fabric("default.yaml")) is None
    assert cluster_of(fabric("default.yaml"), ["x"]).where == "--cluster"


def test_check_prints_the_placement():
    proc = run("--check", "--cluster", "a,b", str(TOPOLOGIES / "default.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith(
        "  cluster: 2 machines, ssh as root, vxlan tunnels, controller here, on the address "
        "facing a, OpenFlow over TLS\n"
        "  machine 1 a: leaf1, spine1, h1, h2 (2 servers, 2 switches, 3 links)\n"
        "  machine 2 b: leaf2, spine2, h3, h4 (2 servers, 2 switches, 3 links)\n"
        "  tunnels: 1-2: 2 links (2 links cross machines, over vxlan)\n")
    assert "cluster" not in run("--check", str(TOPOLOGIES / "default.yaml")).stdout


@pytest.mark.parametrize("flags,message", [
    (["--cluster", "a,b,c"], "error: --cluster: a leaf-spine fabric keeps each leaf with its "
                             "servers on one machine, and this one has 2 leaves: at most 2 "
                             "machines, got 3\n"),
    (["--cluster", "a,a"], "error: argument --cluster: expected each machine once, got 'a' "
                           "twice\n"),
    (["--cluster", "a,b;reboot"], "error: argument --cluster: expected a host name such as "
                                  "gpu-node1 or an IPv4 address such as 10.77.0.11, got "
                                  "'b;reboot' as machine 2\n"),
])
def test_check_refuses_a_bad_cluster_in_one_sentence(flags, message):
    proc = run("--check", *flags, str(TOPOLOGIES / "default.yaml"))
    assert proc.returncode == 2 and proc.stderr == message


@pytest.mark.parametrize("section,flags,why", [
    ("{machines: [a, b]}", ["--cli"], "--cli opens Mininet's prompt"),
    ("{machines: [a, b]}", ["--policy", "stp"], "the stp policy has no controller"),
    ("{machines: [a, b], tunnel: ssh}", [], "cluster.tunnel ssh (Mininet's RemoteSSHLink)"),
])
def test_a_cluster_run_refuses_what_it_cannot_do_before_building(tmp_path, monkeypatch, capsys,
                                                                  section, flags, why):
    """In-process, with the one way to a lab (runner/on_lab.py guarded) made to fail the test."""
    path = tmp_path / "c.yaml"
    path.write_text(f"{BASE}\ncluster: {section}\n")
    monkeypatch.setattr(on_lab, "guarded", lambda job: pytest.fail("would build"))
    assert run_topology.main([str(path), "--results", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: cluster.machines: a run across machines cannot do "
                          f"this: {why}") and err.count("\n") == 1