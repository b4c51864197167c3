"""The kinds of fabric as registered classes (topologies/kinds/): the registry
lists one per module, each kind takes exactly its keys and link classes,
lays out, prints and cuts as the examples show, tells the planner and the
Clos model what they need, and a new kind is found from its module alone,
all the way from YAML to a Fabric."""

import importlib
import re
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import topologies.kinds as kinds_package
from planner.designs import FORMS
from planner.simulate import WIRING_NAMES
from sim.clos import ClosShape
from topologies import kinds
from topologies.fabric import FabricError, LinkSpec, Routing, load_fabric, parse_fabric
from topologies.jsonschema import json_schema
from topologies.placement import place
from topologies.schema import current

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = REPO / "topologies"
KINDS_DIR = REPO / "topologies" / "kinds"

# kind: (required, optional, link classes needed, link classes it may take, cut, group's one)
TABLE = {
    "leaf-spine": (("spines", "leaves", "servers_per_leaf"), ("uplinks_per_spine",),
                   ("leaf_spine",), (), ("leaf_spine",), "leaf"),
    "rail-optimized": (("spines", "servers_per_unit"), ("units", "uplinks_per_spine"),
                       ("leaf_spine",), (), ("leaf_spine",), "unit"),
    "fat-tree": (("k",), ("servers_per_leaf",), ("leaf_spine",), ("spine_core",),
                 ("spine_core",), "pod"),
    "single-switch": (("servers",), (), (), (), (), "switch"),
    "full-mesh": (("servers",), (), ("leaf_spine",), (), ("mesh",), "server"),
}
# a valid fabric section per kind, the smallest
SMALL = {"leaf-spine": {"spines": 1, "leaves": 2, "servers_per_leaf": 1},
         "rail-optimized": {"spines": 1, "servers_per_unit": 2},
         "fat-tree": {"k": 2},
         "single-switch": {"servers": 2},
         "full-mesh": {"servers": 3}}


def doc(kind: str, fabric: dict, **links) -> str:
    needed = {c: {"rate_mbit": 10} for c in kinds.kind(kind).links}
    return yaml.safe_dump({"fabric": {"kind": kind, **fabric},
                           "links": {"server_leaf": {"rate_mbit": 10}, **needed, **links}})


def test_the_registry_lists_every_kind_in_order():
    assert kinds.names() == ("leaf-spine", "rail-optimized", "fat-tree", "single-switch",
                             "full-mesh")
    assert [k.name for k in kinds.kinds()] == list(TABLE)


def test_each_module_of_the_package_registers_one_kind():
    modules = sorted(p.stem for p in KINDS_DIR.glob("*.py") if p.stem not in ("__init__", "base"))
    assert sorted(type(k).__module__.rsplit(".", 1)[1] for k in kinds.kinds()) == modules


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="two fabric kinds are called 'leaf-spine'"):
        kinds.REGISTRY.add(type(kinds.kind("leaf-spine"))())


def test_a_kind_taking_an_unknown_count_is_refused():
    class Odd(kinds.FabricKind):
        name, required = "odd", ("rings",)
    with pytest.raises(ValueError, match=r"odd: counts \['rings'\] are neither"):
        kinds.REGISTRY.add(Odd())
    assert "odd" not in kinds.names()


@pytest.mark.parametrize("name", list(TABLE))
def test_each_kind_says_what_it_takes(name):
    k = kinds.kind(name)
    required, optional, links, optional_links, cut, one = TABLE[name]
    assert (k.required, k.optional, k.links, k.optional_links, k.cut, k.group[0]) == (
        required, optional, links, optional_links, cut, one)
    assert k.takes() == required + optional


@pytest.mark.parametrize("name", list(TABLE))
def test_each_kind_loads_its_smallest_fabric(name):
    f = parse_fabric(doc(name, SMALL[name]), "t.yaml")
    assert f.kind == name and f.kind_class is kinds.kind(name)


@pytest.mark.parametrize("name, key", [(n, key) for n in TABLE for key in TABLE[n][0]])
def test_each_required_count_is_required(name, key):
    fabric = {k: v for k, v in SMALL[name].items() if k != key}
    with pytest.raises(FabricError, match=rf"t.yaml: fabric.{key}: missing; a {name} fabric "
                                          rf"needs it \(it takes {', '.join(TABLE[name][0] + TABLE[name][1])}\)"):
        parse_fabric(doc(name, fabric), "t.yaml")


@pytest.mark.parametrize("name", list(TABLE))
def test_a_count_of_another_kind_is_refused(name):
    other = next(key for key in kinds.counts() if key not in kinds.kind(name).takes())
    with pytest.raises(FabricError, match=rf"fabric.{other}: not used by a {name} fabric"):
        parse_fabric(doc(name, {**SMALL[name], other: 2}), "t.yaml")


