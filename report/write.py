"""A run's outputs written: summary.json, results.csv (and --csv), the
figures, and the tables on the console (or the summary as JSON)."""

from __future__ import annotations

from runs.experiment import Experiment
from runs.simulated import sim_table, simulate_experiment


def simulated_run(fabric, exp: Experiment, run_dir, as_json: bool, csv_path, progress,
                  compare=()) -> int:
    """run_topology.py with a simulating engine: the sweep (and one per
    algorithm in `compare`), its tables (or the summary as JSON),
    results.csv, summary.json and the figures in `run_dir`."""
    import json
    from dataclasses import replace

    from report.tables import csv_text
    if exp.step is not None:
        return _simulated_step(fabric, exp, run_dir, as_json, csv_path)
    results = {exp.algorithm: simulate_experiment(fabric, exp, progress=progress)}
    for algorithm in compare:
        results[algorithm] = simulate_experiment(fabric, replace(exp, algorithm=algorithm),
                                                 progress=progress)
    result = results[exp.algorithm]
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = "".join(csv_text(r) if i == 0 else csv_text(r).split("\n", 1)[1]
                   for i, r in enumerate(results.values()))
    (run_dir / "results.csv").write_text(rows)
    if csv_path:
        csv_path.write_text(rows)
    result["figures"] = _figures(fabric, results, run_dir)
    summary = {"fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
               "policy": fabric.policy, "warnings": list(fabric.warnings),
               "results": str(run_dir), "collectives": result}
    if compare:
        summary["compared"] = {a: r for a, r in results.items() if a != exp.algorithm}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if as_json:
        print(json.dumps(summary, indent=1))
    else:
        _print(fabric, results, result["figures"], run_dir)
    return 0


def _simulated_step(fabric, exp: Experiment, run_dir, as_json: bool, csv_path) -> int:
    import json

    from report.step_report import report_step
    from runs.training import simulate_step
    result = simulate_step(fabric, exp)
    summary = {"fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
               "policy": fabric.policy, "warnings": list(fabric.warnings),
               "results": str(run_dir), "step": result}
    if not as_json:
        print(f"fabric   {fabric.name}: {fabric.shape()} (simulated: no network built)")
    report_step(result, run_dir, csv_path, (lambda *a: None) if as_json else print)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if as_json:
        print(json.dumps(summary, indent=1))
    return 0


def _figures(fabric, results: dict, run_dir) -> list:
    from report.figures import write_figures
    first = next(iter(results.values()))
    curves = None if len(results) == 1 else {
        f"{r['experiment']['collective']} ({alg})": [(x["size_bytes"], x["busbw_gbps"])
                                                    for x in r["runs"]]
        for alg, r in results.items()}
    try:
        return [p.name for p in write_figures(fabric, first, run_dir, curves)]
    except Exception:                 # noqa: BLE001 (a picture is never worth the run)
        return []


def _print(fabric, results: dict, figures: list, run_dir) -> None:
    from report.tables import nccl_table
    print(f"fabric   {fabric.name}: {fabric.shape()} (simulated: no network built)")
    from report.console import tiers_text
    for algorithm, result in results.items():
        print(nccl_table(result, result["link_rate_mbit"]))
        print(sim_table(result))
        if tiers_text(result["tiers"], ""):
            print(tiers_text(result["tiers"], "in the simulation (its seed's ECMP draw)"))
    print(f"figures  {', '.join(figures) or 'none'}; results in {run_dir}")
