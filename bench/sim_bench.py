#!/usr/bin/env python3
"""The simulator against the emulator, side by side in one run: the same
fabric YAML and experiment emulated with real packets (rank agents, checked
data) and simulated (sim), per size measured/simulated next to
measured/alpha-beta, and per link the bytes simulated against measured.

    sudo scripts/lab bench sim              # or: .venv/bin/python -m bench.sim_bench
    sudo .venv/bin/python -m bench.sim_bench --json out.json --cases "ring 2x2,rhd 2x2"
    .venv/bin/python -m bench.sim_bench --parts speed        # no root: speed and memory only

Only sizes the fidelity verdict trusts count (a flagged size says more about
the shaper than the fabric). Goal: median |measured/simulated - 1| <= 0.10,
worst <= 0.25, measured being the mean of the timed iterations as nccl-tests
reports it; `min/sim` is the fastest iteration's, for telling a steady gap
from an iteration now and then stalled.

The speed part: each emulated case simulated alone (goal under 1 s); 1,024
GPUs with the full event-by-event simulation against the step shortcut on
the same Clos (goal under 60 s); the planner's --simulate at 200,000 GPUs in
a child process, its wall time and peak memory (goal under 60 s and 8 GB);
a ring over 512 GPUs (topologies/sim/superpod-512.yaml) as run_topology.py
runs it, its own sweep and 1 GiB, in a child each (goal under 60 s and 1 GB).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

from harness import REPO, TOPOLOGIES
from harness.commandline import command_line
from lab.lifecycle import Lab
from topologies.fabric import load_fabric, parse_fabric
from runs.experiment import Experiment
from traffic.measure.fidelity import SLOWER
from runs.rate_calibration import at_rate
from runs.measured import run_experiment

SIZES = dict(minbytes=512 << 10, maxbytes=2 << 20, stepfactor=4, iters=3, warmup=1,
             idle_seconds=1.0)
LARGER = dict(SIZES, maxbytes=8 << 20)
# rail-2x4 (5 Mbit/s NICs, NVLink in memory as its own experiment has it):
# below about 2.4 MB the rail ring's 14 dependent steps leave too large a
# share unpaid for the verdict; 4 MiB is the fabric's own experiment
RAIL = dict(SIZES, minbytes=4 << 20, maxbytes=8 << 20, stepfactor=2, scale_up="memory")


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
    default = load_fabric(TOPOLOGIES / "default.yaml")
    odd = odd_fabric()
    rail = load_fabric(TOPOLOGIES / "rail-2x4.yaml")
    return {
        "ring 2x2": (default, Experiment(algorithm="ring", **SIZES), None),
        "ring 2x2 single-path": (default.with_policy("single-path"), Experiment(algorithm="ring", **SIZES), None),
        "rhd 2x2": (default, Experiment(algorithm="rhd", **SIZES), None),
        "tree 2x2": (default, Experiment(algorithm="tree", **SIZES), None),
        "rhd odd, parallel uplinks": (odd, Experiment(algorithm="rhd", **SIZES),
                                      [h.name for h in odd.endpoints][:5]),
        "ring oversubscribed": (load_fabric(TOPOLOGIES / "oversubscribed.yaml"),
                                Experiment(algorithm="ring", **SIZES), None),
        # 16 agents on 2 cores: at its own 10 Mbit/s the host fell behind (CPU
        # ~60%, ovs-vswitchd ~80% of a core); at 5 it keeps up, as the verdict advised
        "hierarchical multi-gpu": (at_rate(load_fabric(TOPOLOGIES / "multi-gpu.yaml"), 5),
                                   Experiment(algorithm="hierarchical", **SIZES), None),
        # 32 GPUs, 4 Mbit/s NICs: below 8 MiB an idle shaper's unpaid frames are
        # too large a share of each NIC's bytes for the verdict to trust a size
        "hierarchical rail-optimized": (load_fabric(TOPOLOGIES / "rail-optimized.yaml"),
                                        Experiment(algorithm="hierarchical", **LARGER), None),
        "hierarchical server-per-leaf": (load_fabric(TOPOLOGIES / "leaf-spine-4gpu.yaml"),
                                         Experiment(algorithm="hierarchical", **LARGER), None),
        # 8 GPUs, a NIC each on its rail leaf: every NIC busy at once
        "rail-ring rail 2x4": (rail, Experiment(algorithm="rail-ring", **RAIL), None),
        "nccl-tree rail 2x4": (rail, Experiment(algorithm="nccl-tree", **RAIL), None),
    }


def one(name, fabric, exp, ranks, workdir):
    if ranks:
        exp.ranks = ranks
    tag = name.replace(" ", "-").replace(",", "")
    t0 = time.monotonic()
    with Lab(fabric, workdir / tag) as lab:
        result = run_experiment(lab, exp, workdir / tag)
    rows = []
    for r in result.runs:
        measured = {i: l["tx_bytes"] / exp.iters for i, l in r["links"].items()}
        busy = [i for i, b in measured.items() if b > 0.05 * max(measured.values())]
        link_err = max((abs(r["simulated_link_bytes"][i] / measured[i] - 1) for i in busy),
                       default=float("nan"))
        rows.append({"size_bytes": r["size_bytes"], "flags": r["flags"], "wrong": r["wrong"],
                     "meas_over_sim": r["measured_over_simulated"],
                     "fastest_over_sim": (r["time_min_s"] / r["simulated_s"]
                                          if r.get("simulated_s") else None),
                     "meas_over_ab": r["measured_over_predicted"],
                     "worst_link_bytes_error": link_err})
    return {"case": name, "seconds": round(time.monotonic() - t0, 1),
            "distrust": ("host did not keep up" if not result.fidelity["host_kept_up"] else
                         "host-bound" if result.fidelity.get("host_bound") else None),
            "rows": rows}


def report(results):
    print(f"{'case':32} {'size':>9} {'meas/sim':>9} {'min/sim':>8} {'meas/ab':>8} "
          f"{'link bytes':>11}  note")
    trusted = []
    for res in results:
        for row in res["rows"]:
            # (the flag that compares with the simulator would make this circular)
            flags = [f for f in row["flags"] if f != SLOWER]
            ok = not flags and not res["distrust"] and row["meas_over_sim"]
            if ok:
                trusted.append(row["meas_over_sim"])
            print(f"{res['case']:32} {row['size_bytes']:9d} {row['meas_over_sim'] or 0:9.2f} "
                  f"{row['fastest_over_sim'] or 0:8.2f} "
                  f"{row['meas_over_ab'] or 0:8.2f} {row['worst_link_bytes_error']:10.1%}  "
                  + ("" if ok else "not counted: " + (", ".join(row["flags"]) or res["distrust"])))
    dev = [abs(x - 1) for x in trusted]
    summary = {"sizes": len(dev), "median_abs_dev": statistics.median(dev) if dev else None,
               "worst_abs_dev": max(dev) if dev else None}
    if dev:
        print(f"# {len(dev)} trusted sizes: median |meas/sim - 1| {summary['median_abs_dev']:.3f}"
              f" (goal 0.10), worst {summary['worst_abs_dev']:.3f} (goal 0.25)")
    return summary


def speed(chosen) -> dict:
    """How fast the simulator is, and how much memory it takes (see the docstring)."""
    from runs.simulated import simulate_experiment
    out = {"cases": {}}
    print(f"{'case simulated alone':32} {'seconds':>8}")
    for name, (fabric, exp, ranks) in chosen.items():
        exp = dataclasses.replace(exp, ranks=ranks or exp.ranks)
        t0 = time.monotonic()
        simulate_experiment(fabric, exp)
        out["cases"][name] = round(time.monotonic() - t0, 3)
        print(f"{name:32} {out['cases'][name]:8.3f}")
    out["planner_200000"] = planner_at(200_000)
    out["full_1024"] = full_against_shortcut()
    out["ring_512"] = ring_512()
    return out


def ring_512() -> dict:
    """run_topology.py on superpod-512 (ring AllReduce): its own sweep (32 KiB
    to 2 MiB, event by event) and 1 GiB alone (the step shortcut: its replay
    would run 33 million operations), each in a child: wall, peak memory, method."""
    import tempfile
    from bench.scale_bench import simulated_run
    out = {}
    with tempfile.TemporaryDirectory() as results:
        for name, flags in (("own sweep", ()), ("1 GiB", ("-b", "1G", "-e", "1G"))):
            row = simulated_run(TOPOLOGIES / "sim" / "superpod-512.yaml", Path(results), *flags)
            out[name] = {k: row[k] for k in ("exit", "wall_s", "peak_mb", "method")}
            print(f"# 512 GPUs, ring AllReduce, {name}: {row['wall_s']:.1f} s, peak memory "
                  f"{row['peak_mb'] or 0:,} MB, {row['method']}"
                  + ("" if row["exit"] == 0 else f" (exit {row['exit']})"))
    return out


def full_against_shortcut(servers=128, gpus=8) -> dict:
    """1,024 GPUs (128 servers x 8, 400 Gbit/s NICs, clos-2 at radix 64):
    hierarchical AllReduce of 1 GiB event by event, and by the step shortcut."""
    from collectives import schedules
    from sim.clos import ClosNetwork, ClosShape
    from sim.phases import allreduce_phases, phase_seconds
    from sim.replay import Replay
    shape = ClosShape(servers=servers, gpus=gpus, nics=gpus, down=32, up=32, radix=64)
    n, count = shape.n, (1 << 30) // 4
    out = {}
    for algorithm in ("hierarchical", "ring"):
        t0 = time.monotonic()
        sched = schedules.build("allreduce", algorithm, n, count,
                                schedules.RankLayout(local=gpus), data=False)
        full = Replay(ClosNetwork(shape), list(range(n)), sched, 1, 1.0, 1e-6).run().seconds
        t1 = time.monotonic()
        short = phase_seconds(ClosNetwork(shape), allreduce_phases(algorithm, n, count, gpus),
                              1.0, 1e-6)
        t2 = time.monotonic()
        out[algorithm] = {"full_s": full, "shortcut_s": short, "full_wall_s": round(t1 - t0, 2),
                          "shortcut_wall_s": round(t2 - t1, 3), "ratio": short / full}
        print(f"# 1,024 GPUs, {algorithm} AllReduce of 1 GiB: full simulation {t1 - t0:.1f} s "
              f"(incl. building the schedule), shortcut {t2 - t1:.3f} s; simulated times "
              f"{full * 1e3:.3f} / {short * 1e3:.3f} ms, shortcut/full {short / full:.4f}")
    return out


def planner_at(gpus: int) -> dict:
    """`python -m planner --gpus N --radix 128 --simulate` in a child of its
    own: wall time, and the peak resident memory the child reports itself."""
    import subprocess
    code = ("import resource, sys\nfrom planner.cli import main\nmain(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    cmd = [sys.executable, "-c", code, "--gpus", str(gpus), "--radix", "128", "--simulate"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    peak_mb = int(proc.stderr.split()[-1]) / 1024
    print(f"# planner --simulate at {gpus:,} GPUs (clos-3, 2 wirings x ring and hierarchical, "
          f"1 GiB, each with its ideal fabric): {wall:.1f} s, peak memory {peak_mb:,.0f} MB")
    return {"gpus": gpus, "wall_s": round(wall, 1), "peak_mb": round(peak_mb)}


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--parts", default="emulated,speed",
                   help="emulated (needs root: labs), speed (no root); default both")
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/fabric-lab-sim-bench"))
    args = p.parse_args(argv)
    chosen = cases()
    if args.cases:
        chosen = {k: v for k, v in chosen.items() if k in args.cases.split(",")}
    parts = set(args.parts.split(","))
    results, summary, fast = [], None, None
    if "emulated" in parts:
        results = [one(name, *case, args.workdir) for name, case in chosen.items()]
        summary = report(results)
    if "speed" in parts:
        fast = speed(chosen)
    if args.json:
        args.json.write_text(json.dumps({"cases": results, "summary": summary, "speed": fast},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
