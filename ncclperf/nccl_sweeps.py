"""An nccl-tests binary on the lab: the run orchestrator's run
(runner/entry.py), with this front planning the sweeps nccl-tests would
run and printing its output.

`command(collective)` is each program's main: it reads nccl-tests' flags
(ncclperf/nccl_options.py) and hands the rest to runner.entry.main with an
`NcclSweeps` as the run's front (runner/sweeping.py): the same lab, set up
and torn down by the orchestrator, the same results folder. For each run
cycle (-N), data type (-d), op (-o) and root (-r), the plan sweeps the
sizes out-of-place and then again for the in-place columns: the rank agents
keep one buffer per rank and have no in-place mode, so in-place is the same
operation measured again, on the same connections, and a `#` line says so.

nccl-tests' output goes to stdout (report/nccl_tests.py), which this front
owns; fabric-lab's own lines and tables (the lab, reachability, the fabric
during each size, the fidelity verdict, the teardown) go to stderr, each a
comment (`Commented`). The results folder holds nccl-tests.txt and
nccl-tests.json besides the run's files; -J FILE.json writes the JSON there
too.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import List, Optional

from ncclperf.nccl_options import NcclFlagError, NcclOptions, parse
from collectives.registry import REDUCING, ROOTED
from report import nccl_tests
from runner import entry
from runner.sweeping import Sweep
from traffic.engines import ENGINES
from runs.experiment import (MAX_HOURS, MAX_SIZES, ExperimentError, check_experiment, size_text,
                             sweep_sizes)

IN_PLACE_NOTE = ("note: in-place: the rank agents keep one buffer per rank and have no in-place "
                 "mode, so the in-place columns are the same operation {verb} again, as a second "
                 "sweep of the sizes after the out-of-place one")


@dataclass
class NcclSweep(Sweep):
    """A sweep of the plan: which placement's columns it fills, and whether
    it starts or ends the rows of its (type, op, root)."""
    placement: str = "out-of-place"
    op: str = "sum"                         # the op as given (sendrecv's rows name it)
    first_of_group: bool = False
    last_of_group: bool = False


class NcclSweeps:
    """The run's front, as nccl-tests runs it (see the module)."""
    owns_stdout = True

    def __init__(self, opts: NcclOptions, out=None, program: Optional[str] = None):
        self.opts = opts
        self.out = out or sys.stdout        # the orchestrator hands over its stdout
        # the command as typed, for the provenance
        self.typed = (program or opts.program, opts.argv[1:])
        self.rows: List[dict] = []
        self.lines: List[str] = []
        self.started = time.time()
        self.wrong = 0
        self._ranks = 0
        self._group: List[dict] = []        # the rows of the (type, op, root) under way
        self._waiting: List[dict] = []      # out-of-place sizes whose in-place is to come
        self._out_of_place = None           # the record of the last out-of-place sweep
        self._op = None
        self.min_bw: Optional[float] = None
        self.config: Optional[nccl_tests.Config] = None

    # --- before anything is built ------------------------------------------------

    def variants(self, exp) -> List[tuple]:
        """(data type, op, root) of each sweep pair, in nccl-tests' order."""
        roots = self.opts.roots or [exp.root]
        if roots == [-1]:                   # every rank, in turn
            roots = list(range(self._ranks))
        ops = self.opts.ops or [exp.op]
        return [(t, o, r) for t in (self.opts.types or [exp.datatype]) for o in ops
                for r in roots]

    def chunks(self, exp) -> List[tuple]:
        """(minbytes, maxbytes, stepfactor) of each sweep: the whole sweep,
        or with additive sizes (-i), a size at a time."""
        if self.opts.stepbytes is None:
            return [(exp.minbytes, exp.maxbytes, exp.stepfactor)]
        sizes = range(exp.minbytes, exp.maxbytes + 1, self.opts.stepbytes)
        return [(s, s, exp.stepfactor) for s in sizes[:MAX_SIZES + 1]]

    def experiment(self, exp, variant, chunk):
        dtype, op, root = variant
        lo, hi, factor = chunk
        return replace(exp, datatype=dtype, op=op if exp.collective in REDUCING else "sum",
                       root=root if exp.collective in ROOTED else exp.root,
                       minbytes=lo, maxbytes=hi, stepfactor=factor)

    def plan(self, exp, compare, run_dir: Path) -> List[NcclSweep]:
        """Each sweep this run makes, in order: per cycle (-N), data type,
        op and root, each chunk out-of-place then in-place. The first is the
        run's own (its folder, results.csv, the figures, summary.json's
        `collectives`); the others have folders under nccl-tests/."""
        plan: List[NcclSweep] = []
        chunks = self.chunks(exp)
        for _cycle in range(self.opts.cycles):
            for variant in self.variants(exp):
                for c, chunk in enumerate(chunks):
                    e = self.experiment(exp, variant, chunk)
                    for placement in ("out-of-place", "in-place"):
                        plan.append(self._sweep(e, placement, len(plan) + 1, run_dir))
                        plan[-1].op = variant[1]
                        plan[-1].first_of_group = c == 0 and placement == "out-of-place"
                        plan[-1].last_of_group = c == len(chunks) - 1 and placement == "in-place"
        return plan

    @staticmethod
    def _sweep(e, placement: str, number: int, run_dir: Path) -> NcclSweep:
        if number == 1:
            return NcclSweep(e, run_dir, placement=placement)
        name = f"{number:03d}-{e.datatype}-{e.op}-root{e.root}-{placement}"
        return NcclSweep(e, run_dir / "nccl-tests" / name, kept=False, placement=placement,
                         title=f"# nccl-tests sweep {number}: {e.datatype} {e.op} root "
                               f"{e.root}, {placement}")

    def check(self, fabric, exp) -> None:
        """Each sweep this run would make, as run_topology checks its own;
        and all of them together within its limits. ValueError: one sentence."""
        self._ranks = len(exp.ranks or fabric.endpoints)
        timed = exp.iters if ENGINES[exp.engine].needs_lab else 1
        if self.opts.per_iter_skip >= timed:
            raise ValueError(f"-K {self.opts.per_iter_skip}: each size has {timed} timed "
                             f"iteration(s) here, so -K must leave at least one")
        chunks = self.chunks(exp)
        if len(chunks) > MAX_SIZES:
            raise ValueError(f"-i {size_text(self.opts.stepbytes)} would run more than "
                             f"{MAX_SIZES} sizes from {size_text(exp.minbytes)} to "
                             f"{size_text(exp.maxbytes)}; at most {MAX_SIZES}: raise -i or use -f")
        flags = {"datatype": "-d", "op": "-o", "root": "-r", "minbytes": "-b", "maxbytes": "-e"}
        variants = self.variants(exp)
        for variant in variants:
            for chunk in chunks:
                try:
                    check_experiment(fabric, self.experiment(exp, variant, chunk),
                                     lambda key: flags.get(key, key))
                except ExperimentError as exc:
                    raise ValueError(str(exc)) from None
        self._check_hours(fabric, exp, len(variants) * 2 * self.opts.cycles)

    def _check_hours(self, fabric, exp, sweeps: int) -> None:
        """run_topology's 24-hour bound, over every sweep this run makes."""
        fastest = fabric.fastest_rate_mbit
        sizes = [c[0] for c in self.chunks(exp)] if self.opts.stepbytes else sweep_sizes(exp)
        iters = 1 if not ENGINES[exp.engine].needs_lab else exp.iters + exp.warmup
        seconds = sweeps * iters * sum(sizes) / 2 * 8 / (fastest * 1e6)
        if seconds > MAX_HOURS * 3600:
            raise ValueError(f"{sweeps} sweeps (types, ops, roots, cycles, out-of-place and "
                             f"in-place) would take at least {seconds / 3600:,.0f} hours at "
                             f"{fastest:g} Mbit/s; at most {MAX_HOURS}: fewer of them, fewer "
                             "iterations or smaller sizes")

    # --- the orchestrator's hooks (runner/sweeping.py Front) ----------------------

    def start(self, fabric, exp, run_dir: Path) -> None:
        self._header(fabric, exp, run_dir)

    def commented(self, stream):
        """The stream the run's own lines go to: each a comment."""
        return Commented(stream)

    def size_done(self, record) -> None:
        """A size of a sweep has ended (the run's progress display says
        so): in an in-place sweep, its row goes out now, as nccl-tests prints
        a row as its size ends, beside the out-of-place sweep's size."""
        if self._waiting:
            self._row(self._waiting.pop(0), record)

    def sweep_done(self, sweep: NcclSweep, record) -> None:
        """An out-of-place sweep's sizes wait for their in-place columns; an
        in-place sweep's rows not out yet (a display that told nothing) go
        out now; a (type, op, root)'s last sweep ends its rows with the
        busbw per link."""
        if sweep.first_of_group:
            self._group, self._op = [], sweep.op
        if sweep.placement == "out-of-place":
            self._out_of_place, self._waiting = record, list(record.runs)
            return
        done = len(self._out_of_place.runs) - len(self._waiting)
        waiting, self._waiting = self._waiting, []
        for a, b in zip(waiting, record.runs[done:]):
            self._row(a, b)
        if sweep.last_of_group:
            for line in nccl_tests.link_lines(self._group, self._out_of_place.link_rate_mbit):
                self._say(line)
            self.rows += self._group

    def finish(self, run_dir: Path) -> None:
        self._footer(run_dir)

    def _row(self, a, b) -> None:
        """One size's row: out-of-place (`a`) and in-place (`b`) side by side."""
        row = {"size": a["size_bytes"], "count": a["count"], "type": a["type"],
               # nccl-tests' sendrecv names the op it was given
               "redop": self._op if self.opts.collective == "sendrecv" else a["redop"],
               "root": a["root"], "placements": [self._place(a), self._place(b)]}
        self._say(nccl_tests.row_line(row, self.opts.per_iter, self.opts.per_iter_skip))
        self._group.append(row)

    def _place(self, r) -> dict:
        self.wrong += r["wrong"] or 0
        return {"time_us": r["time_s"] * 1e6, "alg_bw": r["algbw_gbps"],
                "bus_bw": r["busbw_gbps"], "wrong": None if self.opts.check == 0 else r["wrong"],
                "times_us": [t * 1e6 for t in r.get("times_s", [r["time_s"]])]}

    def _say(self, line: str) -> None:
        self.lines.append(line)
        print(line, file=self.out, flush=True)

    def _header(self, fabric, exp, run_dir: Path) -> None:
        o = self.opts
        ranks = exp.ranks or [h.name for h in fabric.endpoints]
        rate = fabric.nic_rate_mbit
        devices = [{"rank": i, "group": 0, "pid": os.getpid(),
                    "hostname": fabric.endpoint(name).box or name,
                    "device": fabric.endpoint(name).gpu - 1, "device_hex": "0000:00:00",
                    "device_info": f"fabric-lab rank {name} ({rate:g} Mbit/s NIC)"}
                   for i, name in enumerate(ranks)]
        additive = o.stepbytes is not None
        self.config = nccl_tests.Config(
            o.program, exp.minbytes, exp.maxbytes,
            o.stepbytes if additive else int(exp.stepfactor), not additive,
            0 if not ENGINES[exp.engine].needs_lab else exp.warmup,
            1 if not ENGINES[exp.engine].needs_lab else exp.iters,
            o.check, o.per_iter, o.per_iter_skip, devices, self._notes(fabric, exp, run_dir))
        if o.json_path:
            o.json_path = _free_name(o.json_path)
            self._say(f"# Writing JSON output to {o.json_path}")
        for line in nccl_tests.header_lines(self.config) + nccl_tests.column_header(o.per_iter):
            self._say(line)

    def _notes(self, fabric, exp, run_dir: Path) -> List[str]:
        engine = ENGINES[exp.engine]
        rate = fabric.nic_rate_mbit
        notes = [f"fabric-lab: fabric {fabric.name}, engine {exp.engine}, algorithm "
                 f"{exp.algorithm}, {len(exp.ranks or fabric.endpoints)} ranks; results in "
                 f"{run_dir}",
                 f"fabric-lab: NIC links {rate:g} Mbit/s = {rate / 8e3:.6f} GB/s; the GB/s "
                 "columns keep nccl-tests' two decimals (0.00 under 0.005 GB/s), so a "
                 "`# busbw/link` table follows the rows", *self.opts.notes]
        if not engine.needs_lab:
            notes.append(f"note: --engine {exp.engine} simulates one iteration per size and "
                         "moves no data: #wrong is N/A, -n and -w change nothing")
        elif not engine.checks_data:
            notes.append(f"note: --engine {exp.engine} checks no data: #wrong is N/A")
        if self.opts.stepfactor is None and self.opts.stepbytes is None:
            notes.append(f"note: no -f or -i: the fabric's experiment steps sizes by "
                         f"{exp.stepfactor:g}x")
        notes.append(IN_PLACE_NOTE.format(verb="run and measured" if engine.needs_lab
                                          else "simulated"))
        return notes

    def _footer(self, run_dir: Path) -> None:
        min_bw = os.environ.get("NCCL_TESTS_MIN_BW")
        self.min_bw = float(min_bw) if min_bw else None
        for line in nccl_tests.footer_lines(self.rows, self.opts.program, self.min_bw):
            self._say(line)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "nccl-tests.txt").write_text("\n".join(self.lines) + "\n")
        env = sorted(f"{k}={v}" for k, v in os.environ.items()
                     if k.startswith(("NCCL_", "FABRIC_LAB_")))
        document = nccl_tests.json_document(self.config, self.rows, self.opts.argv, env,
                                            self.started, self.min_bw)
        text = json.dumps(document)
        (run_dir / "nccl-tests.json").write_text(text)
        if self.opts.json_path:
            with open(self.opts.json_path, "x") as f:
                f.write(text)

    def failed(self) -> bool:
        """A wrong element anywhere, or the average busbw under NCCL_TESTS_MIN_BW."""
        low = self.min_bw is not None and \
            nccl_tests.average_bus_bandwidth(self.rows) < self.min_bw * 0.9
        return bool(self.wrong) or low


