#!/usr/bin/env python3
"""More ranks per host: what the rank agents cost on the SuperPOD unit (256
GPUs), laid out three ways, and the highest link rates at which the unit's
hierarchical AllReduce is still a figure to trust.

    sudo scripts/lab bench ranks [--parts cost,ceiling] [--json out.json]

1. cost: one lab of topologies/superpod-su.yaml at its own rates; on it, one
   after another, the agents as a process per rank (how they ran before), a
   process per server with NVLink as packets, and a process per server with
   NVLink in memory (--scale-up memory). Per layout: seconds until every
   agent is ready, seconds to set up a size (schedules, connections), the
   agents' resident memory (sum of VmRSS) and CPU seconds, the host's CPU
   during a timed 64 KiB AllReduce, and #wrong.
2. ceiling: the unit's link rates scaled by 0.5, 1, 2, 4 (every class alike,
   as --calibrate does; 1 is the YAML's 1 Mbit/s per NIC, 4x what the unit
   ran at before it could hand NVLink over in memory), a hierarchical
   AllReduce of --size per rank, one timed iteration (connections are made
   before the clock starts), with NVLink as packets and in memory. A
   rate passes when the verdict trusts it (links at their rates, not
   host-bound, the size not flagged) and measured/simulated is within 1 ±
   MATCH; a layout stops at its first failure. The ceiling is the highest
   rate that passed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness import REPO, TOPOLOGIES
from harness.commandline import command_line
from harness.traffic import process_cpu_seconds
from topologies.fabric import load_fabric
from lab.lifecycle import Lab
from traffic.engines import Job
from traffic.engines.agents import RankAgents
from runs.experiment import Experiment
from lab.counters import cpu_busy_pct, cpu_times
from runs.rate_calibration import at_rate
from runs.measured import run_experiment

SUPERPOD = TOPOLOGIES / "superpod-su.yaml"
PARTS = ("cost", "ceiling")
LAYOUTS = {"process per rank, NVLink as packets": (True, "packets"),
           "process per server, NVLink as packets": (False, "packets"),
           "process per server, NVLink in memory": (False, "memory")}
FACTORS = (0.5, 1, 2, 4)       # of the YAML's rates (4x the unit's rates before this bench)
MATCH = 0.25


def agent_usage(procs) -> tuple:
    """(resident MB, CPU seconds) of the agent processes, from /proc."""
    rss, cpu = 0, 0.0
    for proc in procs:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            continue
        rss += int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmRSS")))
        cpu += process_cpu_seconds(proc.pid)
    return rss / 1024, cpu


def one_layout(lab, fabric, per_rank: bool, scale_up: str) -> dict:
    ranks = [e.name for e in fabric.endpoints]
    t0 = time.monotonic()
    engine = RankAgents(fabric, ranks, lab, per_rank=per_rank)
    try:
        ready = time.monotonic() - t0
        t0 = time.monotonic()
        engine.prepare(Job("allreduce", "hierarchical", 16384, local=fabric.gpus_per_server,
                           scale_up=scale_up))
        setup = time.monotonic() - t0
        engine.iterate(0, timeout=600)                      # warm-up
        before = cpu_times()
        run = engine.iterate(1, timeout=600)
        cpu = cpu_busy_pct(before, cpu_times())
        rss, cpu_s = agent_usage(engine.procs)
    finally:
        engine.close()
    return {"processes": len(engine.procs), "ready_s": round(ready, 2),
            "setup_s": round(setup, 2), "agents_rss_mb": round(rss), "agents_cpu_s": round(cpu_s, 1),
            "allreduce_64k_s": round(run["seconds"], 3), "host_cpu_pct": round(cpu),
            "wrong": run["wrong"]}


def part_cost(workdir: Path, out: dict) -> None:
    fabric = load_fabric(SUPERPOD)
    rows = {}
    with Lab(fabric, workdir / "cost") as lab:
        for name, (per_rank, scale_up) in LAYOUTS.items():
            rows[name] = one_layout(lab, fabric, per_rank, scale_up)
    out["cost"] = rows
    print(f"\n1. what the agents cost on {fabric.shape()}, at its own rates "
          f"(NIC {fabric.spec['links']['server_leaf']['rate_mbit']:g} Mbit/s)")
    print(f"   {'layout':<40} {'procs':>5} {'ready':>7} {'setup':>7} {'RSS':>8} {'agent CPU':>9} "
          f"{'64 KiB':>8} {'host CPU':>8} {'#wrong':>6}")
    for name, r in rows.items():
        print(f"   {name:<40} {r['processes']:>5} {r['ready_s']:>6.1f}s {r['setup_s']:>6.1f}s "
              f"{r['agents_rss_mb']:>6} MB {r['agents_cpu_s']:>8.1f}s {r['allreduce_64k_s']:>7.2f}s "
              f"{r['host_cpu_pct']:>7}% {r['wrong']:>6}")


def rate_verdict(workdir: Path, fabric, scale_up: str, size: int) -> dict:
    exp = Experiment(algorithm="hierarchical", minbytes=size, maxbytes=size, iters=1, warmup=0,
                     idle_seconds=1.0, scale_up=scale_up)
    with Lab(fabric, workdir) as lab:
        r = run_experiment(lab, exp, workdir)
    run, verdict = r.runs[0], r.fidelity
    ratio = run.get("measured_over_simulated")
    ok = (verdict["trustworthy"] and not verdict.get("host_bound") and not run["flags"]
          and ratio is not None and abs(ratio - 1) <= MATCH and run["wrong"] == 0)
    return {"nic_mbit": fabric.spec["links"]["server_leaf"]["rate_mbit"], "passed": ok,
            "time_s": round(run["time_s"], 2), "measured_over_simulated": ratio and round(ratio, 3),
            "trustworthy": verdict["trustworthy"], "host_bound": bool(verdict.get("host_bound")),
            "flags": run["flags"], "cpu_pct": round(run["cpu_busy_pct"]),
            "ovs_core_pct": round(run["ovs_core_pct"]), "wrong": run["wrong"]}


def part_ceiling(workdir: Path, out: dict, size: int) -> None:
    base = load_fabric(SUPERPOD)
    nic = base.spec["links"]["server_leaf"]["rate_mbit"]
    out["ceiling"] = {}
    print(f"\n2. the rates at which the unit's hierarchical AllReduce of {size >> 20} MiB per "
          f"rank is a figure to trust (verdict, and measured/simulated within 1 +- {MATCH})")
    for scale_up in ("packets", "memory"):
        rows, best = [], 0
        for factor in FACTORS:
            row = rate_verdict(workdir / f"{scale_up}-x{factor}", at_rate(base, nic * factor),
                               scale_up, size)
            rows.append({"factor": factor, **row})
            print(f"   NVLink {scale_up:<8} x{factor:g} (NIC {row['nic_mbit']:g} Mbit/s): "
                  f"{'pass' if row['passed'] else 'FAIL'}  {row['time_s']:7.2f} s  meas/sim "
                  f"{row['measured_over_simulated']}  trustworthy {row['trustworthy']}  "
                  f"host-bound {row['host_bound']}  flags {','.join(row['flags']) or '-'}  "
                  f"CPU {row['cpu_pct']}%  ovs {row['ovs_core_pct']}%  #wrong {row['wrong']}")
            if not row["passed"]:
                break
            best = factor
        out["ceiling"][scale_up] = {"rows": rows, "ceiling_factor": best}
        print(f"   NVLink {scale_up}: ceiling "
              + (f"x{best:g} of the YAML's rates ({nic * best:g} Mbit/s per NIC)" if best
                 else "below the lowest rate tried"))


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--size", type=int, default=16 << 20,
                   help="bytes per rank (default 16 MiB: the smallest the shaping resolves "
                        "with the unit's 9000-byte frames)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    parts = args.parts.split(",")
    if any(x not in PARTS for x in parts):
        print(f"error: --parts: expected some of {', '.join(PARTS)}", file=sys.stderr)
        return 2
    workdir = REPO / "results" / f"bench-ranks-{time.strftime('%Y%m%d-%H%M%S')}"
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    if "cost" in parts:
        part_cost(workdir, out)
    if "ceiling" in parts:
        part_ceiling(workdir, out, args.size)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
