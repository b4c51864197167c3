"""nccl-tests' programs as a script reads them (docs/nccl-tests.md): stdout
is nccl-tests' text, every data line the 13 whitespace-separated fields of
nccl-tests' printf formats, and fabric-lab's own lines are comments even on
stderr, so that `2>&1` reads the same; through a pipe a line a finished size,
as it finishes; the rank list short at 16,384 ranks; the command recorded as
typed. All with --engine sim: no lab, no root."""

import json
import queue
import subprocess
import sys
import threading

import pytest

from harness import REPO, TOPOLOGIES
from harness.commands import ENV, python
from report import nccl_tests
from report.tables import ranks_text

SIM = ["--engine", "sim"]
WAIT = 300              # a hang fails the test; nothing here is timed against it


def data_fields(line: str) -> dict:
    """One data line as nccl-tests prints it (src/common.cu, 2.19:
    writeBenchmarkLinePreamble "%12li  %12li  %8s  %6s  %6i", then
    writeBenchmarkLineBody "  %7s  %6s  %6s  %6g" (or "    N/A") out-of-place
    and in-place): split on whitespace as nccl-tests' readers split it."""
    f = line.split()
    assert len(f) == 13, line
    row = {"size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3],
           "root": int(f[4]), "placements": []}
    for k in (5, 9):
        row["placements"].append({"time": float(f[k]), "algbw": float(f[k + 1]),
                                  "busbw": float(f[k + 2]),
                                  "wrong": None if f[k + 3] == "N/A" else int(f[k + 3])})
    return row


def data_rows(text: str) -> list:
    return [data_fields(line) for line in text.split("\n")
            if line.strip() and not line.startswith("#")]


