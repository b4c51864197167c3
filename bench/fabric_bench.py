#!/usr/bin/env python3
"""Fabric benchmark: life-cycle times and ECMP versus its baselines, side by side.

    sudo scripts/lab bench                    # 4 spines x 8 leaves x 4 servers, 5 Mbit/s
    sudo scripts/lab bench --rate 10 --seconds 10 --repeat 5 --json bench.json

1. Life cycle of the 4x8x4 fabric (32 servers, 12 switches), `--cycles` times:
   build (controller, Mininet, shaping), ready (every switch programmed), time
   to full reachability (all 992 pairs answered), teardown.
2. Aggregate TCP throughput of 16 cross-leaf flows: the 4 servers of each of
   leaves 1-4 send one iperf3 flow each to the server at the same position on
   leaf l+4, for `--seconds`, `--repeat` times (new source ports each time, so
   new hash draws), under ecmp, single-path and stp (plain Mininet's L2
   answer: OVS standalone with spanning tree). The fabric is non-blocking, so
   perfect spreading gives 16 x rate; single-path and STP put each leaf's
   traffic on one uplink, 4 x rate. Host CPU use is sampled over each window.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from harness import REPO
from harness.commandline import command_line
from harness.fabrics import LEAF_SPINE_4X8, flow_pairs, with_rate
from topologies.fabric import load_fabric
from lab.lifecycle import Lab
from lab.reachability import all_pairs_reachability
from lab.counters import cpu_busy_pct, cpu_times, ovs_cpu_seconds
from traffic.measure.iperf3_check import iperf3_check

def lifecycle(fabric, cycles, workdir):
    rows = []
    for i in range(cycles):
        t0 = time.monotonic()
        lab = Lab(fabric, workdir / f"cycle{i}")
        with lab:
            ready = time.monotonic() - t0
            reach = all_pairs_reachability(lab)
            reached = time.monotonic() - t0
            assert reach.complete, reach.failures
        rows.append({"build_s": lab.timings["build_s"], "ready_s": ready,
                     "full_reachability_s": reached, "teardown_s": lab.timings["teardown_s"],
                     "pairs": reach.total})
    return rows


def throughput(fabric, policy, seconds, repeat, workdir):
    fabric = fabric.with_policy(policy)
    pairs = flow_pairs(fabric)
    runs = []
    with Lab(fabric, workdir / policy) as lab:
        ready = lab.timings["start_s"]
        for _ in range(repeat):
            c0, o0, t0 = cpu_times(), ovs_cpu_seconds(), time.monotonic()
            result = iperf3_check(lab, pairs, seconds=seconds, streams=1)
            busy = cpu_busy_pct(c0, cpu_times())
            ovs = 100 * (ovs_cpu_seconds() - o0) / (time.monotonic() - t0)
            senders = [leaf.name for leaf in fabric.leaves][: len(fabric.leaves) // 2]
            up = [list(result["uplink_tx_bytes"][leaf].values()) for leaf in senders]
            used = [sum(1 for v in u if v > 0.05 * max(u)) for u in up]
            # the busiest uplink of each sending leaf, as a share of its rate over
            # the iperf3 window: near 100% means the host kept the bottleneck full
            rate_bps = fabric.link_classes["leaf_spine"].rate_mbit * 1e6
            busiest = statistics.mean(max(u) * 8 / (rate_bps * seconds) for u in up)
            for flow in result["pairs"]:
                if "error" in flow:
                    print(f"  ({policy}: {flow['src']} -> {flow['dst']}: {flow['error']})")
            runs.append({"total_mbit_s": result["total_mbit_s"], "cpu_busy_pct": busy,
                         "ovs_vswitchd_core_pct": ovs, "busiest_uplink_util": busiest,
                         "retransmits": sum(p["retransmits"] for p in result["pairs"]),
                         "uplinks_used_per_sending_leaf": used,
                         "errors": [p["error"] for p in result["pairs"] if "error" in p]})
    return {"policy": policy, "ready_s": ready, "runs": runs,
            "mean_mbit_s": statistics.mean(r["total_mbit_s"] for r in runs),
            "mean_cpu_busy_pct": statistics.mean(r["cpu_busy_pct"] for r in runs),
            "mean_ovs_core_pct": statistics.mean(r["ovs_vswitchd_core_pct"] for r in runs),
            "mean_busiest_uplink_util": statistics.mean(r["busiest_uplink_util"] for r in runs)}


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--rate", type=float, default=5,
                   help="every link's rate, Mbit/s (default 5: the rate at which this project's "
                        "2-core host keeps every bottleneck full)")
    p.add_argument("--seconds", type=float, default=10, help="length of each iperf3 run")
    p.add_argument("--repeat", type=int, default=5, help="iperf3 runs per policy")
    p.add_argument("--cycles", type=int, default=3, help="build/reach/teardown cycles")
    p.add_argument("--policies", default="ecmp,single-path,stp")
    p.add_argument("--json", type=Path, help="also write every figure here")
    args = p.parse_args(argv)

    fabric = with_rate(load_fabric(LEAF_SPINE_4X8), args.rate)
    workdir = REPO / "results" / f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"fabric: {fabric.shape()}, every link {args.rate:g} Mbit/s; host: "
          f"{len(os.sched_getaffinity(0))} cores")

    cycles = lifecycle(fabric, args.cycles, workdir)
    print(f"\nlife cycle, {args.cycles} runs (median; min-max)")
    for key, label in (("build_s", "build (controller, network, shaping)"),
                       ("ready_s", "ready (every switch programmed)"),
                       ("full_reachability_s", f"full reachability ({cycles[0]['pairs']} pairs)"),
                       ("teardown_s", "teardown")):
        vals = [c[key] for c in cycles]
        print(f"  {label:<42} {statistics.median(vals):6.2f} s  ({min(vals):.2f}-{max(vals):.2f})")

    ideal = 16 * args.rate
    results = [throughput(fabric, pol, args.seconds, args.repeat, workdir)
               for pol in args.policies.split(",")]
    print(f"\n16 cross-leaf TCP flows, {args.seconds:g} s x {args.repeat} runs; "
          f"non-blocking ideal {ideal:g} Mbit/s")
    print(f"  {'policy':<12} {'Mbit/s':>8} {'of ideal':>9} {'busiest':>8} {'host CPU':>9} "
          f"{'OVS core':>9} {'ready':>7}  uplinks used per sending leaf, each run")
    for r in results:
        used = "  ".join("/".join(map(str, run["uplinks_used_per_sending_leaf"])) for run in r["runs"])
        print(f"  {r['policy']:<12} {r['mean_mbit_s']:8.1f} {r['mean_mbit_s'] / ideal:9.0%} "
              f"{r['mean_busiest_uplink_util']:8.0%} {r['mean_cpu_busy_pct']:8.0f}% "
              f"{r['mean_ovs_core_pct']:8.0f}% {r['ready_s']:6.1f}s  {used}")
    print("  busiest: the fullest uplink of each sending leaf, share of its rate (near 100%:\n"
          "  the host kept the bottleneck full); host CPU: both cores; OVS core: ovs-vswitchd,\n"
          "  whose one thread forwards every packet in the userspace datapath")
    by = {r["policy"]: r["mean_mbit_s"] for r in results}
    if "ecmp" in by:
        for other in ("single-path", "stp"):
            if by.get(other):
                print(f"  ratio ecmp / {other}: {by['ecmp'] / by[other]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"rate_mbit": args.rate, "lifecycle": cycles,
                                         "throughput": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
