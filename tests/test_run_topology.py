"""run_topology.py as a user runs it, without building anything: help, --check,
bad input in one sentence, and the experiment section against its flags."""

import json
import os

import pytest

import lab.ecn
import run_topology
from harness import REPO
from harness.commands import run
from harness.fabrics import EXPERIMENT_YAML
from report.console import network_line
from runner.entry import ECN_UNKNOWN
from topologies.fabric import load_fabric

DEFAULT = REPO / "topologies" / "default.yaml"


def test_help_explains_every_option():
    out = run("--help").stdout
    for option in ("--check", "--policy", "--datapath", "--seconds", "--streams",
                   "--no-traffic", "--cli", "--results", "--json", "--cleanup", "--verbose"):
        assert option in out


def test_check_validates_without_building(clean_host):
    proc = run("--check")
    assert proc.returncode == 0 and "default.yaml: valid" in proc.stdout
    assert "2 spines x 2 leaves x 2 servers per leaf = 4 servers" in proc.stdout


@pytest.fixture
def kernel(monkeypatch):
    """--check as root on a kernel with RED's ECN and DCTCP, asked of nothing."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(lab.ecn, "kernel_support", lambda: {"red": True, "dctcp": True})


def test_check_names_the_network_and_what_the_lab_does_about_ecn(kernel, capsys):
    """The default fabric's RoCEv2 marks ECN: its line, then what a lab
    would do on this kernel, as a lab run's own `ecn` line says it."""
    assert run_topology.main(["--check", str(DEFAULT)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"  {network_line(load_fabric(DEFAULT))}" in lines
    assert ("  ecn      RoCEv2: switch egress queues mark ECN (RED at K) and the servers run "
            "DCTCP") in lines
    assert run_topology.main(["--check", "--json", str(DEFAULT)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["network"]["technology"] == "roce"
    assert record["ecn"] == {"asked": True, "marking": True, "dctcp": True, "note": (
        "switch egress queues mark ECN (RED at K) and the servers run DCTCP")}


def test_check_without_root_says_how_to_learn_about_ecn(kernel, monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert run_topology.main(["--check", str(DEFAULT)]) == 0
    assert f"  ecn      RoCEv2: {ECN_UNKNOWN}" in capsys.readouterr().out.splitlines()


def test_check_on_a_network_that_marks_nothing_has_no_ecn_line(kernel, tmp_path, capsys):
    path = tmp_path / "ib.yaml"
    path.write_text(DEFAULT.read_text() + "network: infiniband\n")
    assert run_topology.main(["--check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "  network  InfiniBand, routing ecmp: " in out and "ecn" not in out
    assert run_topology.main(["--check", "--engine", "sim", str(DEFAULT)]) == 0
    out = capsys.readouterr().out                 # a simulation builds no lab: no ECN either
    assert "  network  RoCEv2, routing ecmp: " in out and "\n  ecn " not in out


@pytest.mark.parametrize("text,message", [
    ("fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}\n",
     "bad.yaml: links: missing; this key is required"),
    ("fabric: {spines: 0, leaves: 2, servers_per_leaf: 2}\nlinks: {}\n",
     "bad.yaml: fabric.spines: expected a whole number from 1 to 64, got 0"),
])
@pytest.mark.parametrize("mode", [[], ["--check"]], ids=["build", "check"])
def test_bad_input_is_one_sentence_and_touches_nothing(tmp_path, clean_host, text, message, mode):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    proc = run(*mode, str(bad))
    assert proc.returncode == 2
    assert proc.stderr == f"error: {bad.parent}/{message}\n"



def test_the_yaml_experiment_is_checked_and_flags_override_it(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT_YAML)
    out = run("--check", str(path)).stdout
    assert ("experiment: allgather (auto), engine agents, float, 16384 to 16384 B x4, 3 iterations "
            "after 0 warm-up, 2 connection(s) per peer") in out
    out = run("--check", str(path), "-c", "alltoall", "-n", "1", "--channels", "4").stdout
    assert "experiment: alltoall (auto), engine agents, float, 16384 to 16384 B x4, 1 iterations" in out
    bad = run("--check", str(path), "-a", "tree")
    assert bad.returncode == 2 and bad.stderr == (
        "error: -a/--algorithm: 'tree' is not an algorithm of allgather; expected one of ring, "
        "pat, auto\n")
    for flags, message in ((["-w", "-3"], "argument -w/--warmup: expected a whole number"),
                           (["--channels", "17"], "argument --channels: expected a whole number from 1 to 16"),
                           (["--probe", "h1,h1"], "--probe: 'h1,h1' names one server twice"),
                           (["--cross", "h1,h9"], "--cross 'h1,h9': no server 'h9' in this fabric"),
                           (["--csv", "/nonexistent/x.csv"], "the folder '/nonexistent' does not exist")):
        bad = run("--check", str(path), *flags)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr
    path.write_text(EXPERIMENT_YAML.replace("collective: allgather", "collective: allgather, algorithm: rhd"))
    bad = run("--check", str(path))
    assert bad.stderr == (f"error: {path}: experiment.algorithm: 'rhd' is not an algorithm of "
                          "allgather; expected one of ring, pat, auto\n")


def test_runs_started_within_one_second_get_folders_of_their_own(tmp_path):
    """The folder is named by the second the run starts: a second run of the
    same fabric in that second gets `-2`, never the first one's folder."""
    from runs.outputs import fresh_folder
    first = fresh_folder(tmp_path, "20260101-000000-x")
    second = fresh_folder(tmp_path, "20260101-000000-x")
    assert first.name == "20260101-000000-x" and second.name == "20260101-000000-x-2"
    assert first.is_dir() and second.is_dir()
