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
   rate that passed. --rates sets the NIC rates (Mbit/s), --scale-up the
   layouts, and --datapaths how each lab's own ovs-vswitchd starts
   (lab/datapath.py's variants; several run side by side, interleaved rate
   by rate, each stopping at its own first failure):

    sudo .venv/bin/python -m bench.ranks_bench --parts ceiling --scale-up memory \\
        --rates 2,4,8 --datapaths af_packet-mlockall,af_packet-keepheap
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from harness import REPO, TOPOLOGIES
from harness.commandline import command_line
from harness.traffic import process_cpu_seconds
from topologies.fabric import load_fabric
from lab import datapath
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
# the variants a Lab can start its ovs-vswitchd with: the daemon's settings
# only (a Lab gives its ports no settings of a variant's and keeps the MTU)
DAEMON_VARIANTS = tuple(name for name, v in datapath.VARIANTS.items()
                        if not v["port"] and "mtu" not in v)


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
          f"(NIC {fabric.nic_rate_mbit:g} Mbit/s)")
    print(f"   {'layout':<40} {'procs':>5} {'ready':>7} {'setup':>7} {'RSS':>8} {'agent CPU':>9} "
          f"{'64 KiB':>8} {'host CPU':>8} {'#wrong':>6}")
    for name, r in rows.items():
        print(f"   {name:<40} {r['processes']:>5} {r['ready_s']:>6.1f}s {r['setup_s']:>6.1f}s "
              f"{r['agents_rss_mb']:>6} MB {r['agents_cpu_s']:>8.1f}s {r['allreduce_64k_s']:>7.2f}s "
              f"{r['host_cpu_pct']:>7}% {r['wrong']:>6}")


def rate_verdict(workdir: Path, fabric, scale_up: str, size: int,
                 variant: Optional[str] = None) -> dict:
    exp = Experiment(algorithm="hierarchical", minbytes=size, maxbytes=size, iters=1, warmup=0,
                     idle_seconds=1.0, scale_up=scale_up)
    with Lab(fabric, workdir, ovs_variant=variant) as lab:
        r = run_experiment(lab, exp, workdir)
    run, verdict = r.runs[0], r.fidelity
    ratio = run.get("measured_over_simulated")
    ok = (verdict["trustworthy"] and not verdict.get("host_bound") and not run["flags"]
          and ratio is not None and abs(ratio - 1) <= MATCH and run["wrong"] == 0)
    return {"nic_mbit": fabric.nic_rate_mbit, "passed": ok,
            "time_s": round(run["time_s"], 2), "measured_over_simulated": ratio and round(ratio, 3),
            "trustworthy": verdict["trustworthy"], "host_bound": bool(verdict.get("host_bound")),
            "flags": run["flags"], "cpu_pct": round(run["cpu_busy_pct"]),
            "ovs_core_pct": round(run["ovs_core_pct"]), "wrong": run["wrong"]}


