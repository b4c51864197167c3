#!/usr/bin/env python3
"""Routing policies side by side: ecmp, flowlet, spray, adaptive, single-path
and stp, in one run on one machine.

    sudo scripts/lab bench policies [--seconds 10 --repeat 3 --json out.json]

1. Aggregate of the fabric benchmark's 16 cross-leaf flows (4 spines x 8
   leaves x 4 servers, 5 Mbit/s; server k of leaf l sends to server k of leaf
   l+4): each flow a stream of 64 KiB pieces (programs/flows.py
   stream) for `--seconds`, over one connection, or under flowlet and spray
   over routing.entropy (16) the sender spreads its pieces over. The
   aggregate is what leaves 1-4 sent up to the spines from 2 s on (the
   adaptive controller places within about a second) to the end; the
   non-blocking ideal is 16 x 5 = 80 Mbit/s. `--repeat` runs per policy, each
   with new connections (new hash draws).
2. Ring AllReduce, 2 MiB, on the crossing placement (4 spines, 2 leaves x 4
   servers, ranks alternating between the leaves, so every hop crosses the
   spines), one connection per peer, 20 Mbit/s: busbw / link rate, the
   uplinks' max/mean, the pieces reordered, #wrong.
3. Failover (the failover benchmark's cases, harness/failover.py) under the controller's
   policies: a link failing for 1 s next to the probe's sender and one hop
   away, idle and under a ring AllReduce: traffic stopped, the slowdown of
   the iteration it fell in, #wrong. `--failover-repeat 0` leaves it out.
4. A silent failure (frames lost, carrier up) under ecmp, without BFD and
   with BFD every 10 and 100 ms (routing.bfd_ms), the same cases.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from harness import TOPOLOGIES
from harness.commandline import command_line
from harness.failover import idle_case, loaded_case, summary
from harness.fabrics import LEAF_SPINE_4X8, crossing_fabric, flow_pairs, interleaved, with_rate
from harness.traffic import flows_command, read_counter
from lab.lifecycle import Lab
from topologies.fabric import load_fabric
from runs.experiment import Experiment
from lab.counters import cpu_busy_pct, cpu_times, ovs_cpu_seconds
import policies
from runs.measured import run_experiment

POLICIES = ("ecmp", "flowlet", "spray", "adaptive", "single-path", "stp")
WARM_S = 2.0


def streams(lab, pairs, seconds: float) -> dict:
    """The 16 streams once; what leaves 1-4 sent up from WARM_S on."""
    f = lab.fabric
    k = policies.policy(f.policy).connections_per_peer(1, f.routing.entropy)
    sinks = [lab.popen(b, flows_command("sink", "--port", "5001", "--connections", str(k),
                                        "--timeout", str(seconds + 60)), text=True)
             for _, b in pairs]
    for s in sinks:
        assert json.loads(s.stdout.readline()) == {"listening": 5001}
    placed0 = placements(lab)
    started = time.monotonic()
    senders = [lab.popen(a, flows_command("stream", "--dst", f.endpoint(b).ip, "--seconds",
                                          str(seconds), "--policy", f.policy,
                                          "--entropy", str(f.routing.entropy)), text=True)
               for a, b in pairs]
    sending = sorted({f.endpoint(a).leaf for a, _ in pairs})
    uplinks = {l.a_intf: leaf for leaf in sending for l in f.uplinks(leaf)}
    reaction = None          # adaptive: until the controller had placed every stream
    while time.monotonic() - started < WARM_S:
        if reaction is None and placed0 is not None and \
                placements(lab) - placed0 >= len(pairs):
            reaction = time.monotonic() - started
        time.sleep(0.05)
    c0, o0, t0 = cpu_times(), ovs_cpu_seconds(), time.monotonic()
    before = {i: read_counter(i) for i in uplinks}
    time.sleep(seconds - WARM_S - 0.3)
    after = {i: read_counter(i) for i in uplinks}
    window = time.monotonic() - t0
    cpu, ovs = cpu_busy_pct(c0, cpu_times()), (ovs_cpu_seconds() - o0) / window * 100
    for p in senders + sinks:
        out, err = p.communicate(timeout=seconds + 90)
        assert p.returncode == 0, err[-2000:]
    mbit = {i: (after[i] - before[i]) * 8 / window / 1e6 for i in uplinks}
    rate = f.link_classes["leaf_spine"].rate_mbit
    return {"aggregate_mbit": sum(mbit.values()),
            "busiest_share": max(mbit.values()) / rate,
            "uplinks_used": [sum(1 for i, v in mbit.items() if uplinks[i] == leaf and v > 0.1 * rate)
                             for leaf in sending],
            "cpu_pct": cpu, "ovs_core_pct": ovs, "placed_after_s": reaction}


def placements(lab):
    """Adaptive: placements the controller made so far (None: not adaptive)."""
    if not policies.policy(lab.fabric.policy).moves_elephants:
        return None
    return (lab.controller_status().get("adaptive") or {}).get("placements")


def part_aggregate(args, work: Path, out: dict) -> None:
    base = with_rate(load_fabric(LEAF_SPINE_4X8), args.rate)
    pairs = flow_pairs(base)
    ideal = len(pairs) * args.rate
    print(f"1. aggregate of {len(pairs)} cross-leaf streams on {base.shape()}, "
          f"{args.rate:g} Mbit/s links (ideal {ideal:g} Mbit/s), {args.seconds:g} s each, "
          f"x{args.repeat}")
    print(f"   {'policy':<12} {'Mbit/s (each run)':<24} {'median':>7} {'of ideal':>9} "
          f"{'busiest':>8}  {'uplinks used per leaf':<24} CPU / ovs")
    res = out["aggregate"] = {}
    for policy in POLICIES:
        with Lab(base.with_policy(policy), work / f"agg-{policy}") as lab:
            runs = [streams(lab, pairs, args.seconds) for _ in range(args.repeat)]
        agg = [r["aggregate_mbit"] for r in runs]
        res[policy] = {"runs": runs, "median_mbit": statistics.median(agg)}
        print(f"   {policy:<12} {', '.join(f'{x:.1f}' for x in agg):<24} "
              f"{statistics.median(agg):7.1f} {statistics.median(agg) / ideal:9.2f} "
              f"{max(r['busiest_share'] for r in runs):8.0%}  "
              f"{' | '.join(','.join(map(str, r['uplinks_used'])) for r in runs):<24} "
              f"{statistics.median(r['cpu_pct'] for r in runs):.0f}% / "
              f"{statistics.median(r['ovs_core_pct'] for r in runs):.0f}%")
    after = [r["placed_after_s"] for r in res["adaptive"]["runs"]]
    print("   adaptive: every stream placed after " + ", ".join(
        "not within %g s" % WARM_S if a is None else f"{a:.2f} s" for a in after))
    stp = res["stp"]["median_mbit"]
    for policy in POLICIES[:-1]:
        res[policy]["over_stp"] = res[policy]["median_mbit"] / stp
    print("   over stp: " + ", ".join(f"{p} {res[p]['over_stp']:.2f}x" for p in POLICIES[:-1]))


def part_ring(args, work: Path, out: dict) -> None:
    cross = crossing_fabric(4, 20)
    ranks = interleaved(cross)
    print(f"\n2. ring AllReduce 2 MiB, {len(ranks)} ranks alternating leaves on {cross.shape()}, "
          "20 Mbit/s, 1 connection per peer")
    res = out["ring"] = {}
    for policy in POLICIES:
        with Lab(cross.with_policy(policy), work / f"ring-{policy}") as lab:
            r = run_experiment(lab, Experiment(algorithm="ring", minbytes=2 << 20, maxbytes=2 << 20, iters=3,
                                               ranks=ranks, idle_seconds=0.5),
                               work / f"ring-{policy}")
        x = r.runs[0]
        res[policy] = {k: x.get(k) for k in ("time_s", "busbw_over_link", "ecmp_imbalance",
                                             "wrong", "reordered", "pieces", "cpu_busy_pct")}
        res[policy]["trustworthy"] = r.fidelity["trustworthy"]
        print(f"   {policy:<12} {x['time_s']:5.2f} s  busbw/link {x['busbw_over_link']:.2f}  "
              f"uplink max/mean {max(x['ecmp_imbalance'].values()):.2f}  reordered "
              f"{x.get('reordered', 0)}/{x.get('pieces', 0)}  #wrong {x['wrong']}  CPU "
              f"{x['cpu_busy_pct']:.0f}%  {'' if r.fidelity['trustworthy'] else 'UNTRUSTWORTHY'}")


LINKS = {"local": "leaf1-spine1", "remote": "spine1-leaf2"}


def failover_cases(args, fabric, work: Path, res: dict, label: str, kind: str = "down") -> None:
    """A link next to the probe's sender and one hop away failing for 1 s,
    idle and under a ring AllReduce, on one lab of `fabric`."""
    with Lab(fabric, work / label.replace(" ", "-")) as lab:
        for where, link in LINKS.items():
            for load in ("idle", "AllReduce"):
                events = [idle_case(lab, link, kind) if load == "idle" else
                          loaded_case(lab, link, work / f"{label}-{where}-{k}".replace(" ", "-"),
                                      kind)
                          for k in range(args.failover_repeat)]
                s = res[f"{label} {where} {load}"] = summary(events)
                print(f"   {label:<10} {where:<7} {load:<10} stopped "
                      f"{', '.join(f'{x:g}' for x in s['stopped_ms'])} ms  slowdown "
                      f"{', '.join(f'{x:.2f}' for x in s['slowdown']) or '-'}  #wrong "
                      f"{', '.join(map(str, s['wrong'])) or '-'}")


def part_failover(args, work: Path, out: dict) -> None:
    base = load_fabric(TOPOLOGIES / "default.yaml")
    print(f"\n3. failover, a link down for 1 s, 8 probe flows h1 -> h3, x{args.failover_repeat}")
    res = out["failover"] = {}
    for policy in ("ecmp", "flowlet", "spray", "adaptive"):
        failover_cases(args, base.with_policy(policy), work, res, policy)


def part_silent(args, work: Path, out: dict) -> None:
    """A silent failure (frames lost, carrier up) under ecmp, without BFD
    and with it at 10 ms and at 100 ms."""
    base = load_fabric(TOPOLOGIES / "default.yaml")
    print(f"\n4. silent failure (frames lost, carrier up) for 1 s, ecmp, 8 probe flows h1 -> h3, "
          f"x{args.failover_repeat}")
    res = out["silent"] = {}
    for bfd in (0, 10, 100):
        fabric = base.edited(lambda spec: spec["routing"].update(bfd_ms=bfd))
        failover_cases(args, fabric, work, res, f"BFD {bfd or 'off'}", "silent")


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--rate", type=float, default=5, help="part 1's link rate (Mbit/s)")
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--failover-repeat", type=int, default=1)
    p.add_argument("--parts", default="1,2,3,4")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    work = Path(f"/tmp/policies-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    out: dict = {}
    parts = args.parts.split(",")
    if "1" in parts:
        part_aggregate(args, work, out)
    if "2" in parts:
        part_ring(args, work, out)
    if "3" in parts and args.failover_repeat:
        part_failover(args, work, out)
    if "4" in parts and args.failover_repeat:
        part_silent(args, work, out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