@pytest.mark.parametrize("name", [n for n in TABLE if TABLE[n][2]])
def test_a_needed_link_class_is_required(name):
    text = yaml.safe_dump({"fabric": {"kind": name, **SMALL[name]},
                           "links": {"server_leaf": {"rate_mbit": 10}}})
    with pytest.raises(FabricError, match=rf"links.leaf_spine: missing; a {name} fabric needs "
                                          "this link class"):
        parse_fabric(text, "t.yaml")


@pytest.mark.parametrize("name, cls", [(n, c) for n in TABLE for c in ("leaf_spine", "spine_core")
                                       if c not in TABLE[n][2] + TABLE[n][3]])
def test_a_link_class_the_kind_lacks_is_refused(name, cls):
    with pytest.raises(FabricError, match=rf"links.{cls}: not used here: a {name} fabric has "
                                          "no such links"):
        parse_fabric(doc(name, SMALL[name], **{cls: {"rate_mbit": 10}}), "t.yaml")


def test_the_full_mesh_checks_its_size():
    with pytest.raises(FabricError, match=r"fabric.servers: expected at most 16 servers in a "
                                          r"full mesh \(it needs n\(n-1\)/2 links: 136 for 17\)"):
        parse_fabric(doc("full-mesh", {"servers": 17}), "t.yaml")
    parse_fabric(doc("full-mesh", {"servers": 16}), "t.yaml")


@pytest.mark.parametrize("file, head", [
    ("default.yaml", "2 spines x 2 leaves x 2 servers per leaf"),
    ("parallel-uplinks.yaml", "2 spines x 3 leaves x 2 servers per leaf (2 parallel uplinks "
                              "per spine)"),
    ("rail-optimized.yaml", "rail-optimized: 1 unit(s) of 8 servers on 4 rail leaves, 2 spines"),
    ("fat-tree-k4.yaml", "4-ary fat-tree: 4 pods, 8 edge, 8 aggregation and 4 core switches"),
    ("single-switch.yaml", "single switch"),
    ("full-mesh.yaml", "full mesh of 6 switches")])
def test_each_kind_heads_its_shape(file, head):
    f = load_fabric(TOPOLOGIES / file)
    assert f.kind_class.head(f) == head and f.shape().startswith(head)


@pytest.mark.parametrize("file, counts, wires", [
    ("default.yaml", {"leaf": 2, "spine": 2}, 4),
    ("rail-optimized.yaml", {"leaf": 4, "spine": 2}, 8),
    ("fat-tree-k4.yaml", {"leaf": 8, "agg": 8, "core": 4}, 32),
    ("single-switch.yaml", {"leaf": 1}, 0),
    ("full-mesh.yaml", {"leaf": 6}, 15)])
def test_each_kind_lays_out_its_switches_and_wires(file, counts, wires):
    f = load_fabric(TOPOLOGIES / file)
    layout = f.kind_class.layout(f.spec)
    assert layout.counts == counts and len(layout.wires) == wires
    assert len(layout.homes) == len({h.server for h in f.endpoints})


def test_link_kinds_take_their_class():
    assert [kinds.link_class(k) for k in ("server_leaf", "leaf_spine", "spine_core", "mesh",
                                          "intra_node", "pcie")] == [
        "server_leaf", "leaf_spine", "spine_core", "leaf_spine", "intra_node", "intra_node"]


def test_each_kind_names_a_design_of_the_planner():
    assert {k.name: k.planner_design for k in kinds.kinds()} == {
        "leaf-spine": "clos-2", "rail-optimized": "clos-2", "fat-tree": "clos-3",
        "single-switch": "single-switch", "full-mesh": "full-mesh"}
    assert {k.planner_design for k in kinds.kinds()} == set(FORMS)


def test_the_clos_wirings_are_the_kinds():
    assert {w: k.name for w, k in kinds.clos_wirings().items()} == {
        "server": "leaf-spine", "rail": "rail-optimized"}
    assert WIRING_NAMES == {"server": "server per leaf", "rail": "rail-optimized"}
    assert [FORMS[kinds.kind(k).planner_design].tiers for k in ("leaf-spine", "fat-tree")] == [2, 3]
    for wiring in kinds.clos_wirings():
        ClosShape(servers=4, gpus=2, nics=2, down=2, up=1, wiring=wiring)


@pytest.mark.parametrize("file", ["default.yaml", "rail-optimized.yaml", "leaf-spine-4gpu.yaml"])
def test_a_kinds_clos_wiring_puts_nics_where_its_layout_does(file):
    """The Clos model's leaf of a server's NIC is the leaf the kind cables it to."""
    f = load_fabric(TOPOLOGIES / file)
    k, nics = f.kind_class, f.spec["server"]["nics"]
    homes = k.layout(f.spec).homes
    down = max(sum(home.count(leaf) for home in homes) for leaf in range(1, len(f.leaves) + 1))
    assert k.clos_leaves(len(homes), nics, down) == len(f.leaves)
    assert [[k.clos_leaf(s, n, nics, down) + 1 for n in range(nics)]
            for s in range(len(homes))] == homes