def parse_choices(text: str, allowed, option: str) -> List[str]:
    """A comma-separated list of names, each one of `allowed` (ValueError, one
    sentence, otherwise)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in names if x not in allowed]
    if bad or not names:
        raise ValueError(f"{option}: {', '.join(bad) or 'nothing given'}: expected some of "
                         f"{', '.join(allowed)}")
    return names


def default_rates() -> List[float]:
    nic = load_fabric(SUPERPOD).nic_rate_mbit
    return [nic * f for f in FACTORS]


def parse_rates(text: str) -> List[float]:
    """NIC rates in Mbit/s, comma-separated, each above 0, in rising order."""
    try:
        rates = sorted(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--rates: {text!r}: expected numbers of Mbit/s, e.g. 2,4,8") from None
    if not rates or rates[0] <= 0:
        raise ValueError(f"--rates: {text!r}: expected rates above 0 Mbit/s")
    return rates


def verdict_word(row: dict) -> str:
    if row["host_bound"]:
        return "HOST-BOUND"
    return "trustworthy" if row["trustworthy"] else "NOT trustworthy"


def ceiling_table(rows: List[dict]) -> List[str]:
    """The rate sweep as one table: a line per (NVLink, NIC rate, datapath)
    tried, in the order they ran."""
    lines = [f"   {'NVLink':<8} {'NIC':>9} {'datapath':<20} {'time':>8} {'meas/sim':>8} "
             f"{'verdict':<15} {'flags':<21} {'CPU':>4} {'ovs':>4} {'#wrong':>6}  result"]
    for r in rows:
        ratio = r["measured_over_simulated"]
        lines.append(
            f"   {r['scale_up']:<8} {r['nic_mbit']:>4g} Mbit {r['datapath']:<20} "
            f"{r['time_s']:>6.2f} s {'-' if ratio is None else f'{ratio:.2f}':>8} "
            f"{verdict_word(r):<15} {','.join(r['flags']) or '-':<21} {r['cpu_pct']:>3}% "
            f"{r['ovs_core_pct']:>3}% {r['wrong']:>6}  {'pass' if r['passed'] else 'FAIL'}")
    return lines


def ceilings(rows: List[dict]) -> Dict[tuple, float]:
    """(NVLink, datapath) -> the highest NIC rate that passed below its first
    failure (0: none passed)."""
    best: Dict[tuple, float] = {}
    failed = set()
    for r in sorted(rows, key=lambda r: r["nic_mbit"]):
        key = (r["scale_up"], r["datapath"])
        best.setdefault(key, 0)
        if key in failed:
            continue
        if r["passed"]:
            best[key] = r["nic_mbit"]
        else:
            failed.add(key)
    return best


def part_ceiling(workdir: Path, out: dict, size: int, rates: List[float],
                 scale_ups: List[str], variants: List[str]) -> None:
    """Each NVLink layout at each rate, the datapaths side by side at each
    rate (interleaved); a (layout, datapath) stops at its first failure."""
    base = load_fabric(SUPERPOD)
    print(f"\n2. the rates at which the unit's hierarchical AllReduce of {size >> 20} MiB per "
          f"rank is a figure to trust (verdict, and measured/simulated within 1 +- {MATCH})")
    rows: List[dict] = []
    for scale_up in scale_ups:
        going = list(variants)
        for rate in rates:
            for variant in list(going):
                row = {"scale_up": scale_up, "datapath": variant,
                       **rate_verdict(workdir / f"{scale_up}-{variant}-{rate:g}mbit",
                                      at_rate(base, rate), scale_up, size, variant)}
                rows.append(row)
                print(ceiling_table([row])[1], flush=True)
                if not row["passed"]:
                    going.remove(variant)
    print("\n" + "\n".join(ceiling_table(rows)))
    best = ceilings(rows)
    for (scale_up, variant), rate in best.items():
        print(f"   NVLink {scale_up}, {variant}: ceiling "
              + (f"{rate:g} Mbit/s per NIC" if rate else "below the lowest rate tried"))
    out["ceiling"] = {"rows": rows, "ceilings": [
        {"scale_up": s, "datapath": v, "nic_mbit": r} for (s, v), r in best.items()]}


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--size", type=int, default=16 << 20,
                   help="bytes per rank (default 16 MiB: the smallest the shaping resolves "
                        "with the unit's 9000-byte frames)")
    p.add_argument("--rates", help="ceiling: NIC rates in Mbit/s, every link class scaled "
                   "alike (default: the YAML's rates times 0.5, 1, 2, 4)")
    p.add_argument("--scale-up", default="packets,memory", help="ceiling: NVLink as packets, "
                   "in memory, or both")
    p.add_argument("--datapaths", default=datapath.ADOPTED,
                   help="ceiling: how each lab's ovs-vswitchd starts, lab/datapath.py's variants "
                        f"(e.g. {datapath.BEFORE},{datapath.ADOPTED}: before and after, "
                        "interleaved rate by rate)")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    try:
        parts = parse_choices(args.parts, PARTS, "--parts")
        rates = parse_rates(args.rates) if args.rates else default_rates()
        scale_ups = parse_choices(args.scale_up, ("packets", "memory"), "--scale-up")
        variants = parse_choices(args.datapaths, DAEMON_VARIANTS, "--datapaths")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    workdir = REPO / "results" / f"bench-ranks-{time.strftime('%Y%m%d-%H%M%S')}"
    workdir.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    if "cost" in parts:
        part_cost(workdir, out)
    if "ceiling" in parts:
        part_ceiling(workdir, out, args.size, rates, scale_ups, variants)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
