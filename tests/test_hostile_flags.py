"""Hostile command lines: every bad flag value, combination of flags or
output path of run_topology.py and of the planner is one line on stderr,
``error: ...``, naming the flag (or the file and key) and what was expected,
with exit status 2: never a traceback, a hang, or silent acceptance. And a
reader that stops reading (``| head``) stops either command quietly, a lab
torn down first. Nothing here builds a network: run_topology.py runs with
--check, or in-process with the lab-building step replaced by a failure."""

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

import run_topology as RT
from runner import entry, on_lab
from planner import main as plan_main
from harness import REPO
from harness.commands import ENV
from harness.fabrics import EXPERIMENT_YAML

RUN = [sys.executable, str(REPO / "run_topology.py")]
PLAN = [sys.executable, "-m", "planner"]
TIMEOUT = 60            # a hang fails the test
LINE_MAX = 200


def _run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=ENV,
                          cwd=REPO)


def run_all(cmds):
    """The commands run side by side (each is a tenth of a second of imports)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip(map(tuple, cmds), pool.map(_run, cmds)))


def one_error_line(proc, *words):
    """Exit status 2 and exactly one line on stderr, `error: ...`, short and
    printable, holding every one of `words`; nothing on stdout."""
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and proc.stderr.endswith("\n"), proc.stderr
    line = lines[0]
    assert line.startswith("error: ") and len(line) <= LINE_MAX and line.isprintable(), line
    for word in words:
        assert word in line, (word, line)
    assert proc.stdout == ""
    return line


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Fabrics and paths the tables refer to as {exp}, {one}, {tmp}..."""
    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "exp.yaml").write_text(EXPERIMENT_YAML.replace("minbytes: 16K, maxbytes: 16K",
                                                          "minbytes: 4M, maxbytes: 8M"))
    (tmp / "one.yaml").write_text("fabric: {kind: single-switch, servers: 1}\n"
                                  "links: {server_leaf: {rate_mbit: 20}}\n")
    (tmp / "bad-step.yaml").write_text(EXPERIMENT_YAML.replace(
        "maxbytes: 16K, iters: 3", "maxbytes: 1M, stepfactor: 1.001, iters: 3"))
    (tmp / "file").write_text("")
    os.mkfifo(tmp / "fifo")
    (tmp / "loop").symlink_to("loop")
    (tmp / "dangling").symlink_to("nowhere")
    return {"tmp": str(tmp), "exp": str(tmp / "exp.yaml"), "one": str(tmp / "one.yaml"),
            "badstep": str(tmp / "bad-step.yaml"),
            "single": str(REPO / "topologies" / "single-switch.yaml")}


def _expand(argv, files):
    return [a.format(**files) for a in argv]


# --- 1. bad values, each naming its flag --------------------------------------------------

