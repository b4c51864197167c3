#!/usr/bin/env python3
"""Collectives benchmark: how close the emulated fabric gets to its links, and
what routing and flow entropy do to a collective, side by side in one run.

    sudo scripts/lab bench collectives            # or: .venv/bin/python -m bench.collectives_bench
    sudo .venv/bin/python -m bench.collectives_bench --rate 20 --json out.json

1. Ring AllReduce on the default non-blocking 2x2 fabric (4 ranks), large
   messages: busbw / link rate (the target is 0.9; TCP/IP headers cap it at
   0.99 with 9000-byte frames), measured / alpha-beta predicted time, and p99
   latency of probes under the AllReduce load against the idle fabric.
2. The same ring AllReduce with `ecmp` and with `single-path`, on a fabric
   where routing matters: 2 spines, 2 leaves, 4 servers per leaf, ranks placed
   alternately on the two leaves so that every ring hop crosses the spines
   (a topology-unaware placement). 4 connections per peer.
3. ECMP imbalance (max/mean of the leaves' uplink bytes) with 1, 4 and 16
   connections per peer, on 4 spines, same placement and collective.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness import REPO
from harness.commandline import command_line
from harness.fabrics import crossing_fabric, interleaved, with_rate
from topologies.fabric import load_fabric
from toolkit.validators import parse_size
from lab.lifecycle import Lab
from runs.experiment import Experiment
from runs.measured import run_experiment


def run(fabric, exp, workdir, tag):
    with Lab(fabric, workdir / tag) as lab:
        return run_experiment(lab, exp, workdir / tag)


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--rate", type=float, default=20, help="link rate, Mbit/s (default 20)")
    p.add_argument("--size", default="8M", help="AllReduce size for parts 1 and 2 (default 8M)")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    size = parse_size(args.size)
    workdir = REPO / "results" / f"bench-collectives-{time.strftime('%Y%m%d-%H%M%S')}"
    out = {}
    part_nonblocking(args, size, workdir, out)
    part_crossing(args, size, workdir, out)
    part_imbalance(args, size, workdir, out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def part_nonblocking(args, size, workdir, out) -> None:
    base = with_rate(load_fabric(), args.rate)
    r = run(base, Experiment(algorithm="ring", minbytes=size, maxbytes=size, iters=args.iters, idle_seconds=3),
            workdir, "nonblocking")
    x = r.runs[0]
    out["nonblocking"] = {"busbw_over_link": x["busbw_over_link"], "measured_over_predicted":
                          x["measured_over_predicted"], "time_s": x["time_s"],
                          "predicted_s": x["predicted_s"], "idle": r.idle_latency,
                          "loaded": x["latency"], "fidelity": r.fidelity, "wrong": x["wrong"],
                          "cpu_busy_pct": x["cpu_busy_pct"], "ovs_core_pct": x["ovs_core_pct"]}
    print(f"1. ring AllReduce {size} B, 4 ranks on {base.shape()}, {args.rate:g} Mbit/s, MTU {base.mtu}")
    print(f"   busbw / link rate          {x['busbw_over_link']:.3f}   (#wrong {x['wrong']})")
    print(f"   measured / predicted time  {x['measured_over_predicted']:.3f}   "
          f"({x['time_s']:.2f} s vs {x['predicted_s']:.2f} s; alpha {r.alpha_s * 1e6:.0f} us)")
    print(f"   probe p99 latency          {x['latency']['p99_us'] / 1e3:.1f} ms under load vs "
          f"{r.idle_latency['p99_us'] / 1e3:.2f} ms idle = "
          f"{x['latency']['p99_us'] / r.idle_latency['p99_us']:.0f}x "
          f"(p50 {x['latency']['p50_us'] / 1e3:.1f} vs {r.idle_latency['p50_us'] / 1e3:.2f} ms)")
    print(f"   host: CPU {x['cpu_busy_pct']:.0f}%, ovs-vswitchd {x['ovs_core_pct']:.0f}% of a core; "
          f"fidelity {'trustworthy' if r.fidelity['trustworthy'] else 'UNTRUSTWORTHY'}")


def part_crossing(args, size, workdir, out) -> None:
    cross = crossing_fabric(2, args.rate)
    ranks = interleaved(cross)
    times = {}
    for policy in ("ecmp", "single-path"):
        res = run(cross.with_policy(policy), Experiment(algorithm="ring", minbytes=size // 2, maxbytes=size // 2,
                                                         iters=args.iters, channels=4, ranks=ranks,
                                                         idle_seconds=0.5), workdir, policy)
        y = res.runs[0]
        times[policy] = y
        out[f"crossing_{policy}"] = {"time_s": y["time_s"], "busbw_over_link": y["busbw_over_link"],
                                     "ecmp_imbalance": y["ecmp_imbalance"], "wrong": y["wrong"],
                                     "trustworthy": res.fidelity["trustworthy"]}
    print(f"\n2. ring AllReduce {size // 2} B over {len(ranks)} ranks placed {' '.join(ranks)} "
          f"(every hop crosses the spines), 4 connections per peer")
    for policy, y in times.items():
        print(f"   {policy:<12} {y['time_s']:6.2f} s  busbw/link {y['busbw_over_link']:.2f}  "
              f"uplink max/mean {max(y['ecmp_imbalance'].values()):.2f}")
    ratio = times["single-path"]["time_s"] / times["ecmp"]["time_s"]
    out["single_path_over_ecmp_time"] = ratio
    print(f"   time single-path / ecmp    {ratio:.2f}")


def part_imbalance(args, size, workdir, out) -> None:
    wide = crossing_fabric(4, args.rate)
    print(f"\n3. ECMP imbalance on {wide.shape()}, same placement, ring AllReduce {size // 4} B")
    out["imbalance"] = {}
    for channels in (1, 4, 16):
        res = run(wide, Experiment(algorithm="ring", minbytes=size // 4, maxbytes=size // 4, iters=args.iters,
                                   channels=channels, ranks=interleaved(wide), idle_seconds=0.5),
                  workdir, f"channels{channels}")
        z = res.runs[0]
        imb = z["ecmp_imbalance"]
        out["imbalance"][channels] = {"per_leaf": imb, "busbw_over_link": z["busbw_over_link"],
                                      "time_s": z["time_s"]}
        print(f"   {channels:2d} connection(s) per peer: uplink max/mean "
              + "  ".join(f"{leaf} {v:.2f}" for leaf, v in sorted(imb.items()))
              + f"   busbw/link {z['busbw_over_link']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
