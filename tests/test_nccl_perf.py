"""nccl-tests' programs on the lab (ncclperf/): every flag of nccl-tests
honoured or answered in one sentence, and the output read by a reader
written from nccl-tests' own printf formats (tests/nccl_output.py), not from
ours; -J's JSON read by nccl-tests' own tools/analyze_perf_json.py where a
copy of nccl-tests is at hand. All with --engine sim: no lab, no root."""

import configparser
import importlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from harness import REPO
from harness.commands import python
from ncclperf.nccl_options import FLAGS, NcclFlagError, parse
from tests import nccl_output

SIM = ["--engine", "sim"]


def perf(program, *args, results=None, timeout=300):
    extra = ["--results", str(results)] if results else []
    return python("-m", f"ncclperf.{program}", *args, *extra, timeout=timeout)


def test_output_reads_as_nccl_tests_output(tmp_path):
    proc = perf("all_reduce_perf", *SIM, "-b", "32K", "-e", "128K", "-f", "2", results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = nccl_output.parse(proc.stdout)
    lines = proc.stdout.split("\n")
    assert lines[0] == "# nccl-tests version 2.19.6 nccl-headers=0 nccl-library=0"
    assert lines[1] == "# Collective test starting: all_reduce_perf"
    assert out["config"] == ("1", "1", "32768", "131072", "2", "factor", "0", "1", "1", "1",
                             "0", "0")
    assert [(r[0], r[1], r[3], r[4]) for r in out["ranks"]] == [
        (str(i), "0", f"h{i + 1}", "0") for i in range(4)]
    start = lines.index(nccl_output.column_header()[1]) - 1
    assert lines[start:start + 4] == nccl_output.column_header()
    assert [r["size"] for r in out["rows"]] == [32768, 65536, 131072]
    for row in out["rows"]:
        assert (row["type"], row["redop"], row["root"]) == ("float", "sum", -1)
        assert row["count"] == row["size"] // 4
        for place in row["placements"]:
            assert place["wrong"] is None and place["time"] > 0     # the simulator checks no data
    assert out["out_of_bounds"] == (0, "OK")
    assert lines[-5:] == ["#", "# Collective test concluded: all_reduce_perf", "#", "", ""]
    assert any("in-place columns are the same operation simulated again" in c
               for c in out["comments"])
    assert "fabric   leaf-spine-2x2" in proc.stderr          # fabric-lab's own lines
    folder = next(tmp_path.iterdir())
    assert (folder / "nccl-tests.txt").read_text() == proc.stdout
    assert (folder / "summary.json").exists()


def test_avg_bus_bandwidth_is_the_mean_of_every_busbw(tmp_path):
    proc = perf("all_gather_perf", *SIM, "-b", "1M", "-e", "4M", "-f", "2", results=tmp_path)
    doc = json.loads(next(tmp_path.iterdir()).joinpath("nccl-tests.json").read_text())
    busbw = [r[p]["bus_bw"] for r in doc["results"] for p in ("out_of_place", "in_place")]
    out = nccl_output.parse(proc.stdout)
    assert out["avg_bw"] == pytest.approx(sum(busbw) / len(busbw), rel=1e-5)


@pytest.mark.parametrize("program,redop,root", [
    ("all_reduce_perf", "sum", -1), ("all_gather_perf", "none", -1),
    ("reduce_scatter_perf", "sum", -1), ("broadcast_perf", "none", 0),
    ("reduce_perf", "sum", 0), ("alltoall_perf", "none", -1), ("sendrecv_perf", "sum", -1)])
def test_every_program_prints_nccl_tests_columns(tmp_path, program, redop, root):
    proc = perf(program, *SIM, "-b", "64K", "-e", "64K", results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = nccl_output.parse(proc.stdout)["rows"]
    assert len(rows) == 1 and (rows[0]["redop"], rows[0]["root"]) == (redop, root)
    per_rank = program in ("all_gather_perf", "reduce_scatter_perf", "alltoall_perf")
    assert rows[0]["count"] == 65536 // 4 // (4 if per_rank else 1)


def test_types_ops_roots_and_cycles_multiply_the_rows(tmp_path):
    proc = perf("reduce_perf", *SIM, "-b", "4K", "-e", "4K", "-d", "all", "-o", "all", "-r",
                "all", "-N", "2", results=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = nccl_output.parse(proc.stdout)["rows"]
    keys = [(r["type"], r["redop"], r["root"]) for r in rows]
    one_cycle = [(t, o, r) for t in ("int8", "int32", "half", "float", "bfloat16")
                 for o in ("sum", "prod", "max", "min", "avg") for r in range(4)]
    assert keys == one_cycle * 2
    assert "# note: -o all runs sum, prod, max, min and avg; not mulsum" in proc.stdout


def test_stepbytes_adds(tmp_path):
    proc = perf("all_reduce_perf", *SIM, "-b", "1K", "-e", "3K", "-i", "1K", results=tmp_path)
    out = nccl_output.parse(proc.stdout)
    assert [r["size"] for r in out["rows"]] == [1024, 2048, 3072]
    assert out["config"][4:6] == ("1024", "bytes")


def _analyze_script(tmp_path):
    """nccl-tests' tools/analyze_perf_json.py, copied to a temporary folder
    from a clone (NCCL_TESTS=its path) or this host's mirror of it; None
    where there is neither."""
    for repo in filter(None, (os.environ.get("NCCL_TESTS"),
                              "/work/.mirror/NVIDIA+nccl-tests/repo")):
        target = tmp_path / "analyze_perf_json.py"
        if os.path.isfile(os.path.join(repo, "tools", "analyze_perf_json.py")):
            shutil.copy(os.path.join(repo, "tools", "analyze_perf_json.py"), target)
            return target
        shown = subprocess.run(["git", "-C", repo, "show", "HEAD:tools/analyze_perf_json.py"],
                               capture_output=True, text=True)
        if shown.returncode == 0:
            target.write_text(shown.stdout)
            return target
    return None


def test_json_with_per_iteration_times_reads_in_nccl_tests_own_tool(tmp_path):
    path = tmp_path / "out.json"
    proc = perf("all_reduce_perf", *SIM, "-b", "64K", "-e", "256K", "-f", "2", "-I", "1",
                "-J", str(path), results=tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[0] == f"# Writing JSON output to {path}"
    rows = nccl_output.parse(proc.stdout)["rows"]
    assert all("i_cv" in p for r in rows for p in r["placements"])
    doc = json.loads(path.read_text())
    assert doc["version"] == 3 and doc["config"]["per_iter_timing"] == "true"
    assert [r["size"] for r in doc["results"]] == [r["size"] for r in rows]
    first = doc["results"][0]
    assert list(first) == ["size", "count", "type", "redop", "root", "out_of_place",
                           "out_of_place_per_iter", "in_place", "in_place_per_iter",
                           "actual_iterations", "experiment_name"]
    assert first["root"] == "    -1" and first["out_of_place"]["nwrong"] is None
    assert len(doc["config"]["devices"]) == 4 and doc["out_of_bounds"]["okay"] == "true"
    again = perf("all_reduce_perf", *SIM, "-b", "64K", "-e", "64K", "-J", str(path),
                 results=tmp_path / "r")
    assert f"# Writing JSON output to {path}.0" in again.stdout      # nccl-tests' next free name
    script = _analyze_script(tmp_path)
    if script is None:
        pytest.skip("no copy of nccl-tests (set NCCL_TESTS to a clone) to read the JSON with")
    for extra in ([], ["--in-place", "--all"]):
        read = subprocess.run([sys.executable, str(script), str(path), *extra],
                              capture_output=True, text=True)
        assert read.returncode == 0, read.stderr
        assert "PER-ITERATION STATS" in read.stdout and str(rows[0]["size"]) in read.stdout


# every nccl-tests flag (src/common.cu's getopt string): accepted with its meaning,
# or refused in one sentence
ACCEPTED = [
    (["-t", "1"], None), (["-g", "1"], None), (["-b", "8"], None), (["-e", "128M"], None),
    (["-i", "1M"], None), (["-f", "2"], None), (["-n", "20"], None), (["-m", "1"], None),
    (["-w", "5"], None), (["-N", "3"], None), (["-p", "1"], "-p 1 changes nothing"),
    (["-c", "0"], None), (["-c", "5"], None), (["-o", "avg"], None), (["-o", "all"], "not mulsum"),
    (["-d", "bfloat16"], None), (["-d", "all"], "are not among them"), (["-r", "1"], None),
    (["-r", "all"], None), (["-z", "1"], "-z 1 changes nothing"), (["-z", "3"], None),
    (["-y", "1"], "no CUDA streams"), (["-T", "30"], "times each iteration out itself"),
    (["-G", "0"], None), (["-C", "0"], None), (["-S", "0"], None),
    (["-a", "3"], "every mode reports that time"), (["-a", "1"], None),
    (["-R", "1"], "no GPU memory to register"), (["-x", "1"], "no CTAs"), (["-D", "0"], None),
    (["-V", "16"], "no device kernels"), (["-M", "1"], "no GPU memory"),
    (["-u", "2"], "misaligning"), (["-I", "1"], None), (["-I", "1", "-K", "2"], None),
    (["-J", "/tmp/x.json"], None), (["--minbytes=1K", "--warmup_iters", "0"], None),
]
REFUSED = [
    (["-t", "2"], "the lab's ranks are the fabric's GPUs"),
    (["-g", "8"], "choose the fabric instead"),
    (["-m", "4"], "one collective per iteration"),
    (["-N", "0"], "give a number of cycles"),
    (["-o", "mulsum"], "premultiplied sum"),
    (["-d", "double"], "not this one of nccl-tests' types"),
    (["-G", "10"], "no CUDA graphs"),
    (["-C", "1"], "the time column again"),
    (["-S", "1"], "a timestamp per row would mislead"),
    (["-D", "1"], "no device API kernels"),
    (["-I", "2"], "expected a number from 0 to 1"),
    (["-K", "1"], "add -I 1"),
    (["-J", "out.csv"], "writes only JSON"),
    (["-f", "2.5"], "expected a whole number"),
    (["-b", "8X"], "expected a size"),
    (["-a", "4"], "expected a number from 0 to 3"),
    (["--collective", "allgather"], "the program's name is the collective"),
    (["--json"], "-J FILE.json"),
    (["--warmup", "2"], "-w/--warmup_iters"),
]


@pytest.mark.parametrize("argv,note", ACCEPTED, ids=lambda v: " ".join(v) if isinstance(v, list)
                         else None)
def test_a_flag_is_honoured_or_noted(argv, note):
    program = "reduce_perf"
    opts = parse(program, argv)
    if note:
        assert any(note in n for n in opts.notes), opts.notes
    else:
        assert not any(argv[0] in n for n in opts.notes), opts.notes


@pytest.mark.parametrize("argv,why", REFUSED, ids=lambda v: " ".join(v) if isinstance(v, list)
                         else None)
def test_a_flag_is_refused_in_one_sentence(argv, why):
    with pytest.raises(NcclFlagError) as err:
        parse("all_reduce_perf", argv)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_every_nccl_tests_flag_is_answered():
    """The getopt string of nccl-tests 2.19.6's src/common.cu, flag by flag."""
    getopt = "t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:"
    flags = {f"-{c}" for c in getopt.replace(":", "")} - {"-h"}
    assert flags == set(FLAGS)
    tested = {a[0] for a, _ in ACCEPTED + REFUSED if not a[0].startswith("--")}
    assert flags <= tested


def test_refusal_and_lab_errors_exit_2_in_one_line(tmp_path):
    proc = perf("all_reduce_perf", *SIM, "-o", "mulsum")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: -o mulsum is NCCL's premultiplied sum")
    proc = perf("broadcast_perf", *SIM, "-r", "9")            # run_topology's own check
    assert proc.returncode == 2 and proc.stderr == (
        "error: --root: 9 is not a rank: there are 4 ranks, 0 to 3\n")     # -r's long name
    proc = perf("all_reduce_perf", *SIM, "-b", "8", "-e", "1G", "-i", "1K")
    assert proc.returncode == 2 and "at most 64" in proc.stderr and proc.stdout == ""
    proc = perf("all_reduce_perf", *SIM, "-I", "1", "-K", "2")     # the simulator times one
    assert proc.returncode == 2 and proc.stderr == (
        "error: -K 2: each size has 1 timed iteration(s) here, so -K must leave at least one\n")


def test_dry_run_checks_as_run_topology_check():
    proc = perf("all_reduce_perf", "--dry-run", "-d", "all", "-o", "all")
    assert proc.returncode == 0 and "default.yaml: valid" in proc.stdout


def test_every_program_is_a_console_script_and_a_module():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    scripts = dict(line.split(" = ") for line in
                   config["options.entry_points"]["console_scripts"].strip().splitlines())
    for program in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                    "broadcast_perf", "reduce_perf", "alltoall_perf", "sendrecv_perf"):
        module, func = scripts[program].split(":")
        assert module == f"ncclperf.{program}"
        assert callable(getattr(importlib.import_module(module), func))


def test_scripts_lab_dispatches_to_the_programs(tmp_path):
    proc = subprocess.run([str(REPO / "scripts" / "lab"), "nccl", "sendrecv_perf", *SIM, "-b",
                           "4K", "-e", "4K", "--results", "here"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len(nccl_output.parse(proc.stdout)["rows"]) == 1
    assert list((tmp_path / "here").iterdir())          # --results where the user stands
    bad = subprocess.run([str(REPO / "scripts" / "lab"), "nccl", "gather_perf"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "all_reduce_perf" in bad.stderr


def test_the_dry_run_estimate_counts_every_sweep_the_run_makes():
    """-N 2 cycles x 5 types x 5 ops x (out-of-place + in-place) = 100 sweeps
    of 32K and 64K: by hand, 5 s once, then per sweep 1.5 s of idle latency,
    0.8 s a size and 4 iterations of 1.5 x (32768 + 65536) B at 20 Mbit/s."""
    import io
    from dataclasses import replace
    from ncclperf.nccl_sweeps import NcclSweeps
    from runs.experiment import expected, experiment_from
    from topologies.fabric import load_fabric
    fabric = load_fabric(REPO / "topologies" / "default.yaml")
    exp = replace(experiment_from(fabric), minbytes=32768, maxbytes=65536, stepfactor=2.0,
                  iters=3, warmup=1)
    opts = parse("all_reduce_perf", ["-d", "all", "-o", "all", "-N", "2"])
    plan = [s.exp for s in NcclSweeps(opts, io.StringIO()).plan(exp, [], REPO / "results")]
    assert len(plan) == 100
    assert {(e.datatype, e.op) for e in plan} == {(t, o) for t in ("int8", "int32", "half",
                                                  "float", "bfloat16")
                                                  for o in ("sum", "prod", "max", "min", "avg")}
    wire = 4 * 1.5 * (32768 + 65536) * 8 / 20e6
    assert expected(fabric, exp, plan=plan) == {
        "seconds": pytest.approx(5 + 100 * (1.5 + 2 * 0.8 + wire)),
        "wire_s": pytest.approx(100 * wire), "sweeps": 100, "sizes": 200}
    # what --dry-run prints: the same plan, the rooted collectives' every root (-r -1)
    proc = perf("broadcast_perf", "--dry-run", "-b", "32K", "-e", "32K", "-r", "-1")
    assert "8 sweeps of the sizes, 8 sizes in all" in proc.stdout, proc.stdout


def test_the_network_technology_is_forwarded_and_priced(tmp_path):
    """--network reaches the run as run_topology.py's does: the header names
    the technology, and TCPXO's message cost makes 8 bytes slower than on the
    file's own InfiniBand."""
    times = {}
    for extra in ([], ["--network", "tcpxo"]):
        proc = perf("all_reduce_perf", "topologies/sim/hgx-h100-2x8.yaml", "-b", "8", "-e", "8",
                    *extra, results=tmp_path / (extra[-1] if extra else "own"))
        assert proc.returncode == 0, proc.stderr
        line = next(l for l in (proc.stderr + proc.stdout).splitlines()
                    if l.startswith("# network"))
        row = next(l for l in proc.stdout.splitlines() if re.match(r"^ +8 +2 ", l))
        times[line.split()[2]] = float(row.split()[5])
    assert set(times) == {"InfiniBand,", "GCP"}
    assert times["GCP"] > 2 * times["InfiniBand,"]
