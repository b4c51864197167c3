"""Every kind of lab provides what runs need of one (lab/protocol.py), by
extending Lab's one start through its hooks, and nothing outside lab/ probes
a lab for what it might have. Built, not started: no root needed."""

import ast
from pathlib import Path
from types import SimpleNamespace

from harness.fabrics import leaf_spine
from lab.cluster.cluster import ClusterLab
from lab.lifecycle import Lab
from lab.cluster.machine import SliceLab
from lab.protocol import RunningLab

REPO = Path(__file__).resolve().parent.parent


def labs(tmp_path):
    fabric = leaf_spine(2, 2, 2)
    mine = {n.name for n in fabric.switches} | {h.name for h in fabric.endpoints}
    return {"lab": Lab(fabric, tmp_path),
            "cluster": ClusterLab(fabric, tmp_path, SimpleNamespace(machines=["a", "b"]),
                                  SimpleNamespace(node={})),
            "slice": SliceLab(fabric, mine, [], ("127.0.0.1", 6653), tmp_path)}


def test_every_kind_of_lab_provides_the_protocol(tmp_path):
    for name, lab in labs(tmp_path).items():
        assert isinstance(lab, RunningLab), name


def test_only_a_cluster_lab_is_spread_and_names_its_machines(tmp_path):
    built = labs(tmp_path)
    assert [lab.spread for lab in built.values()] == [False, True, False]
    assert built["lab"].hosts() == [] and built["lab"].summary() is None
    built["cluster"].machines = [SimpleNamespace(host="m1"), SimpleNamespace(host="m2")]
    assert built["cluster"].hosts() == ["m1", "m2"]


def test_the_kinds_of_lab_share_one_start_and_differ_in_its_hooks():
    for cls in (ClusterLab, SliceLab):
        assert "start" not in vars(cls), f"{cls.__name__} copies Lab.start"
        assert {"check", "claim", "build", "settle"} & set(vars(cls))
    assert ClusterLab.runs_controller and not SliceLab.runs_controller


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