def _free_name(path: Path) -> Path:
    """nccl-tests' choice: FILE, else FILE.0, FILE.1, ... the first that is free."""
    k, candidate = 0, path
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{k}")
        k += 1
    return candidate


def typed(program: str) -> str:
    """The program as the user typed it, for the run's provenance: `python
    -m ncclperf.NAME` when run so (and by scripts/lab nccl), else its name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name == f"ncclperf.{program}":
        return f"python -m ncclperf.{program}"
    return program


class Commented:
    """A stream whose every line is an nccl-tests comment: `# ` before each
    line that is none yet (an `error:` line stays one: it must not read as
    a comment), `#` for a blank one; and a line of the lab's own tables that
    starts as one of nccl-tests' own lines a reader looks for (`grep "# Avg
    bus bandwidth"`) says it is fabric-lab's sweep."""
    NCCL_KEYS = ("# Avg bus bandwidth", "# Out of bounds values", "# Collective test")

    def __init__(self, stream):
        self._stream, self._at_start = stream, True

    def write(self, text: str):
        out = []
        for piece in re.findall(r"[^\n]*\n|[^\n]+", text):     # lines, "\r" kept in them
            if self._at_start and piece.startswith(self.NCCL_KEYS):
                piece = "# fabric-lab sweep: " + piece[2:]
            elif self._at_start and not piece.startswith(("#", "\r", "error:")):
                piece = "#" + ("" if piece == "\n" else " ") + piece
            out.append(piece)
            # a terminal's progress line cleared ("\r\033[K") leaves the cursor at a line's start
            self._at_start = piece.endswith("\n") or piece.endswith(("\r", "\r\033[K"))
        return self._stream.write("".join(out))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def command(program: str):
    """The main of an nccl-tests program (all_reduce_perf, ...)."""
    def main(argv=None) -> int:
        argv = sys.argv[1:] if argv is None else list(argv)
        try:
            opts = parse(program, argv)
        except NcclFlagError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except SystemExit as exc:           # -h
            return exc.code if isinstance(exc.code, int) else 0
        return entry.main(opts.forward, front=NcclSweeps(opts, program=typed(program)))
    main.__doc__ = f"{program}: nccl-tests' command line on fabric-lab"
    return main
