"""A run on the flow-level simulator (`--engine sim`): no lab, no root.
The same summary, tables, results.csv and figures as a run on a lab; the
sweeps as the run's front plans them, or the training step."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from report.step_report import report_step
from report.write import network_line, write_summary
from runner.run_summary import Summary
from runner.sweeping import Front, Outputs, run_sweeps
from runs.simulated import simulate_experiment
from runs.training import simulate_step


def simulated_run(fabric, exp, run_dir: Path, as_json: bool, csv_path: Optional[Path],
                  progress, compare, front: Front, origin: Optional[dict]) -> int:
    """The sweeps (or the training step) simulated, their tables (or the
    summary as JSON), results.csv, summary.json and the figures in
    `run_dir`; the exit status."""
    say = (lambda *a: None) if as_json else print
    say(f"fabric   {fabric.name}: {fabric.shape()} (simulated: no network built)")
    say(network_line(fabric))
    summary = Summary.head(fabric, run_dir, origin)
    if exp.step is not None:
        summary.step = simulate_step(fabric, exp)
        report_step(summary.step, run_dir, csv_path, say)
    else:
        results, figures, _failed = run_sweeps(
            fabric, exp, compare, lambda e, _folder: simulate_experiment(fabric, e,
                                                                         progress=progress),
            Outputs(run_dir, csv_path, say), front)
        summary.swept(results, exp.algorithm)
        say(f"figures  {', '.join(figures) or 'none'}; results in {run_dir}")
    write_summary(summary.to_dict(), run_dir, as_json)
    return summary.exit_status()
