"""A run's outputs, whatever ran it (a lab or the simulator): a sweep's
tables for the console; results.csv (and --csv) with every sweep's rows;
the figures; summary.json, and the summary as JSON on stdout when asked
for (the network technology's line and part of it: report/console.py).
What runs the sweeps is runner/."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Optional

from report import console
from report.tables import csv_text, fabric_table, nccl_table, sim_table
from runs.record import ABSENT, RunRecord


def write_csv(fabric, records: List[RunRecord], run_dir: Path,
              csv_path: Optional[Path] = None) -> None:
    """results.csv in `run_dir` (and `csv_path` when given): every record's
    rows under one header, each naming the fabric's network technology."""
    name = fabric.network.name
    rows = "".join(csv_text(r, name) if i == 0 else csv_text(r, name).split("\n", 1)[1]
                   for i, r in enumerate(records))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.csv").write_text(rows)
    if csv_path:
        csv_path.write_text(rows)


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


def write_summary(summary: dict, run_dir: Path, as_json: bool) -> None:
    """summary.json in `run_dir`; on stdout too with --json. Every run
    record in it is written as its `to_dict()`."""
    run_dir.mkdir(parents=True, exist_ok=True)
    # streamed, not made whole first: with a million timeline events (512
    # ranks simulated) the text's pieces took 1.3 GB
    with (run_dir / "summary.json").open("w") as out:
        json.dump(summary, out, indent=1, default=_record_dict)
    if as_json:                      # the same text: copied, not encoded again
        with (run_dir / "summary.json").open() as written:
            shutil.copyfileobj(written, sys.stdout)
        print()


def _record_dict(value) -> dict:
    """What json cannot write by itself: a run record, as its dict."""
    if isinstance(value, RunRecord):
        return value.to_dict()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
