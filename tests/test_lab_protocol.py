"""Every kind of lab provides what runs need of one (lab/protocol.py), by
extending Lab's one start through its hooks, and nothing outside lab/ probes
a lab for what it might have; a lab is handed its controller as a component;
the keeper of a kept lab uses only what KeptLab declares. Built, not
started: no root needed."""

import ast
from pathlib import Path
from types import SimpleNamespace

from harness.fabrics import leaf_spine
import pytest

from lab.cluster.cluster import ClusterLab
from lab.controller_process import OsKenController, RemoteController
from lab.host import LabError
from lab.lifecycle import Lab
from lab.cluster.machine import SliceLab
from lab.protocol import Controller, KeptLab, RunningLab

REPO = Path(__file__).resolve().parent.parent


def labs(tmp_path):
    fabric = leaf_spine(2, 2, 2)
    mine = {n.name for n in fabric.switches} | {h.name for h in fabric.endpoints}
    return {"lab": Lab(fabric, tmp_path),
            "cluster": ClusterLab(fabric, tmp_path, SimpleNamespace(machines=["a", "b"]),
                                  SimpleNamespace(node={})),
            "slice": SliceLab(fabric, mine, [], RemoteController("127.0.0.1", 6653), tmp_path)}


def test_every_kind_of_lab_provides_the_protocol(tmp_path):
    for name, lab in labs(tmp_path).items():
        assert isinstance(lab, RunningLab) and isinstance(lab, KeptLab), name


def test_only_a_cluster_lab_is_on_several_machines_and_names_them(tmp_path):
    built = labs(tmp_path)
    assert [lab.multi_machine for lab in built.values()] == [False, True, False]
    assert built["lab"].hosts() == [] and built["lab"].summary() is None
    built["cluster"].machines = [SimpleNamespace(host="m1"), SimpleNamespace(host="m2")]
    assert built["cluster"].hosts() == ["m1", "m2"]


def test_the_kinds_of_lab_share_one_start_and_differ_in_its_hooks(tmp_path):
    for cls in (ClusterLab, SliceLab):
        assert "start" not in vars(cls), f"{cls.__name__} copies Lab.start"
        assert {"check", "claim", "build", "settle"} & set(vars(cls))
    built = labs(tmp_path)
    # the head runs the controller; a machine's slice meets it over there
    assert isinstance(built["cluster"].controller, OsKenController)
    assert isinstance(built["slice"].controller, RemoteController)


def test_a_lab_is_handed_its_controller_as_a_component(tmp_path):
    fabric = leaf_spine(2, 2, 2)
    assert isinstance(Lab(fabric, tmp_path).controller, OsKenController)     # the default
    mine = OsKenController(ip="127.0.0.2")
    assert Lab(fabric, tmp_path, controller=mine).controller is mine
    for controller in (OsKenController(), RemoteController("10.0.0.1", 6653)):
        assert isinstance(controller, Controller)
    # spanning tree routes without one, whatever was given
    assert Lab(fabric.with_policy("stp"), tmp_path, controller=mine).controller is None


def test_a_fabric_that_needs_a_controller_and_was_given_none_is_refused(tmp_path):
    lab = Lab(leaf_spine(2, 2, 2), tmp_path / "lab", controller=None)
    with pytest.raises(LabError, match="the ecmp policy routes through a controller, and "
                                       "this lab was given none"):
        lab.start()
    assert not (tmp_path / "lab").exists()               # refused before anything was made


def test_the_keeper_uses_only_what_a_kept_lab_declares():
    """lab/kept/keeper.py reaches the lab it keeps through lab/protocol.py's
    KeptLab alone: every attribute it takes of `self.lab` or of a `lab`."""
    declared = {name for cls in (KeptLab, RunningLab) for name in vars(cls)
                if not name.startswith("_") or name in ("__enter__", "__exit__")}
    declared |= {name for cls in (KeptLab, RunningLab)
                 for name in getattr(cls, "__annotations__", {})}
    tree = ast.parse((REPO / "lab" / "kept" / "keeper.py").read_text())
    used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and ast.unparse(node.value) in ("self.lab", "lab")}
    assert used and used <= declared, used - declared


def probes(path: Path):
    """hasattr/getattr calls whose object is named like a lab."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr") and node.args):
            target = ast.unparse(node.args[0])
            if target in ("lab", "self.lab"):
                yield f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}"


def test_nothing_outside_the_lab_probes_a_lab_for_what_it_might_have():
    found = [p for d in ("traffic", "runs", "report", "harness", "bench")
             for path in (REPO / d).rglob("*.py") for p in probes(path)]
    found += list(probes(REPO / "run_topology.py"))
    assert not found