RING = '''
"""ring: a switch per server, each cabled to the next, the last to the first."""

from topologies.kinds.base import Count, FabricError, FabricKind, Layout, register


@register
class Ring(FabricKind):
    name = "ring"
    required = ("servers",)
    optional = ("lanes",)
    counts = {"lanes": Count("parallel cables between neighbours", 1, 4)}
    links = ("leaf_spine",)
    wire_classes = {"ring": "leaf_spine"}
    cut = ("ring",)
    group = ("server", "servers", "each server with its switch")

    def check(self, spec, source):
        if spec["fabric"]["servers"] < 3:
            raise FabricError(source, "fabric.servers", "expected at least 3 in a ring")

    def layout(self, spec):
        n, lanes = spec["fabric"]["servers"], spec["fabric"]["lanes"] or 1
        wires = [("ring", ("leaf", i), ("leaf", i % n + 1)) for i in range(1, n + 1)
                 for _ in range(lanes)]
        return Layout({"leaf": n}, [[s] * spec["server"]["nics"] for s in range(1, n + 1)],
                      wires)

    def head(self, fabric):
        return f"ring of {fabric.spec['fabric']['servers']} switches"
'''


@pytest.fixture
def ring_module(tmp_path):
    """A package folder holding one new kind's module, on the kinds' path;
    taken away afterwards."""
    (tmp_path / "ring.py").write_text(textwrap.dedent(RING))
    kinds_package.__path__.append(str(tmp_path))
    try:
        yield tmp_path
    finally:
        kinds_package.__path__.remove(str(tmp_path))
        if "ring" in kinds.names():
            kinds.REGISTRY.remove("ring")
        sys.modules.pop("topologies.kinds.ring", None)
        importlib.invalidate_caches()


def test_a_new_kind_is_found_from_its_module_alone(ring_module):
    assert "ring" not in kinds.names()
    kinds.discover()
    assert kinds.names()[-1] == "ring"
    text = ("fabric: {kind: ring, servers: 4, lanes: 2}\n"
            "links: {server_leaf: {rate_mbit: 10}, leaf_spine: {rate_mbit: 20}}\n")
    f = parse_fabric(text, "ring.yaml")
    assert f.shape() == "ring of 4 switches = 4 servers, 4 switches, 12 links"
    ring = [l for l in f.links if l.kind == "ring"]
    assert len(ring) == 8 and {l.spec.rate_mbit for l in ring} == {20}
    assert f.oversubscription() == pytest.approx(10 / 80)
    assert sorted(place(f, 2).crossing.values()) == [4]            # 2 + 2 lanes cross
    schema = json_schema()
    assert "ring" in schema["properties"]["fabric"]["properties"]["kind"]["enum"]
    assert "lanes" in current()["fabric"][0]
    # its own checks, its keys and its link classes are the loader's
    for fabric, message in (({"servers": 2}, "fabric.servers: expected at least 3 in a ring"),
                            ({"servers": 3, "lanes": 5}, "fabric.lanes: expected a whole "
                                                         "number from 1 to 4, got 5"),
                            ({"servers": 3, "spines": 2}, "fabric.spines: not used by a ring "
                                                          "fabric (it takes servers, lanes)")):
        with pytest.raises(FabricError, match=re.escape(message)):
            parse_fabric(doc("ring", fabric), "ring.yaml")
    with pytest.raises(FabricError, match="fabric.lanes: not used by a leaf-spine fabric"):
        parse_fabric(doc("leaf-spine", {**SMALL["leaf-spine"], "lanes": 1}), "t.yaml")


def test_without_the_new_kind_the_schema_is_as_before():
    assert "ring" not in kinds.names() and "lanes" not in current()["fabric"][0]
    committed = (REPO / "docs" / "fabric.schema.json").read_text()
    assert '"ring"' not in committed


@pytest.mark.parametrize("name", ["default.yaml", "multi-gpu.yaml", "fat-tree-k4.yaml"])
def test_the_fabric_reads_its_links_and_routing_as_typed_fields(name):
    f = load_fabric(TOPOLOGIES / name)
    assert set(f.link_classes) == {k for k, v in f.spec["links"].items() if v}
    assert all(isinstance(spec, LinkSpec) for spec in f.link_classes.values())
    assert f.nic_rate_mbit == f.spec["links"]["server_leaf"]["rate_mbit"]
    assert f.fastest_rate_mbit == max(v["rate_mbit"] for v in f.spec["links"].values() if v)
    assert f.nics_per_server == f.spec["server"]["nics"]
    assert f.routing == Routing(**f.spec["routing"]) and f.routing.policy == f.policy
