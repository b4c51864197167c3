#!/usr/bin/env python3
"""Scale-up and scale-out benchmark: each step of the argument from one GPU
to a SuperPOD unit, measured side by side in one run.

    sudo scripts/lab bench scale              # or: .venv/bin/python -m bench.scale_bench
    sudo .venv/bin/python -m bench.scale_bench --parts hier,planner --json out.json

1. hier: hierarchical against flat ring AllReduce on 8-GPU servers (4 servers,
   one NIC per GPU, rail-optimized), the same fabric and sizes: time ratio,
   and the bytes each puts on the network. Also a busbw-by-size plot of both.
2. rail: rail-optimized against server-per-leaf wiring of the same servers,
   leaves, spines and rates (topologies/rail-optimized.yaml and
   leaf-spine-4gpu.yaml), hierarchical AllReduce: time ratio and spine bytes.
3. largest: the SuperPOD scalable unit (256 GPUs, 44 switches): seconds to
   build, to be ready, to check all 65,280 pairs, for one hierarchical
   AllReduce, and to tear down; and whether anything was left behind.
4. planner: the planner's time for 200,000 GPUs (no network).
5. predict: the planner's AllReduce model, calibrated on the smaller sizes of
   an emulated run of topologies/multi-gpu.yaml, against the measured time of
   the largest size (held out of the fit).
6. simulate (no root): `run_topology.py FABRIC --engine sim`, ring AllReduce
   32 KiB to 2 MiB, as a user runs it, on topologies/sim/ (512, 1,024 and
   16,384 GPUs at 400G): wall time, peak resident memory (the child's own),
   and how it simulated (event by event, or the step shortcut).

    .venv/bin/python -m bench.scale_bench --parts simulate
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import timeit
from pathlib import Path

import planner
from harness import REPO, TOPOLOGIES
from harness.commandline import command_line
from harness.labs import host_state
from topologies.fabric import load_fabric, parse_fabric
from lab.lifecycle import Lab
from lab.reachability import all_pairs_reachability
from runs.experiment import Experiment
from runs.measured import run_experiment

PARTS = ("hier", "rail", "largest", "planner", "predict", "simulate")
SIMULATED = ("superpod-512.yaml", "superpod-1024.yaml", "leaf-spine-16k.yaml")


def experiment(sizes, algorithm, iters=2, warmup=1):
    return Experiment(algorithm=algorithm, minbytes=sizes[0], maxbytes=sizes[-1],
                      stepfactor=sizes[1] / sizes[0] if len(sizes) > 1 else 2,
                      iters=iters, warmup=warmup, idle_seconds=1.0)


def spine_bytes(result):
    return sum(v for leaf in result.uplink_tx_bytes.values() for v in leaf.values())


def dgx_like(servers=4):
    """8-GPU servers with a NIC per GPU on 8 rail leaves, 2 spines."""
    return parse_fabric(f"""
name: dgx-{servers}
fabric: {{kind: rail-optimized, servers_per_unit: {servers}, spines: 2, mtu: 9000}}
server: {{gpus: 8, nics: 8}}
links:
  intra_node:  {{rate_mbit: 8, queue_packets: 64}}
  server_leaf: {{rate_mbit: 1, queue_packets: 32}}
  leaf_spine:  {{rate_mbit: {servers / 2:g}, queue_packets: 32}}
