"""The run orchestrator (runner/): one loop for every front's sweeps, a
typed summary whatever ran, and report/ that renders without running."""

import ast
import csv
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from harness import REPO
from harness.commands import python
from ncclperf.nccl_options import parse
from ncclperf.nccl_sweeps import NcclSweeps
from runner.run_summary import Summary
from runner.sweeping import Outputs, RunFront, run_sweeps
from runs.experiment import experiment_from
from runs.record import ABSENT
from runs.simulated import simulate_experiment
from topologies.fabric import load_fabric

DEFAULT = REPO / "topologies" / "default.yaml"
# what runs a lab, an engine or a simulation: report/ imports none of it (the
# engines' registry, traffic.engines' ENGINES, it may read: what an engine promises)
RUNNING = ("lab", "traffic.engines.", "runs.measured", "runs.simulated", "runs.training",
           "runs.sweep", "runs.beside", "runs.lab_parts", "runs.parallel_step",
           "runs.incast_beside", "runs.incast_engine", "runs.rate_calibration", "runner")


@pytest.fixture(scope="module")
def fabric():
    return load_fabric(DEFAULT)


@pytest.fixture(scope="module")
def exp(fabric):
    return replace(experiment_from(fabric), engine="sim", minbytes=32768, maxbytes=65536,
                   stepfactor=2.0)