VALUES = [
    (["-n", "x"], ["-n/--iters", "expected a whole number from 1 to 1000", "'x'"]),
    (["-n", "0"], ["-n/--iters", "got 0"]),
    (["-n", "1001"], ["-n/--iters", "got 1001"]),
    (["-n", "1e3"], ["-n/--iters", "'1e3'"]),
    (["-n", "\u00b2"], ["-n/--iters", "expected a whole number"]),
    (["-n", "9" * 5000], ["-n/--iters", "expected a whole number"]),
    (["-w", "-1"], ["-w/--warmup", "from 0 to 100", "got -1"]),
    (["-w", "101"], ["-w/--warmup", "got 101"]),
    (["--channels", "0"], ["--channels", "from 1 to 16"]),
    (["--channels", "17"], ["--channels", "got 17"]),
    (["-b", "0"], ["-b/--minbytes", "expected a size in bytes"]),
    (["-b", "32G"], ["-b/--minbytes", "'32G'"]),
    (["-e", "2G"], ["-e/--maxbytes", "2G is more than a lab's 1G", "--engine sim takes up to 16G"]),
    (["-e", "-5"], ["-e/--maxbytes", "'-5'"]),
    (["-e", "lots"], ["-e/--maxbytes", "'lots'"]),
    (["-f", "0.5"], ["-f/--stepfactor", "0.5"]),
    (["-f", "nan"], ["-f/--stepfactor", "nan"]),
    (["-f", "inf"], ["-f/--stepfactor", "inf"]),
    (["-f", "2000"], ["-f/--stepfactor", "2000"]),
    (["-f", "x"], ["-f/--stepfactor", "'x'"]),
    (["--piece-bytes", "-1"], ["--piece-bytes", "'-1'"]),
    (["--piece-bytes", "63"], ["--piece-bytes", "from 64"]),
    (["--piece-bytes", "1G"], ["--piece-bytes", "'1G'"]),
    (["--root", "-1"], ["--root", "got -1"]),
    (["--root", "99999"], ["--root", "got 99999"]),
    (["--iperf-check", "--seconds", "0"], ["--seconds", "from 1 to 600"]),
    (["--iperf-check", "--seconds", "601"], ["--seconds", "got 601"]),
    (["--iperf-check", "--streams", "129"], ["--streams", "from 1 to 128"]),
    (["-c", "bogus"], ["-c/--collective", "expected one of allreduce", "'bogus'"]),
    (["-c", "x" * 5000], ["-c/--collective", "expected one of"]),
    (["-a", "bogus"], ["-a/--algorithm", "'bogus'"]),
    (["--engine", "nccl"], ["--engine", "expected one of agents"]),
    (["--policy", "ospf"], ["--policy", "expected one of ecmp"]),
    (["--datapath", "dpdk"], ["--datapath", "expected one of auto"]),
    (["--probe", "h1"], ["--probe", "SRC,DST", "'h1'"]),
    (["--probe", "h1,h2,h3"], ["--probe", "SRC,DST"]),
    (["--cross", "H1,h2"], ["--cross", "SRC,DST"]),
    (["--compare", ""], ["--compare", "expected algorithms"]),
    (["--compare", "ring,,rhd"], ["--compare", "expected algorithms"]),
    (["--compare", "bogus"], ["--compare", "'bogus'"]),
    (["--bogus"], ["unrecognised argument '--bogus'"]),
    (["--\x1b[2Jclear", "--more"], ["unrecognised argument", "\\x1b", "and 1 more"]),
    (["-n"], ["-n/--iters", "expected one argument"]),
]


@pytest.mark.parametrize("argv,words", VALUES, ids=[" ".join(a)[:40] for a, _ in VALUES])
def test_a_bad_value_names_its_flag(argv, words, ran_values):
    one_error_line(ran_values[tuple(RUN + ["--check", *argv])], *words)


@pytest.fixture(scope="module")
def ran_values():
    return run_all([RUN + ["--check", *argv] for argv, _ in VALUES])


# --- 2. values against each other, against the file, against the fabric; limits ------------

