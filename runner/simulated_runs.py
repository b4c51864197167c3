"""A run on the flow-level simulator (`--engine sim`): no lab, no root.
The same summary, tables, results.csv and figures as a run on a lab; the
sweeps as the run's front plans them, or the training step. With
`--incast N`, the incast in the packet engine instead (sim/packets/, under
the fabric's technology: runs/incast_engine.py)."""

from __future__ import annotations

from report.step_report import report_step
from report.console import network_line
from report.write import write_summary
from runner.run_summary import Summary
from runner.sweeping import Front, Outputs, progress, run_sweeps
from runs.outputs import fresh_folder, run_name
from runs.provenance import provenance
from runs.simulated import simulate_experiment
from runs.training import simulate_step


def simulated_run(fabric, exp, args) -> int:
    """The sweeps (or the training step) simulated, as the flags `args` ask,
    their tables (or the summary as JSON), results.csv, summary.json and the
    figures in the run's own folder; the exit status."""
    run_dir = fresh_folder(args.results, run_name(fabric))
    front: Front = args.front
    shown = progress(args.json, front)
    say = (lambda *a: None) if args.json else print
    say(f"fabric   {fabric.name}: {fabric.shape()} (simulated: no network built)")
    say(network_line(fabric))
    summary = Summary.head(fabric, run_dir, provenance(args.typed[1], fabric, args.typed[0]))
    if exp.step is not None:
        summary.step = simulate_step(fabric, exp)
        report_step(fabric, summary.step, run_dir, args.csv, say)
    else:
        results, figures, _failed = run_sweeps(
            fabric, exp, args.compare, lambda e, _folder: simulate_experiment(
                fabric, e, progress=shown), Outputs(run_dir, args.csv, say), front)
        summary.swept(results, exp.algorithm)
        say(f"figures  {', '.join(figures) or 'none'}; results in {run_dir}")
    write_summary(summary.to_dict(), run_dir, args.json)
    return summary.exit_status()


def packet_incast_run(fabric, args) -> int:
    """--incast N with an engine that needs no lab: the incast in the packet
    engine alone under the fabric's technology (runs/incast_engine.py), its
    figures said (or the summary as JSON) and summary.json written; the
    exit status."""
    from report.console import engine_incast_text
    from runs.incast_engine import engine_incast
    run_dir = fresh_folder(args.results, run_name(fabric))
    say = (lambda *a: None) if args.json else print
    say(f"fabric   {fabric.name}: {fabric.shape()} (the packet engine: no network built)")
    say(network_line(fabric))
    summary = Summary.head(fabric, run_dir, provenance(args.typed[1], fabric, args.typed[0]))
    summary.incast = engine_incast(fabric, args.incast, args.seconds)
    say(engine_incast_text(summary.incast))
    write_summary(summary.to_dict(), run_dir, args.json)
    say(f"results  {run_dir}")
    return summary.exit_status()