""", f"dgx-{servers}.yaml")


def part_hier(workdir, out):
    from report.plots import plot_busbw
    fabric = dgx_like()
    sizes = [64 * 1024, 256 * 1024, 1024 * 1024]
    results = {}
    with Lab(fabric, workdir / "hier") as lab:
        for algorithm in ("ring", "hierarchical"):
            results[algorithm] = run_experiment(lab, experiment(sizes, algorithm),
                                                workdir / "hier" / algorithm)
    rows = []
    for flat, hier in zip(results["ring"].runs, results["hierarchical"].runs):
        rows.append({"size_bytes": flat["size_bytes"], "ring_s": flat["time_s"],
                     "hierarchical_s": hier["time_s"],
                     "ring_over_hierarchical": flat["time_s"] / hier["time_s"],
                     "network_bytes": {"ring": flat["wire_bytes"]["network_to_servers"],
                                       "hierarchical": hier["wire_bytes"]["network_to_servers"]},
                     "wrong": flat["wrong"] + hier["wrong"],
                     "cpu_pct": max(flat["cpu_busy_pct"], hier["cpu_busy_pct"])})
    plot = plot_busbw({f"{a} AllReduce": [(r["size_bytes"], r["busbw_gbps"]) for r in res.runs]
                       for a, res in results.items()}, workdir / "hier" / "busbw.png",
                      title=f"{fabric.name}: 4 servers x 8 GPUs, flat ring vs hierarchical",
                      link_gbps=1 / 8e3)
    out["hier"] = {"fabric": fabric.shape(), "rows": rows, "plot": str(plot),
                   "fidelity": {a: r.fidelity for a, r in results.items()}}
    print(f"\n1. hierarchical vs flat ring AllReduce, {fabric.shape()}")
    print(f"   {'size':>9}  {'ring s':>8}  {'hier s':>8}  {'ring/hier':>9}  "
          f"{'network MB ring/hier':>21}  #wrong  CPU")
    for r in rows:
        nb = r["network_bytes"]
        print(f"   {r['size_bytes']:>9}  {r['ring_s']:8.2f}  {r['hierarchical_s']:8.2f}  "
              f"{r['ring_over_hierarchical']:9.2f}  {nb['ring'] / 1e6:10.2f} / {nb['hierarchical'] / 1e6:7.2f}"
              f"  {r['wrong']:6d}  {r['cpu_pct']:3.0f}%")
    print(f"   plot: {plot}")


def part_rail(workdir, out):
    """Both wirings with the spines non-blocking, then with a quarter of the
    spine capacity (4:1 oversubscribed): rail wiring keeps the rail step off
    the spines, so it is what lets a cheaper spine layer do."""
    size = 1024 * 1024
    rows = {}
    for spine_share in (1, 4):
        for name in ("rail-optimized", "leaf-spine-4gpu"):
            fabric = load_fabric(TOPOLOGIES / f"{name}.yaml")
            rate = fabric.link_classes["leaf_spine"].rate_mbit / spine_share
            fabric = fabric.edited(lambda spec: spec["links"]["leaf_spine"].update(rate_mbit=rate))
            tag = f"{name}-{spine_share}to1"
            with Lab(fabric, workdir / tag) as lab:
                r = run_experiment(lab, experiment([size], "hierarchical", iters=3), workdir / tag)
            run = r.runs[0]
            rows[tag] = {"time_s": run["time_s"], "spine_bytes": spine_bytes(r),
                         "oversubscription": fabric.oversubscription(),
                         "network_bytes": run["wire_bytes"]["network_to_servers"],
                         "wrong": run["wrong"], "cpu_pct": run["cpu_busy_pct"],
                         "fidelity": r.fidelity}
    ratios = {f"{k}to1": rows[f"leaf-spine-4gpu-{k}to1"]["time_s"]
              / rows[f"rail-optimized-{k}to1"]["time_s"] for k in (1, 4)}
    out["rail"] = {"size_bytes": size, "rows": rows, "server_per_leaf_over_rail": ratios}
    print(f"\n2. rail-optimized vs server-per-leaf wiring (8 servers x 4 GPUs, 4 NICs each), "
          f"hierarchical AllReduce of {size} B")
    for name, r in rows.items():
        print(f"   {name:<22} oversubscription {r['oversubscription']:.0f}:1  {r['time_s']:7.2f} s"
              f"   spine bytes {r['spine_bytes'] / 1e6:7.2f} MB   #wrong {r['wrong']}   "
              f"CPU {r['cpu_pct']:.0f}%")
    print("   time server-per-leaf / rail-optimized = "
          + ", ".join(f"{v:.2f} at {k.replace('to', ':')}" for k, v in ratios.items()))


def part_largest(workdir, out):
    fabric = load_fabric(TOPOLOGIES / "superpod-su.yaml")
    before = host_state()
    t = {}
    lab = Lab(fabric, workdir / "superpod")
    with lab:
        t0 = time.monotonic()
        reach = all_pairs_reachability(lab)
        t["reach_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        r = run_experiment(lab, experiment([64 * 1024], "hierarchical", iters=1, warmup=1),
                           workdir / "superpod")
        t["allreduce_phase_s"] = time.monotonic() - t0
    t.update(build_s=lab.timings["build_s"], ready_s=lab.timings["start_s"],
             teardown_s=lab.timings["teardown_s"])
    left = host_state() != before
    run = r.runs[0]
    out["largest"] = {"fabric": fabric.shape(), "endpoints": len(fabric.endpoints),
                      "switches": len(fabric.switches), "links": len(fabric.links),
                      "pairs_ok": reach.ok, "pairs": reach.total, "allreduce_s": run["time_s"],
                      "wrong": run["wrong"], "cpu_pct": run["cpu_busy_pct"],
                      "fidelity": r.fidelity, "left_behind": left,
                      **{k: round(v, 2) for k, v in t.items()}}
    print(f"\n3. the largest fabric: {fabric.shape()}")
    print(f"   build {t['build_s']:.1f} s, ready {t['ready_s']:.1f} s, "
          f"{reach.ok}/{reach.total} pairs reachable in {t['reach_s']:.1f} s, "
          f"hierarchical AllReduce 64 KiB: {run['time_s']:.2f} s (#wrong {run['wrong']}, "
          f"CPU {run['cpu_busy_pct']:.0f}%; phase with agents {t['allreduce_phase_s']:.1f} s), "
          f"teardown {t['teardown_s']:.1f} s, left behind: {'YES' if left else 'nothing'}")


def part_planner(workdir, out):
    n = 20
    per_plan = timeit.timeit(lambda: planner.plan(200_000, 64), number=n) / n
    per_cli = timeit.timeit(lambda: planner.format_plan(planner.plan(200_000, 64)), number=n) / n
    p = planner.plan(200_000, 64)
    clos3 = next(d for d in p["designs"] if d.name == "clos-3")
    out["planner"] = {"plan_s": per_plan, "plan_and_report_s": per_cli,
                      "full_mesh_cables": p["designs"][0].cables, "clos3_switches": clos3.switches,
                      "years_one_gpu": p["training"]["years_one_gpu"]}
    print(f"\n4. planner, 200,000 GPUs at radix 64: {per_plan * 1e3:.3f} ms per plan, "
          f"{per_cli * 1e3:.3f} ms with the report (mean of {n}); full mesh "
          f"{p['designs'][0].cables:.2e} cables, 3-tier Clos {clos3.switches:,} switches, "
          f"1e24 FLOPs on one GPU {p['training']['years_one_gpu']:.1f} years")


def part_predict(workdir, out):
    fabric = load_fabric(TOPOLOGIES / "multi-gpu.yaml")
    sizes = [128 * 1024, 512 * 1024, 2048 * 1024]
    runs = []
    with Lab(fabric, workdir / "predict") as lab:
        for algorithm in ("ring", "hierarchical"):
            r = run_experiment(lab, experiment(sizes, algorithm), workdir / "predict" / algorithm)
            runs += r.runs
    held_out = [r for r in runs if r["size_bytes"] == sizes[-1]]
    cal = planner.calibrate_from_run(fabric, [r for r in runs if r["size_bytes"] != sizes[-1]])
    rows = []
    for r in held_out:
        model = planner.fabric_model(fabric, r["algorithm"], r["size_bytes"])
        predicted = cal["alpha_s"] * model["steps"] + cal["kappa"] * model["bandwidth_s"]
        rows.append({"algorithm": r["algorithm"], "size_bytes": r["size_bytes"],
                     "predicted_s": predicted, "measured_s": r["time_s"],
                     "measured_over_predicted": r["time_s"] / predicted,
                     "uncalibrated_s": model["bandwidth_s"]})
    out["predict"] = {"fabric": fabric.shape(), "alpha_s": cal["alpha_s"], "kappa": cal["kappa"],
                      "calibrated_on": sorted({p["size_bytes"] for p in cal["points"]}),
                      "rows": rows}
    print(f"\n5. planner prediction vs emulation, {fabric.shape()}: calibrated on "
          f"{', '.join(str(s) for s in sizes[:-1])} B (alpha {cal['alpha_s'] * 1e3:.2f} ms, "
          f"bandwidth x{cal['kappa']:.2f}); held-out size {sizes[-1]} B:")
    for row in rows:
        print(f"   {row['algorithm']:<13} predicted {row['predicted_s']:6.2f} s, measured "
              f"{row['measured_s']:6.2f} s, measured/predicted {row['measured_over_predicted']:.2f}"
              f" (links alone: {row['uncalibrated_s']:.2f} s)")


# run_topology.py in this child, which reports its own peak resident memory as it ends
_MEASURED = ("import resource, runpy, sys\nsys.argv = sys.argv[1:]\ntry:\n"
             "    runpy.run_path(sys.argv[0], run_name='__main__')\nfinally:\n"
             "    print('peak-kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
             "file=sys.stderr)\n")


def simulated_run(fabric: Path, results: Path, *flags: str) -> dict:
    """`run_topology.py FABRIC --engine sim [FLAGS]` in a child of its own:
    wall time, its peak resident memory, how it simulated."""
    cmd = [sys.executable, "-c", _MEASURED, str(REPO / "run_topology.py"), str(fabric),
           "--engine", "sim", "--results", str(results), *flags]
    t0 = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "FABRIC_LAB_NO_REEXEC": "1"})
    wall = time.monotonic() - t0
    peak = re.search(r"peak-kb (\d+)", done.stderr)
    method = re.search(r"max-min fair sharing, ([^;]+);", done.stdout)
    return {"fabric": fabric.name, "exit": done.returncode, "wall_s": round(wall, 1),
            "peak_mb": round(int(peak.group(1)) / 1024) if peak else None,
            "method": method.group(1) if method else None,
            "shape": done.stdout.splitlines()[0] if done.stdout else done.stderr.strip()}


def part_simulate(workdir, out):
    rows = []
    print("\n6. run_topology.py FABRIC --engine sim: ring AllReduce 32 KiB to 2 MiB (4 sizes)")
    print(f"   {'fabric':<22} {'GPUs':>6}  {'wall s':>7}  {'peak MB':>8}  method")
    for name in SIMULATED:
        row = simulated_run(TOPOLOGIES / "sim" / name, workdir / "simulate")
        row["gpus"] = int(re.search(r"= (\d+) GPUs", row["shape"]).group(1)) \
            if "GPUs" in row["shape"] else None
        rows.append(row)
        print(f"   {name:<22} {row['gpus'] or 0:>6}  {row['wall_s']:7.1f}  {row['peak_mb']:8,}  "
              f"{row['method']}{'' if row['exit'] == 0 else ' (exit ' + str(row['exit']) + ')'}")
    out["simulate"] = rows


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"comma-separated parts to run (default all: {','.join(PARTS)})")
    p.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = p.parse_args(argv)
    parts = args.parts.split(",")
    unknown = [x for x in parts if x not in PARTS]
    if unknown:
        print(f"error: --parts: unknown part {unknown[0]!r}; expected some of "
              f"{', '.join(PARTS)}", file=sys.stderr)
        return 2
    workdir = REPO / "results" / f"bench-scale-{time.strftime('%Y%m%d-%H%M%S')}"
    workdir.mkdir(parents=True, exist_ok=True)
    out = {}
    for part in PARTS:
        if part in parts:
            globals()[f"part_{part}"](workdir, out)
    (workdir / "bench.json").write_text(json.dumps(out, indent=1, default=str))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
    print(f"\nresults in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