def imported(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


@pytest.mark.parametrize("path", sorted((REPO / "report").glob("*.py")), ids=lambda p: p.name)
def test_report_renders_and_runs_nothing(path):
    running = [m for m in imported(path) if m.split(".")[0] == "lab" or m.startswith(RUNNING)]
    assert running == [], f"report/{path.name} imports what runs: {running}"


def test_run_topologys_front_plans_the_experiment_then_each_compared_algorithm(exp, tmp_path):
    plan = RunFront(["-a", "ring"]).plan(exp, ["rhd", "tree"], tmp_path)
    assert [(s.exp.algorithm, s.folder, s.kept, s.title) for s in plan] == [
        (exp.algorithm, tmp_path, True, None),
        ("rhd", tmp_path / "rhd", True, "compare  the same sweep with algorithm rhd"),
        ("tree", tmp_path / "tree", True, "compare  the same sweep with algorithm tree")]


def test_an_nccl_programs_front_plans_placements_in_groups(exp, tmp_path):
    opts = parse("all_reduce_perf", ["-o", "all", "-N", "2"])
    plan = NcclSweeps(opts, io.StringIO()).plan(exp, [], tmp_path)
    assert [(s.op, s.placement) for s in plan] == [
        (op, p) for _cycle in range(2) for op in ("sum", "prod", "max", "min", "avg")
        for p in ("out-of-place", "in-place")]
    assert [s.kept for s in plan] == [True] + [False] * 19     # the run's own: the first
    assert plan[0].folder == tmp_path and plan[0].title is None
    assert plan[3].folder == tmp_path / "nccl-tests" / "004-float-prod-root0-in-place"
    assert plan[3].title == "# nccl-tests sweep 4: float prod root 0, in-place"
    assert [(s.first_of_group, s.last_of_group) for s in plan] == [(True, False),
                                                                   (False, True)] * 10


def test_additive_sizes_make_one_group_of_every_size(exp, tmp_path):
    opts = parse("all_reduce_perf", ["-i", "32768"])
    plan = NcclSweeps(opts, io.StringIO()).plan(exp, [], tmp_path)
    assert [(s.exp.minbytes, s.placement) for s in plan] == [
        (32768, "out-of-place"), (32768, "in-place"), (65536, "out-of-place"),
        (65536, "in-place")]
    assert [(s.first_of_group, s.last_of_group) for s in plan] == [
        (True, False), (False, False), (False, False), (False, True)]


class Heard(RunFront):
    """run_topology's front, keeping what the loop told it."""

    def __init__(self):
        super().__init__([])
        self.events = []

    def start(self, fabric, exp, run_dir):
        self.events.append("start")

    def sweep_done(self, sweep, record):
        self.events.append(("sweep", sweep.exp.algorithm, len(record.runs)))

    def finish(self, run_dir):
        self.events.append(("finish", (run_dir / "results.csv").exists()))


def test_the_loop_replays_each_planned_sweep_once_then_writes_the_kept_ones(fabric, exp,
                                                                            tmp_path):
    replayed, said = [], []

    def replay(e, folder):
        replayed.append((e.algorithm, folder))
        return simulate_experiment(fabric, e)

    front = Heard()
    results, figures, failed = run_sweeps(fabric, exp, ["rhd"], replay,
                                          Outputs(tmp_path, say=said.append), front)
    assert replayed == [(exp.algorithm, tmp_path), ("rhd", tmp_path / "rhd")]
    assert front.events == ["start", ("sweep", exp.algorithm, 2), ("sweep", "rhd", 2),
                            ("finish", True)]
    assert list(results) == [exp.algorithm, "rhd"] and failed is None
    assert "busbw.png" in figures and results[exp.algorithm].figures == figures
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2                           # a header, two sizes each
    assert "compare  the same sweep with algorithm rhd" in said


def test_every_row_of_results_csv_names_the_network_technology(fabric, exp, tmp_path):
    """A simulated and an emulated run share the writer: each row of both
    sweeps (the run's and a compared algorithm's) says what network ran."""
    run_sweeps(fabric, exp, ["rhd"], lambda e, folder: simulate_experiment(fabric, e),
               Outputs(tmp_path, say=lambda line: None), RunFront([]))
    rows = list(csv.DictReader((tmp_path / "results.csv").read_text().splitlines()))
    assert len(rows) == 4 and {row["network"] for row in rows} == {fabric.network.name}


def test_the_summary_leaves_out_what_the_run_did_not_produce(fabric, exp, tmp_path):
    summary = Summary.head(fabric, tmp_path, {"command": "x"})
    assert summary.exit_status() == 0                       # nothing ran, nothing failed
    record = simulate_experiment(fabric, exp)
    summary.swept({exp.algorithm: record}, exp.algorithm)
    doc = summary.to_dict()
    assert list(doc) == ["fabric", "source", "shape", "links", "policy", "network", "warnings",
                         "provenance", "results", "collectives"]
    assert summary.compared is ABSENT and doc["collectives"] is record
    summary.reachability = {"ok": 5, "total": 6}
    assert summary.exit_status() == 1                       # a pair did not reach another
    summary.reachability = {"ok": 6, "total": 6}
    record.runs[0]["wrong"] = 3
    assert summary.exit_status() == 1                       # a collective came out wrong


def test_a_simulated_runs_summary_has_the_link_classes_a_labs_has(tmp_path):
    """docs/output.md promises `links` in every summary.json."""
    proc = python(str(REPO / "run_topology.py"), str(DEFAULT), "--engine", "sim", "-b", "32K",
                  "-e", "32K", "--results", str(tmp_path), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["links"]["server_leaf"].startswith("20 Mbit/s, queue ") and "datapath" not in doc


class FailingLab:
    """A kept lab whose every question fails as a broken lab's would."""

    def __init__(self, fabric, run_dir):
        self.fabric, self.run_dir = fabric, run_dir

    def __getattr__(self, name):
        from lab.host import LabError
        raise LabError("the controller is gone")


def test_a_kept_experiment_gives_the_keeper_its_status_and_folder(fabric, tmp_path, capsys):
    from runner.kept_runs import kept_experiment
    lab = FailingLab(fabric, tmp_path / "lab")
    code, folder = kept_experiment(lab, ["-b", "32K", "-e", "32K"], str(tmp_path), 3, "",
                                   tmp_path / "results")
    assert code == 1 and folder.endswith("-exp3") and folder.startswith(str(tmp_path))
    assert "error: the controller is gone" in capsys.readouterr().err
    assert kept_experiment(lab, ["--engine", "sim"], str(tmp_path), 4, "", tmp_path) == (2, None)


class StopsAtTheSecond(Heard):
    """A front whose second sweep, not one the run keeps, never ends."""

    def plan(self, exp, compare, run_dir):
        first, second = super().plan(exp, ["rhd"], run_dir)
        return [first, replace(second, kept=False)]


def test_the_runs_own_files_are_written_when_its_last_kept_sweep_ends(fabric, exp, tmp_path):
    def replay(e, folder):
        if folder != tmp_path:
            raise KeyboardInterrupt                 # stopped during the second sweep
        return simulate_experiment(fabric, e)
    with pytest.raises(KeyboardInterrupt):
        run_sweeps(fabric, exp, [], replay, Outputs(tmp_path, say=lambda line: None),
                   StopsAtTheSecond())
    assert (tmp_path / "results.csv").exists() and (tmp_path / "busbw.png").exists()


def test_an_nccl_programs_notes_are_comments_on_stderr(tmp_path, monkeypatch, capsys):
    from ncclperf.all_reduce_perf import main
    from runner import entry
    monkeypatch.setattr(entry, "output_problem",
                        lambda args, name, by_this_user=False: (None, ["a note to read"]))
    assert main(["--engine", "sim", "-b", "32K", "-e", "32K", "--results", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "# note: a note to read" in err and "\nnote:" not in err


def test_a_simulated_run_refuses_a_results_folder_its_user_cannot_write(tmp_path, monkeypatch):
    """A simulated run is this user's own: no root will write its results."""
    import errno
    import types
    from runs import outputs
    monkeypatch.setattr(outputs.os, "geteuid", lambda: 1000)

    def refused(**_kw):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(outputs.tempfile, "mkdtemp", refused)
    args = types.SimpleNamespace(results=tmp_path, csv=None)
    problem, notes = outputs.output_problem(args, "20260101-000000-x", by_this_user=True)
    assert problem.startswith("--results ") and "Permission denied" in problem and notes == []
    problem, notes = outputs.output_problem(args, "20260101-000000-x")
    assert problem is None and "this user cannot write in" in notes[0]
