"""A run's collective sweeps: which ones its front plans, each replayed
(on a lab or in the simulator) and its tables said as it ends, then
results.csv (and --csv) and the figures from the sweeps the run keeps.

A front is what the command line asked for: `RunFront`, run_topology.py's
(the experiment, then the same sweep for each `--compare` algorithm), or
an nccl-tests program's (ncclperf/nccl_sweeps.py: its types, ops, roots and
cycles, out-of-place and in-place, with nccl-tests' output on stdout). The
loop is here, once; a front only plans, and hears of each sweep and size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from report.progress import Progress
from report.write import sweep_text, write_csv, write_sweep_figures
from runs.experiment import Experiment
from runs.record import RunRecord


@dataclass
class Outputs:
    """Where a run's sweeps write and how they talk: the run's folder and
    --csv's file; the console (`say`), and a cluster's machines for the
    per-machine table."""
    run_dir: Path
    csv_path: Optional[Path] = None
    say: Callable[[str], None] = print
    machines: Optional[List[str]] = None


@dataclass
class Sweep:
    """One sweep a front plans: its experiment, the folder its files go in,
    whether its record is one of the run's (summary.json's `collectives`
    or `compared`, results.csv, the figures), and the line said before it."""
    exp: Experiment
    folder: Path
    kept: bool = True
    title: Optional[str] = None


class Front(Protocol):
    """What a command line asks of a run's sweeps (see the module)."""
    typed: Tuple[str, List[str]]        # the command as typed, for the provenance
    owns_stdout: bool                   # stdout is the front's; the run's lines go to stderr

    def check(self, fabric, exp: Experiment) -> None:
        """Refuse, before anything is built, what the sweeps cannot run:
        ValueError, one sentence."""

    def plan(self, exp: Experiment, compare: List[str], run_dir: Path) -> List[Sweep]:
        """The sweeps, in order (--check times them too)."""

    def start(self, fabric, exp: Experiment, run_dir: Path) -> None:
        """Before the first sweep."""

    def size_done(self, record: dict) -> None:
        """A size of the sweep under way has ended."""

    def sweep_done(self, sweep: Sweep, record: RunRecord) -> None:
        """A sweep has ended and its tables were said."""

    def finish(self, run_dir: Path) -> None:
        """After the last sweep and the run's files."""

    def failed(self) -> bool:
        """Whether the front's own checks failed the run."""


class RunFront:
    """run_topology.py's sweeps: the experiment, then each `--compare`
    algorithm's, each in its own folder under the run's."""
    owns_stdout = False

    def __init__(self, argv: List[str]):
        self.typed = ("run_topology.py", list(argv))

    def check(self, fabric, exp: Experiment) -> None:
        pass

    def plan(self, exp: Experiment, compare: List[str], run_dir: Path) -> List[Sweep]:
        return [Sweep(exp, run_dir)] + [
            Sweep(replace(exp, algorithm=a), run_dir / a,
                  title=f"compare  the same sweep with algorithm {a}") for a in compare]

    def start(self, fabric, exp: Experiment, run_dir: Path) -> None:
        pass

    def size_done(self, record: dict) -> None:
        pass

    def sweep_done(self, sweep: Sweep, record: RunRecord) -> None:
        pass

    def finish(self, run_dir: Path) -> None:
        pass

    def failed(self) -> bool:
        return False


def run_sweeps(fabric, exp: Experiment, compare: List[str], replay: Callable, out: Outputs,
               front: Front) -> Tuple[Dict[str, RunRecord], List[str], Optional[str]]:
    """The front's sweeps, each replayed by `replay(exp, folder)` (a run
    record) and its tables said as it ends; results.csv (and --csv) and the
    figures of the sweeps kept as soon as the last of those ends (a later
    sweep that fails or is stopped leaves them). Returns the kept records
    by algorithm, the figures' names, and why none were drawn (None when
    they were)."""
    results: Dict[str, RunRecord] = {}
    front.start(fabric, exp, out.run_dir)
    plan = front.plan(exp, compare, out.run_dir)
    last_kept = max(i for i, sweep in enumerate(plan) if sweep.kept)
    for i, sweep in enumerate(plan):
        if sweep.title:
            out.say(sweep.title)
        record = replay(sweep.exp, sweep.folder)
        out.say(sweep_text(fabric, record, out.machines))
        front.sweep_done(sweep, record)
        if sweep.kept:
            results[sweep.exp.algorithm] = record
        if i == last_kept:          # the run's own files now: a later sweep may not end
            write_csv(fabric, list(results.values()), out.run_dir, out.csv_path)
            figures, failed = write_sweep_figures(fabric, results, out.run_dir)
            results[exp.algorithm].figures = figures
    front.finish(out.run_dir)
    return results, figures, failed


def progress(quiet, front=None) -> Progress:
    """A one-line progress display with the time left on a terminal, a line
    a finished size elsewhere (report/progress.py); nothing with --json.
    The run's front hears of each size as it ends."""
    return Progress(enabled=False if quiet else None,
                    on_size=front.size_done if front is not None else None)
