"""A run's outputs, written in one place whatever ran it (a lab or the
simulator): per algorithm swept, its tables on the console; results.csv
(and --csv) with every algorithm's rows; the figures; summary.json, and the
summary as JSON on stdout when asked for."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from report import console
from report.tables import csv_text, fabric_table, nccl_table, sim_table
from runs.record import ABSENT, RunRecord


@dataclass
class Outputs:
    """Where a run's sweeps write and how they talk: the run's folder and
    --csv's file; the console (`say`), a line before each compared algorithm
    (`announce`), and a cluster's machines for the per-machine table."""
    run_dir: Path
    csv_path: Optional[Path] = None
    say: Callable[[str], None] = print
    machines: Optional[List[str]] = None
    announce: Callable[[str], None] = lambda algorithm: None


def sweep_collectives(fabric, exp, compare, replay: Callable, out: Outputs
                      ) -> Tuple[Dict[str, RunRecord], List[str], Optional[str]]:
    """`exp`'s sweep, then one per algorithm in `compare`, each replayed by
    `replay(exp, folder)` (a run record) and its tables said as it ends;
    then results.csv (and --csv) with every algorithm's rows and the
    figures in the run's folder. Returns the records by algorithm, the
    figures' names, and why none were drawn (None when they were)."""
    results = {}
    run_dir = out.run_dir
    for algorithm in (exp.algorithm, *compare):
        if algorithm != exp.algorithm:
            out.announce(algorithm)
        folder = run_dir if algorithm == exp.algorithm else run_dir / algorithm
        results[algorithm] = replay(replace(exp, algorithm=algorithm), folder)
        out.say(sweep_text(fabric, results[algorithm], out.machines))
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = "".join(csv_text(r) if i == 0 else csv_text(r).split("\n", 1)[1]
                   for i, r in enumerate(results.values()))
    (run_dir / "results.csv").write_text(rows)
    if out.csv_path:
        out.csv_path.write_text(rows)
    figures, failed = write_sweep_figures(fabric, results, run_dir)
    results[exp.algorithm].figures = figures
    return results, figures, failed


def sweep_text(fabric, result: RunRecord, machines: Optional[List[str]] = None) -> str:
    """One sweep's tables: nccl-tests' and what the fabric did; for a
    simulated sweep, what the simulated fabric did instead."""
    rate = result.link_rate_mbit
    if result.simulated is not ABSENT:
        parts = [nccl_table(result, rate), sim_table(result)]
        if console.tiers_text(result.tiers, ""):
            parts.append(console.tiers_text(result.tiers,
                                            "in the simulation (its seed's ECMP draw)"))
        return "\n".join(parts)
    parts = [nccl_table(result, rate), fabric_table(result, rate)]
    if result.cross_traffic:
        parts.append(console.cross_text(result.cross_traffic))
    if result.failures:
        parts.append(console.failures_text(result.failures))
    if machines:
        parts.append(console.machines_text(result.runs, machines))
    parts.extend(filter(None, [
        console.uplinks_text(fabric, result.uplink_tx_bytes, "during the collectives"),
        console.routing_text(result, "during the collectives"), console.split_text(result)]))
    return "\n".join(parts)


def write_sweep_figures(fabric, results: Dict[str, RunRecord], run_dir: Path):
    """The PNGs of a run (busbw.png with a curve per algorithm when several
    were swept, each with its flags and its simulated curve): their names, and why none were drawn (a picture is never
    worth the run)."""
    from report.figures import write_figures
    first, *others = results
    compared = {alg: results[alg] for alg in others}
    try:
        return [p.name for p in write_figures(fabric, results[first], run_dir, compared)], None
    except Exception as exc:          # noqa: BLE001
        return [], f"{type(exc).__name__}: {exc}"


def fabric_summary(fabric, run_dir: Path) -> dict:
    """The head of every summary.json: which fabric, from where, its shape."""
    return {"fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
            "policy": fabric.policy, "network": network_summary(fabric),
            "warnings": list(fabric.warnings), "results": str(run_dir)}


def network_summary(fabric) -> dict:
    """The fabric's network technology as summary.json gives it."""
    tech = fabric.network
    return {"technology": tech.name, "title": tech.describe(fabric.network_settings),
            "options": fabric.network_settings, "switch_latency_us": fabric.switch_latency_us,
            "message_us": tech.message_us, "lossless": tech.lossless,
            "congestion_control": tech.congestion_control}


def network_line(fabric) -> str:
    """The console's line naming the technology a run prices."""
    tech = fabric.network
    return (f"network  {tech.describe(fabric.network_settings)}, routing {fabric.policy}: "
            f"{fabric.switch_latency_us:g} us a switch, {tech.message_us:g} us a message more "
            f"than verbs, lossless: {tech.lossless} (docs/networks.md)")


def write_summary(summary: dict, run_dir: Path, as_json: bool) -> None:
    """summary.json in `run_dir`; on stdout too with --json. Every run
    record in it is written as its `to_dict()`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    # streamed, not made whole first: with a million timeline events (512
    # ranks simulated) the text's pieces took 1.3 GB
    with (run_dir / "summary.json").open("w") as out:
        json.dump(summary, out, indent=1, default=_record_dict)
    if as_json:
        json.dump(summary, sys.stdout, indent=1, default=_record_dict)
        print()


def _record_dict(value) -> dict:
    """What json cannot write by itself: a run record, as its dict."""
    if isinstance(value, RunRecord):
        return value.to_dict()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def simulated_run(fabric, exp, run_dir: Path, as_json: bool, csv_path, progress,
                  compare=(), sweeps=None, origin: Optional[dict] = None) -> int:
    """run_topology.py with a simulating engine: the sweeps (or the training
    step), their tables (or the summary as JSON), results.csv, summary.json
    and the figures in `run_dir`. `sweeps`: what replays them in place of
    `sweep_collectives` (run_topology.main's)."""
    from runs.simulated import simulate_experiment
    say = (lambda *a: None) if as_json else print
    say(f"fabric   {fabric.name}: {fabric.shape()} (simulated: no network built)")
    say(network_line(fabric))
    summary = fabric_summary(fabric, run_dir)
    if origin is not None:
        summary["provenance"] = origin          # runs/provenance.py
    if exp.step is not None:
        from report.step_report import report_step
        from runs.training import simulate_step
        summary["step"] = simulate_step(fabric, exp)
        report_step(summary["step"], run_dir, csv_path, say)
    else:
        results, figures, _failed = (sweeps or sweep_collectives)(
            fabric, exp, compare, lambda e, _folder: simulate_experiment(fabric, e,
                                                                         progress=progress),
            Outputs(run_dir, csv_path, say))
        summary["collectives"] = results[exp.algorithm]
        if compare:
            summary["compared"] = {a: r for a, r in results.items() if a != exp.algorithm}
        say(f"figures  {', '.join(figures) or 'none'}; results in {run_dir}")
    write_summary(summary, run_dir, as_json)
    return 0