RELATIONS = [
    (["-b", "4M", "-e", "1M"], ["-b/--minbytes 4M is larger than -e/--maxbytes 1M"]),
    (["-e", "1K"], ["the default minbytes 32K", "-e/--maxbytes 1K"]),
    (["{exp}", "-e", "1M"], ["experiment.minbytes 4M", "-e/--maxbytes 1M"]),
    (["{exp}", "-b", "16M"], ["-b/--minbytes 16M", "experiment.maxbytes 8M"]),
    (["-f", "1", "-b", "1K", "-e", "2K"], ["-f/--stepfactor", "above 1"]),
    (["-f", "1.0000001"], ["-f/--stepfactor", "sizes", "at most 64"]),
    (["-b", "4", "-e", "1G", "-f", "1.2"], ["-f/--stepfactor", "at most 64"]),
    (["--piece-bytes", "64", "-e", "1G"], ["--piece-bytes", "pieces", "at most 16,384"]),
    (["-n", "1000", "-e", "1G"], ["at least", "hours", "at most 24 hours"]),
    (["-c", "broadcast", "--root", "4"], ["--root", "4 is not a rank", "0 to 3"]),
    (["--root", "1"], ["--root", "allreduce has no root"]),
    (["-a", "hierarchical"], ["-a/--algorithm", "several GPUs"]),
    (["-c", "allgather", "-a", "rhd"], ["-a/--algorithm", "not an algorithm of allgather"]),
    (["{exp}", "-a", "tree"], ["-a/--algorithm", "not an algorithm of allgather"]),
    (["--compare", "auto"], ["--compare", "already the run's algorithm"]),
    (["--compare", "rhd,rhd"], ["--compare", "rhd is named twice"]),
    (["--compare", "pairwise"], ["--compare", "not an algorithm of allreduce"]),
    (["--compare", "hierarchical"], ["--compare", "several GPUs"]),
    (["--probe", "h1,h1"], ["--probe", "names one server twice"]),
    (["--cross", "h1,h9"], ["--cross", "no server 'h9'"]),
    (["{badstep}"], ["bad-step.yaml: experiment.stepfactor", "at most 64"]),
    (["{one}", "-c", "allgather"], ["-c/--collective", "one server"]),
    (["{one}", "--compare", "rhd"], ["--compare", "one server"]),
    (["{single}", "--iperf-check"], ["--iperf-check", "one leaf"]),
]


@pytest.fixture(scope="module")
def ran_relations(files):
    return run_all([RUN + ["--check", *_expand(a, files)] for a, _ in RELATIONS])


@pytest.mark.parametrize("argv,words", RELATIONS, ids=[" ".join(a)[:40] for a, _ in RELATIONS])
def test_values_that_do_not_fit_together_name_both(argv, words, files, ran_relations):
    one_error_line(ran_relations[tuple(RUN + ["--check", *_expand(argv, files)])], *words)


def test_the_yaml_alone_is_held_to_the_same_limits_as_the_flags(files):
    yaml_step = _run(RUN + ["--check", files["badstep"]])
    flag_step = _run(RUN + ["--check", "-f", "1.001", "-b", "16K", "-e", "1M"])
    for proc in (yaml_step, flag_step):
        one_error_line(proc, "stepfactor", "1.001 would run", "at most 64")


# --- 3. output paths: whatever would fail at the end fails before anything is built --------

PATHS = [
    (["--results", "{tmp}/file"], ["--results", "expected a folder, and it is a file"]),
    (["--results", "{tmp}/file/x"], ["--results", "is a file, so no folder can be made in it"]),
    (["--results", "{tmp}/" + "a" * 300], ["--results", "300 bytes long", "Linux allows 255"]),
    (["--results", "{tmp}/" + "a/" * 2500], ["--results", "bytes long", "4,095 bytes"]),
    (["--results", "/proc/fabric-lab-results"], ["--results", "cannot write in '/proc'"]),
    (["--results", "{tmp}/loop"], ["--results", "cannot look at"]),
    (["--results", "{tmp}/dangling"], ["--results", "broken symbolic link"]),
    (["--csv", "{tmp}"], ["--csv", "expected a file, and it is a folder"]),
    (["--csv", "{tmp}/none/x.csv"], ["--csv", "the folder", "does not exist"]),
    (["--csv", "{tmp}/file/x.csv"], ["--csv", "is a file, not a folder"]),
    (["--csv", "{tmp}/" + "c" * 300 + ".csv"], ["--csv", "Linux allows 255"]),
    (["--csv", "/proc/x.csv"], ["--csv", "cannot write in '/proc'"]),
    (["--csv", "/proc/version"], ["--csv", "one of the kernel's"]),
    (["--csv", "{tmp}/fifo"], ["--csv", "named pipe"]),
    (["--csv", "{tmp}/dangling"], ["--csv", "broken symbolic link"]),
]


@pytest.fixture(scope="module")
def ran_paths(files):
    return run_all([RUN + ["--check", *_expand(a, files)] for a, _ in PATHS])


