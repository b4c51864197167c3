"""A run on a lab: the lab built (on this host, or across machines), what
any lab reports once up (datapath, controller, ECN, its machines), every
pair's reachability, then what the run asked for (collective sweeps, a
training step, an incast, iperf3's check), the summary, the teardown.
`measure` is also what an experiment on a kept lab runs (runner/kept_runs.py).
`--calibrate` builds labs of its own (runs/rate_calibration.py).

Every way a lab job fails ends in one sentence (`guarded`, `failing`);
Ctrl-C and SIGTERM tear down what was built and nothing else.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from lab.host import Interrupted
from report import console
from report.progress import Progress
from report.write import write_summary
from runner.run_summary import Summary
from runner.sweeping import Outputs, progress, run_sweeps
from runs.outputs import fresh_folder, run_name
from runs.provenance import provenance


def guarded(job) -> int:
    """Run a job that builds labs; every way it can fail ends in one sentence."""
    try:
        return failing(job)
    except Interrupted as exc:
        name = "Ctrl-C" if exc.args[0] == "SIGINT" else exc.args[0]
        print(f"\ninterrupted ({name}): the lab was torn down", file=sys.stderr)
        return 130


def failing(job) -> int:
    """Run a job on a lab; a lab's or a check's failure ends in one sentence
    (an interruption goes on up)."""
    from lab.host import LabError
    from lab.processes import CheckError
    try:
        return job()
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (subprocess.TimeoutExpired, CheckError) as exc:
        print(f"error: a check did not finish: {exc}", file=sys.stderr)
        return 1


def summary_head(fabric, args, run_dir, say) -> Summary:
    """The summary's head, the fabric's line said."""
    say(f"fabric   {fabric.name}: {fabric.shape()}")
    return Summary.head(fabric, run_dir, provenance(args.typed[1], fabric, args.typed[0]))


def lab_run(fabric, exp, args, cluster=None) -> int:
    """The run on a lab it builds (`cluster`: (machines, placement) for
    cluster mode); --cli opens Mininet's prompt after the checks, in place
    of the experiment."""
    from lab.lifecycle import Lab
    run_dir = fresh_folder(args.results, run_name(fabric))
    say = (lambda *a: None) if args.json else print
    summary = summary_head(fabric, args, run_dir, say)
    if cluster:
        from lab.cluster.cluster import ClusterLab
        lab = ClusterLab(fabric, run_dir, *cluster, datapath=args.datapath, verbose=args.verbose)
    else:
        lab = Lab(fabric, run_dir, datapath=args.datapath, verbose=args.verbose)
    with lab:
        measure(lab, None if args.cli else exp, args, run_dir, summary, say)
        if args.cli:
            from lab.mininet_cli import open_cli
            open_cli(lab)
    summary.timings["teardown_s"] = round(lab.timings["teardown_s"], 2)
    if summary.cluster:                            # each machine's teardown, now known
        summary.cluster = lab.summary()
    return finish(summary, run_dir, args,
                  f"teardown {summary.timings['teardown_s']:.1f} s; results in {run_dir}")


def measure(lab, exp, args, run_dir, summary: Summary, say) -> None:
    """What a run does on a lab that is up: all pairs, then the experiment."""
    lab_summary(lab, summary, say)
    if reachability(lab, summary, say) and not args.no_traffic and exp is not None:
        _traffic(lab, exp, run_dir, args, summary, say)


def finish(summary: Summary, run_dir, args, last_line: str) -> int:
    """summary.json (and --json); the run's exit status (Summary.exit_status)."""
    write_summary(summary.to_dict(), run_dir, args.json)
    if not args.json:
        print(last_line)
    return summary.exit_status()


def lab_summary(lab, summary: Summary, say) -> None:
    """What a lab that is up reports: its datapath, OpenFlow, timings, ECN,
    machines; its warnings said."""
    summary.datapath = lab.datapath
    summary.openflow = sorted(set(lab.status["versions"].values()))
    summary.timings, summary.results = dict(lab.timings), str(lab.run_dir)
    for warning in lab.warnings:
        summary.warnings.append(f"host: {warning}")
        print(f"warning: host: {warning}", file=sys.stderr)
    control = "/".join(summary.openflow) or "no controller (L2 learning + STP)"
    say(f"lab      datapath {lab.datapath}, {control}, policy {lab.fabric.policy}; "
        f"ready in {lab.timings['start_s']:.1f} s (build {lab.timings['build_s']:.1f} s)")
    if lab.ecn.asked:
        summary.ecn = lab.ecn.to_dict()
        say(console.ecn_line(lab.fabric, lab.ecn.note))
    if lab.multi_machine:
        summary.cluster = lab.summary()
        say(console.cluster_text(summary.cluster))


def reachability(lab, summary: Summary, say) -> bool:
    """Every server pair pinged: whether all reach each other."""
    from lab.reachability import all_pairs_reachability
    t0 = time.monotonic()
    reach = all_pairs_reachability(lab)
    summary.reachability = {"ok": reach.ok, "total": reach.total, "failures": reach.failures,
                            "seconds": round(time.monotonic() - t0, 2)}
    say(f"reach    {reach.ok}/{reach.total} server pairs reach each other"
        + ("" if reach.complete else f"; failing: {console.pairs_text(reach.failures)}"))
    return reach.complete


def _traffic(lab, exp, run_dir, args, summary: Summary, say) -> None:
    """The incast, the training step, or the sweeps (and iperf3's check)."""
    from runs.measured import run_experiment
    if args.incast:                       # an incast instead of a sweep
        from runs.incast_beside import incast_beside
        summary.incast = incast_beside(lab, args.incast, args.seconds)
        return say(console.incast_text(summary.incast))
    if exp.step is not None:              # a training step instead of a sweep
        from report.step_report import report_step
        from runs.training import run_step
        summary.step = run_step(lab, exp, progress=progress(args.json))
        return report_step(lab.fabric, summary.step, run_dir, args.csv, say)
    results, figures, failed = run_sweeps(
        lab.fabric, exp, args.compare,
        lambda e, folder: run_experiment(lab, e, folder, progress=progress(args.json, args.front)),
        Outputs(run_dir, args.csv, say,
                machines=lab.hosts() if lab.multi_machine else None),
        args.front)
    summary.swept(results, exp.algorithm)
    say(f"figures  {', '.join(figures)} in {run_dir}" if failed is None
        else f"figures  none: drawing failed ({failed})")
    _iperf3_check(lab, args, summary)


def _iperf3_check(lab, args, summary: Summary) -> None:
    from traffic.measure.iperf3_check import cross_leaf_pairs, iperf3_check
    pairs = cross_leaf_pairs(lab.fabric)
    if args.iperf_check and pairs:
        summary.traffic = iperf3_check(lab, pairs, args.seconds, args.streams)
        if not args.json:
            print(console.iperf3_check_text(lab.fabric, summary.traffic))


def calibrate(fabric, args) -> int:
    """--calibrate: the table's head at once, a row as each rate ends (on a
    pipe or in a file too), the ceiling at the end; or the rows as JSON."""
    from runs.rate_calibration import (calibrate_rates, calibration_ceiling, calibration_head,
                                       calibration_row)
    run_dir = args.results / run_name(fabric, calibrate=True)
    if args.json:
        shown = Progress(enabled=False)
    else:
        print(calibration_head(fabric))
        shown = Progress(on_size=lambda row: print(calibration_row(row)))
    rows = calibrate_rates(fabric, run_dir, args.datapath, progress=shown)
    (run_dir / "calibration.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows, indent=1) if args.json else calibration_ceiling(rows))
    return 0
