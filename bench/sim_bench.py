#!/usr/bin/env python3
"""The simulator against the emulator, side by side in one run: the same
fabric YAML and experiment emulated with real packets (rank agents, checked
data) and simulated (traffic/sim), per size measured/simulated next to
measured/alpha-beta, and per link the bytes simulated against measured.

    sudo scripts/lab bench sim              # or: .venv/bin/python bench/sim_bench.py
    sudo .venv/bin/python bench/sim_bench.py --json out.json --cases default,rhd-odd

Only sizes the fidelity verdict trusts count (a flagged size says more about
the shaper than the fabric). Goal: median |measured/simulated - 1| <= 0.10,
worst <= 0.25.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab.lifecycle import Lab  # noqa: E402
from topologies.fabric import load_fabric, parse_fabric  # noqa: E402
from traffic.experiment import Experiment  # noqa: E402
from traffic.sweep import run_experiment  # noqa: E402

T = REPO / "topologies"
SIZES = dict(minbytes=512 << 10, maxbytes=2 << 20, stepfactor=4, iters=3, warmup=1,
             idle_seconds=1.0)


def odd_fabric():
    """6 servers on 3 leaves, each leaf with 2 parallel uplinks to each of 2
    spines; the case runs on 5 of them (an odd rank count)."""
    return parse_fabric("""
name: odd-parallel
fabric: {kind: leaf-spine, spines: 2, leaves: 3, servers_per_leaf: 2, uplinks_per_spine: 2, mtu: 9000}
links:
  server_leaf: {rate_mbit: 20, queue_packets: 32}
  leaf_spine: {rate_mbit: 20, queue_packets: 32}
""", "odd-parallel.yaml")


def cases():
    """name -> (fabric, experiment, ranks or None)."""
    default = load_fabric(T / "default.yaml")
    odd = odd_fabric()
    return {
        "ring 2x2": (default, Experiment(**SIZES), None),
        "ring 2x2 single-path": (default.with_policy("single-path"), Experiment(**SIZES), None),
        "rhd 2x2": (default, Experiment(algorithm="rhd", **SIZES), None),
        "tree 2x2": (default, Experiment(algorithm="tree", **SIZES), None),
        "rhd odd, parallel uplinks": (odd, Experiment(algorithm="rhd", **SIZES),
                                      [h.name for h in odd.endpoints][:5]),
        "ring oversubscribed": (load_fabric(T / "oversubscribed.yaml"), Experiment(**SIZES), None),
        "hierarchical multi-gpu": (load_fabric(T / "multi-gpu.yaml"),
                                   Experiment(algorithm="hierarchical", **SIZES), None),
        "hierarchical rail-optimized": (load_fabric(T / "rail-optimized.yaml"),
                                        Experiment(algorithm="hierarchical", **SIZES), None),
        "hierarchical server-per-leaf": (load_fabric(T / "leaf-spine-4gpu.yaml"),
                                         Experiment(algorithm="hierarchical", **SIZES), None),
    }


def one(name, fabric, exp, ranks, workdir):
    if ranks:
        exp.ranks = ranks
    tag = name.replace(" ", "-").replace(",", "")
    t0 = time.monotonic()
    with Lab(fabric, workdir / tag) as lab:
        result = run_experiment(lab, exp, workdir / tag)
    rows = []
    for r in result["runs"]:
        measured = {i: l["tx_bytes"] / exp.iters for i, l in r["links"].items()}
        busy = [i for i, b in measured.items() if b > 0.05 * max(measured.values())]
        link_err = max((abs(r["simulated_link_bytes"][i] / measured[i] - 1) for i in busy),
                       default=float("nan"))
        rows.append({"size_bytes": r["size_bytes"], "flags": r["flags"], "wrong": r["wrong"],
                     "meas_over_sim": r["measured_over_simulated"],
                     "meas_over_ab": r["measured_over_predicted"],
                     "worst_link_bytes_error": link_err})
    return {"case": name, "seconds": round(time.monotonic() - t0, 1),
            "trustworthy": (result["fidelity"]["host_kept_up"]
                            and not result["fidelity"].get("host_bound")), "rows": rows}


def report(results):
    print(f"{'case':32} {'size':>9} {'meas/sim':>9} {'meas/ab':>8} {'link bytes':>11}  note")
    trusted = []
    for res in results:
        for row in res["rows"]:
            ok = not row["flags"] and res["trustworthy"] and row["meas_over_sim"]
            if ok:
                trusted.append(row["meas_over_sim"])
            print(f"{res['case']:32} {row['size_bytes']:9d} {row['meas_over_sim'] or 0:9.2f} "
                  f"{row['meas_over_ab'] or 0:8.2f} {row['worst_link_bytes_error']:10.1%}  "
                  + ("" if ok else "not counted: " + (", ".join(row["flags"]) or "host-bound")))
    dev = [abs(x - 1) for x in trusted]
    summary = {"sizes": len(dev), "median_abs_dev": statistics.median(dev) if dev else None,
               "worst_abs_dev": max(dev) if dev else None}
    if dev:
        print(f"# {len(dev)} trusted sizes: median |meas/sim - 1| {summary['median_abs_dev']:.3f}"
              f" (goal 0.10), worst {summary['worst_abs_dev']:.3f} (goal 0.25)")
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/fabric-lab-sim-bench"))
    args = p.parse_args(argv)
    chosen = cases()
    if args.cases:
        chosen = {k: v for k, v in chosen.items() if k in args.cases.split(",")}
    results = [one(name, *case, args.workdir) for name, case in chosen.items()]
    summary = report(results)
    if args.json:
        args.json.write_text(json.dumps({"cases": results, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