@pytest.mark.parametrize("argv,words", PATHS, ids=[" ".join(a)[:40] for a, _ in PATHS])
def test_an_output_path_that_would_fail_is_refused_by_check(argv, words, files, ran_paths):
    one_error_line(ran_paths[tuple(RUN + ["--check", *_expand(argv, files)])], *words)


@pytest.fixture
def nothing_is_built(monkeypatch):
    """run_topology in-process, with building a lab or cleaning up a failure."""
    def built(*_args):
        pytest.fail("a lab would have been built (or cleaned up)")
    monkeypatch.setattr(on_lab, "guarded", built)
    monkeypatch.setattr(entry, "cleanup", built)


@pytest.mark.parametrize("mode", [[], ["--calibrate"], ["--no-traffic"]],
                         ids=["run", "calibrate", "no-traffic"])
@pytest.mark.parametrize("argv,words", [p for p in PATHS if p[0][0] == "--results"],
                         ids=[" ".join(a)[:40] for a, _ in PATHS if a[0] == "--results"])
def test_every_mode_checks_the_output_paths_before_building(argv, words, mode, files, capsys,
                                                            nothing_is_built):
    assert RT.main([*mode, *_expand(argv, files)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: --results")


def test_a_good_output_path_is_left_as_it_was(tmp_path):
    proc = _run(RUN + ["--check", "--results", str(tmp_path / "new" / "run"),
                       "--csv", str(tmp_path / "rows.csv")])
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []          # nothing created, nothing left over


# --- 4. flags that contradict each other -----------------------------------------------------

COMBINATIONS = [
    (["--check", "--cli"], ["--cli opens a network and --check builds none"]),
    (["--check", "--calibrate"], ["--calibrate builds labs and --check builds none"]),
    (["--cleanup", "--check"], ["--cleanup takes no other option", "--check"]),
    (["--cleanup", "-c", "allgather"], ["--cleanup", "-c/--collective"]),
    (["--cleanup", "{exp}"], ["--cleanup", "the fabric file"]),
    (["--calibrate", "--cli"], ["--cli", "--calibrate", "use one of them"]),
    (["--calibrate", "-c", "allgather"], ["--calibrate", "-c/--collective would do nothing"]),
    (["--calibrate", "--policy", "stp"], ["--calibrate", "--policy"]),
    (["--calibrate", "--csv", "x.csv"], ["--calibrate", "--csv"]),
    (["--calibrate", "--no-traffic"], ["--calibrate", "--no-traffic"]),
    (["--calibrate", "{one}"], ["--calibrate", "this fabric has one"]),
    (["--cli", "--json"], ["--json", "--cli", "use one of them"]),
    (["--no-traffic", "-n", "3"], ["--no-traffic replays nothing", "-n/--iters"]),
    (["--no-traffic", "--compare", "rhd"], ["--no-traffic", "--compare"]),
    (["--no-traffic", "--iperf-check"], ["--no-traffic", "--iperf-check"]),
    (["--no-traffic", "--csv", "x.csv"], ["--no-traffic", "--csv"]),
    (["--seconds", "5"], ["--seconds", "--iperf-check"]),
    (["--streams", "2"], ["--streams", "--iperf-check"]),
]


@pytest.mark.parametrize("argv,words", COMBINATIONS,
                         ids=[" ".join(a)[:40] for a, _ in COMBINATIONS])
def test_contradictory_flags_are_refused_before_anything(argv, words, files, capsys,
                                                         nothing_is_built):
    assert RT.main(_expand(argv, files)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ")
    for word in words:
        assert word in err


def test_the_command_line_refuses_them_too(files):
    ran = run_all([RUN + _expand(argv, files) for argv, _ in COMBINATIONS if "--check" in argv])
    for (argv, words) in COMBINATIONS:
        if "--check" in argv:
            one_error_line(ran[tuple(RUN + _expand(argv, files))], *words)


def test_check_takes_every_flag_of_a_run(tmp_path):
    proc = _run(RUN + ["--check", "--no-traffic", "--json", "--datapath", "user", "-v",
                       "--results", str(tmp_path)])
    assert proc.returncode == 0 and "valid" in proc.stdout, proc.stderr


# --- 5. a reader that stops reading ------------------------------------------------------------

def _closed_pipe_run(cmd):
    """`cmd` with its stdout a pipe nobody reads any more."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=TIMEOUT, env=ENV, cwd=REPO)
    finally:
        os.close(write)


def _head_one_line(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, cwd=REPO)
    first = proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=TIMEOUT)
    return first, proc.returncode, err


PIPED = [RUN + ["--check"], RUN + ["--help"], PLAN + ["--gpus", "200000"],
         PLAN + ["--gpus", "200000", "--json"], PLAN + ["--help"]]


@pytest.mark.parametrize("cmd", PIPED, ids=[" ".join(c[-2:]) for c in PIPED])
def test_a_closed_pipe_stops_quietly(cmd):
    proc = _closed_pipe_run(cmd)
    assert proc.stderr == "" and proc.returncode == 141
    first, code, err = _head_one_line(cmd)
    assert first and "Traceback" not in err and err == "" and code in (0, 141)


def test_a_closed_pipe_mid_run_still_tears_the_lab_down(monkeypatch, tmp_path):
    """A write to a closed stdout inside the lab unwinds through its teardown;
    what the teardown prints goes nowhere; the command ends with 141."""
    events = []

    class Lab:
        def __enter__(self):
            events.append("built")

        def __exit__(self, *exc):
            print("teardown says something", flush=True)
            events.append("torn down")

    def run(fabric, exp, args, cluster=None):
        with Lab():
            print("fabric   ...", flush=True)
            events.append("printed after the pipe closed")
        return 0

    read, write = os.pipe()
    os.close(read)
    broken = os.fdopen(write, "w")
    handlers = {sig: signal.getsignal(sig) for sig in entry.STOP_SIGNALS}
    monkeypatch.setattr(on_lab, "lab_run", run)
    monkeypatch.setattr(entry.os, "geteuid", lambda: 0)   # the real run is root's
    monkeypatch.setattr(sys, "stdout", broken)
    try:
        assert RT.main(["--results", str(tmp_path)]) == 141
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        monkeypatch.undo()
        broken.close()
    assert events == ["built", "torn down"]


# --- 6. the planner: every flag by its name ----------------------------------------------------

PLANNER_FLAGS = ["--gpus", "--radix", "--gpus-per-server", "--nics-per-server", "--link-gbps",
                 "--oversubscription", "--gpu-pflops", "--flops", "--utilisation", "--alpha-us",
                 "--intra-gbps", "--gradient-bytes"]
BAD = ["-1", "0", "nan", "inf", "1e400", "1e300", "lots", "x" * 5000]
VALID = {("--alpha-us", "0")}
PLANNER = [(flag, value) for flag in PLANNER_FLAGS for value in BAD if (flag, value) not in VALID]


@pytest.mark.parametrize("flag,value", PLANNER, ids=[f"{f} {v[:10]}" for f, v in PLANNER])
def test_every_planner_flag_is_named_in_its_refusal(flag, value, capsys):
    assert plan_main(["--gpus", "64", flag, value]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ")
    assert flag in err and len(err) <= LINE_MAX and err[:-1].isprintable()


SIMULATE_FLAGS = ["--hop-latency-us", "--seeds", "--sizes", "--nvlink-gbytes"]
SIMULATE = [(flag, value) for flag in SIMULATE_FLAGS for value in BAD
            if (flag, value) not in {("--hop-latency-us", "0")}]


@pytest.mark.parametrize("flag,value", SIMULATE, ids=[f"{f} {v[:10]}" for f, v in SIMULATE])
def test_every_simulate_flag_is_named_in_its_refusal(flag, value, capsys):
    assert plan_main(["--gpus", "64", "--simulate", flag, value]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ")
    assert flag in err and len(err) <= LINE_MAX and err[:-1].isprintable()


def test_the_planner_command_line_names_them_too():
    cmds = [PLAN + ["--gpus", "64", flag, value] for flag in PLANNER_FLAGS
            for value in ("-1", "x" * 5000)]
    for cmd, proc in run_all(cmds).items():
        one_error_line(proc, cmd[-2])


PLANNER_COMBINATIONS = [
    (["--fabric", "{exp}", "--link-gbps", "10"], ["--link-gbps", "--fabric", "leave out"]),
    (["--fabric", "{exp}", "--gpus-per-server", "4"], ["--gpus-per-server", "--fabric"]),
    (["--fabric", "{exp}", "--nics-per-server", "1"], ["--nics-per-server", "--fabric"]),
    (["--fabric", "{exp}", "--intra-gbps", "100"], ["--intra-gbps", "--fabric"]),
    (["--results", "{tmp}", "--link-gbps", "10"], ["--link-gbps", "--results"]),
    (["--fabric", "{one}"], ["--fabric", "1 GPU", "--gpus"]),
    (["--gpus", "64", "--nics-per-server", "9"], ["--nics-per-server", "--gpus-per-server (8)"]),
    (["--gpus", "64", "--radix", "63"], ["--radix", "even"]),
    (["--gpus", "64", "--bogus"], ["unrecognised argument '--bogus'"]),
    (["--results", "{tmp}"], ["--results", "expected a results folder"]),
    (["--radix", "64"], ["--gpus is required"]),
    (["--gpus", "64", "--seeds", "3"], ["--seeds goes with --simulate"]),
    (["--gpus", "64", "--nvlink-gbytes", "450", "--intra-gbps", "10"],
     ["--nvlink-gbytes", "--intra-gbps", "give one"]),
    (["--gpus", "300000", "--simulate"], ["--simulate", "262,144"]),
    (["--gpus", "200000", "--simulate", "--seeds", "64"], ["--seeds", "ten minutes"]),
    (["--gpus", "64", "--simulate", "--sizes", ",".join(["1M"] * 17)], ["--sizes", "1 to 16"]),
]


@pytest.mark.parametrize("argv,words", PLANNER_COMBINATIONS,
                         ids=[" ".join(a)[:40] for a, _ in PLANNER_COMBINATIONS])
def test_planner_flags_that_do_not_go_together(argv, words, files):
    one_error_line(_run(PLAN + _expand(argv, files)), *words)


def test_nics_default_to_one_per_gpu(capsys):
    assert plan_main(["--gpus", "64", "--gpus-per-server", "4"]) == 0
    assert "16 servers x 4 GPUs, 4 scale-out NIC(s)" in capsys.readouterr().out


def test_planner_values_at_the_edges_print_finite_figures(capsys):
    assert plan_main(["--gpus", "10000000", "--flops", "1e30", "--gpu-pflops", "0.000001",
                      "--link-gbps", "0.00001", "--gradient-bytes", "1T", "--alpha-us",
                      "1000000", "--json"]) == 0
    out = capsys.readouterr().out
    assert "Infinity" not in out and "NaN" not in out



def test_an_interruption_python_dropped_is_raised_again_from_ordinary_code():
    """A stop signal that lands in an at-fork callback (a Popen starting a
    process) raises Interrupted where Python drops exceptions: the hook
    raises it again, so the run stops as interrupted, not at its end."""
    import signal
    import time
    from types import SimpleNamespace
    from lab.host import Interrupted
    saved = {sig: signal.getsignal(sig) for sig in entry.STOP_SIGNALS}
    try:
        with pytest.raises(Interrupted, match="SIGTERM"):
            entry.unraisable(SimpleNamespace(exc_value=Interrupted("SIGTERM")))
            time.sleep(5)                   # the handler runs long before this ends
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_other_unraisable_exceptions_go_to_pythons_own_hook(monkeypatch):
    import sys
    from types import SimpleNamespace
    seen = []
    monkeypatch.setattr(sys, "__unraisablehook__", seen.append)
    args = SimpleNamespace(exc_value=ValueError("x"))
    entry.unraisable(args)
    assert seen == [args]