def test_every_data_line_of_stdout_is_nccl_tests_thirteen_fields(tmp_path):
    proc = python("-m", "ncclperf.all_reduce_perf", *SIM, "-b", "32K", "-e", "128K", "-f", "2",
                  "-o", "all", "--results", str(tmp_path), timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    rows = data_rows(proc.stdout)
    assert [(r["size"], r["redop"]) for r in rows] == [
        (s, op) for op in ("sum", "prod", "max", "min", "avg") for s in (32768, 65536, 131072)]
    for row in rows:
        assert row["count"] == row["size"] // 4 and row["root"] == -1
        assert all(p["time"] > 0 and p["wrong"] is None for p in row["placements"])


def test_both_streams_together_read_as_nccl_tests_output(tmp_path):
    """What `all_reduce_perf ... 2>&1 | tee log` keeps: fabric-lab's lines,
    its own sweep tables too, are comments; nccl-tests' footer is the only
    line a `grep "# Avg bus bandwidth"` finds."""
    proc = subprocess.run([sys.executable, "-m", "ncclperf.all_reduce_perf", *SIM, "-b", "1M",
                           "-e", "2M", "-f", "2", "--results", str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=WAIT, env=ENV, cwd=REPO)
    assert proc.returncode == 0, proc.stdout
    assert [r["size"] for r in data_rows(proc.stdout)] == [1 << 20, 2 << 20]
    lines = proc.stdout.split("\n")
    assert "# fabric   leaf-spine-2x2: 2 spines x 2 leaves x 2 servers per leaf = 4 servers, " \
           "4 switches, 8 links (simulated: no network built)" in lines
    assert [line for line in lines if "# Avg bus bandwidth" in line] == [
        "# Avg bus bandwidth    : 0.00248169 "]
    assert [line for line in lines if line.startswith("# Collective test")] == [
        "# Collective test starting: all_reduce_perf",
        "# Collective test concluded: all_reduce_perf"]


def test_stdout_names_the_link_rate_and_busbw_per_link(tmp_path):
    """At lab rates the GB/s columns read 0.00 (nccl-tests' %6.2f); `#` lines
    on stdout say the link's rate and each size's busbw over it."""
    proc = python("-m", "ncclperf.all_gather_perf", *SIM, "-b", "1M", "-e", "2M", "-f", "2",
                  "--results", str(tmp_path), timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("\n")
    assert all(p["busbw"] == 0.0 for r in data_rows(proc.stdout) for p in r["placements"])
    assert any(line.startswith("# fabric-lab: NIC links 20 Mbit/s = 0.002500 GB/s")
               for line in lines)
    start = lines.index("# busbw/link: busbw over the NIC link's 20 Mbit/s (0.002500 GB/s)")
    assert lines[start + 1].split() == ["#", "size", "out-of-place", "in-place"]
    doc = json.loads(next(tmp_path.iterdir()).joinpath("nccl-tests.json").read_text())
    for line, result in zip(lines[start + 2:start + 4], doc["results"]):
        size, oop, ip = line[1:].split()
        assert int(size) == result["size"]
        assert float(oop) == pytest.approx(result["out_of_place"]["bus_bw"] / 0.0025, abs=0.006)
        assert float(ip) == pytest.approx(result["in_place"]["bus_bw"] / 0.0025, abs=0.006)


# Runs the command with the sweep loop held at the start of a size (the
# HOLD_AT-th size it starts, from 0) until the test has read, from the pipe,
# the line that must come before it: a line still in the child's buffer
# would never come, and the test fails at WAIT instead of passing on a fast
# host.
HELD = """
import os, runpy, sys
from runs import sweep
one_size, started = sweep._one_size, []
def held(*args):
    if len(started) == int(os.environ["HOLD_AT"]):
        sys.__stderr__.write("HELD\\n")
        sys.__stderr__.flush()
        sys.stdin.readline()
    started.append(args[1])
    return one_size(*args)
sweep._one_size = held
sys.argv = sys.argv[1:]
if sys.argv[0].endswith(".py"):
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""
PROGRESS_1M = "# [1/2] allreduce 1048576 B done: 633788 us, busbw 0.002482 GB/s = 0.99 of the link"
ROW_1M = ("     1048576        262144     float     sum      -1   633788    0.00    0.00    N/A"
          "   633788    0.00    0.00    N/A")


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def _until(lines: queue.Queue, last: str) -> list:
    """The lines read up to one that is `last`; None at the end of the stream."""
    seen = []
    while not seen or seen[-1] != last:
        seen.append(lines.get(timeout=WAIT))
        assert seen[-1] is not None, seen
    return seen


HELD_CASES = [  # (command, the size held, the stream read, the line before it)
    ("run_topology.py", 1, "stderr", PROGRESS_1M),
    ("ncclperf.all_reduce_perf", 1, "stderr", PROGRESS_1M),
    # the in-place sweep's second size: the first row is out as its first ended
    ("ncclperf.all_reduce_perf", 3, "stdout", ROW_1M)]


@pytest.mark.parametrize("command,hold_at,stream,before", HELD_CASES,
                         ids=["run_topology", "all_reduce_perf", "all_reduce_perf-row"])
def test_through_a_pipe_a_size_is_said_before_the_next_starts(tmp_path, command, hold_at,
                                                              stream, before):
    env = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED"}   # a pipe, as a user's
    env.update(FABRIC_LAB_NO_REEXEC="1", HOLD_AT=str(hold_at))
    proc = subprocess.Popen([sys.executable, "-c", HELD, command, *SIM, "-b", "1M", "-e", "2M",
                             "-f", "2", "--results", str(tmp_path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=REPO)
    out, err = queue.Queue(), queue.Queue()
    for pipe, into in ((proc.stdout, out), (proc.stderr, err)):
        threading.Thread(target=_lines, args=(pipe, into), daemon=True).start()
    try:
        # the child cannot pass the size held until this test lets it: a line
        # written only after that would never come (WAIT is a hang's limit)
        seen = _until(out if stream == "stdout" else err, before)
        assert "HELD" not in seen and not any(line.startswith("     2097152") for line in seen)
        _until(err, "HELD")                 # and it is held there now
        proc.stdin.write("\n")
        proc.stdin.close()
        assert proc.wait(timeout=WAIT) == 0
    finally:
        proc.kill()
        proc.wait()


def test_the_ranks_are_summarised_past_a_few_dozen():
    devices = [{"rank": i, "group": 0, "pid": 7, "hostname": f"h{i // 8 + 1}", "device": i % 8,
                "device_hex": "0000:00:00", "device_info": f"fabric-lab rank h{i}"}
               for i in range(nccl_tests.RANK_LINES + 1)]
    assert len(nccl_tests.rank_lines(devices[:-1])) == nccl_tests.RANK_LINES   # one a rank
    lines = nccl_tests.rank_lines(devices)
    assert len(lines) == nccl_tests.RANK_LINES_SHOWN + 2
    assert lines[nccl_tests.RANK_LINES_SHOWN] == (
        "#  ... 56 more ranks, Rank 8 (h2) to Rank 63 (h8): 65 ranks in all, a line each up "
        "to 64 (the JSON lists every one)")
    assert lines[-1].startswith("#  Rank 64 Group  0 Pid      7 on         h9 device  0")
    assert ranks_text(["a", "b"]) == "a b"
    assert ranks_text([f"h{i}" for i in range(1, 16385)]) == \
        "h1 h2 h3 h4 h5 h6 h7 h8 ... h16384 (16384 ranks)"


def test_at_16384_ranks_the_header_stays_short(tmp_path):
    proc = python("-m", "ncclperf.all_reduce_perf", str(TOPOLOGIES / "sim" / "leaf-spine-16k.yaml"),
                  *SIM, "-b", "1M", "-e", "1M", "--results", str(tmp_path), timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    ranks = [line for line in (proc.stdout + proc.stderr).split("\n")
             if line.startswith(("#  Rank", "#  ...", "# Ranks:"))]
    assert len(ranks) == nccl_tests.RANK_LINES_SHOWN + 2 + 2        # and the two sweeps' lines
    assert all(len(line) < 200 for line in ranks), max(ranks, key=len)
    header = [line for line in proc.stdout.split("\n") if line.startswith("#")]
    assert len("\n".join(header)) < 4096
    assert len(data_rows(proc.stdout)) == 1
    doc = json.loads(next(tmp_path.iterdir()).joinpath("nccl-tests.json").read_text())
    assert len(doc["config"]["devices"]) == 16384


def _command_of(tmp_path) -> str:
    (folder,) = tmp_path.iterdir()
    return json.loads((folder / "summary.json").read_text())["provenance"]["command"]


def test_the_provenance_is_the_command_as_typed(tmp_path):
    flags = [*SIM, "-b", "64K", "-e", "64K"]
    proc = python("-m", "ncclperf.all_reduce_perf", *flags, "--results", str(tmp_path / "m"),
                  timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    assert _command_of(tmp_path / "m") == \
        f"python -m ncclperf.all_reduce_perf --engine sim -b 64K -e 64K --results {tmp_path}/m"
    # the console script: its argv[0] is the program, its __main__ no module of ours
    script = ("import sys; from ncclperf.all_reduce_perf import main; "
              "sys.argv[0] = 'all_reduce_perf'; sys.exit(main())")
    proc = python("-c", script, *flags, "--results", str(tmp_path / "s"), timeout=WAIT)
    assert proc.returncode == 0, proc.stderr
    assert _command_of(tmp_path / "s") == \
        f"all_reduce_perf --engine sim -b 64K -e 64K --results {tmp_path}/s"
    proc = python("run_topology.py", *flags, "--results", str(tmp_path / "r"), timeout=WAIT)
    assert _command_of(tmp_path / "r") == \
        f"run_topology.py --engine sim -b 64K -e 64K --results {tmp_path}/r"


def test_a_pipe_gets_a_line_a_finished_part_and_a_terminal_its_one_line():
    import io
    from report.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    pipe, terminal, quiet = io.StringIO(), Terminal(), io.StringIO()
    for stream, enabled in ((pipe, None), (terminal, None), (quiet, False)):
        show = Progress(stream, enabled=enabled)
        show("[1/2] allreduce 1048576 B: iteration 1/1")
        show.finished("[1/2] allreduce 1048576 B done")
        show("done")
    assert pipe.getvalue() == "# [1/2] allreduce 1048576 B done\n"
    assert terminal.getvalue().endswith("\r\033[K# [1/2] allreduce 1048576 B done\r\033[K")
    assert quiet.getvalue() == ""
    assert "\n" not in terminal.getvalue()
    heard = []                  # an nccl-tests program's rows: the terminal's line cleared first
    terminal = Terminal()
    show = Progress(terminal, on_size=lambda record: heard.append(terminal.getvalue()))
    show("[1/2] allreduce 1048576 B: iteration 1/1")
    show.finished("[1/2] allreduce 1048576 B done", {"size_bytes": 1 << 20})
    assert heard == ["\r\033[K# [1/2] allreduce 1048576 B: iteration 1/1\r\033[K"]


def test_fabric_lab_lines_become_comments_and_a_terminal_line_stays_whole():
    import io
    from ncclperf.nccl_sweeps import Commented
    out = io.StringIO()
    stream = Commented(out)
    for text in ("fabric x\n", "\r\033[K# [1/2] allreduce", "\r\033[K", "figures y\n\n",
                 "error: a lab failed\n", "# Avg bus bandwidth    : 0.002482\n", "part", "ial\n"):
        stream.write(text)
    assert out.getvalue() == (
        "# fabric x\n\r\033[K# [1/2] allreduce\r\033[K# figures y\n#\nerror: a lab failed\n"
        "# fabric-lab sweep: Avg bus bandwidth    : 0.002482\n# partial\n")
