#!/usr/bin/env python3
"""How long traffic stops when a link between switches fails, and what the
collective loses: the default fabric's shape (2 spines, 2 leaves, 2 servers
per leaf, 20 Mbit/s), a link failing for 1 s, side by side in one run.

    sudo scripts/lab bench failover [--repeat 3] [--bfd 10] [--json out.json]

Cases: the routing policy (ecmp: the select group's watched buckets move
flows in the datapath; single-path: only the controller can), the failed
link local to the probe's sender (leaf1-spine) or one hop away (spine-leaf2),
and the fabric idle or under a ring AllReduce of 1 MiB (11 iterations); then
a silent failure (frames lost, carrier up) under ecmp with BFD every --bfd
ms (0: none). Per case and repetition, the probe flows' report
(traffic/measure/failures.py): flows hit of 8, the longest stop of one flow
(whole probe intervals, 8 ms at 20 Mbit/s) and of the path they shared (the
flows read together), packets lost; under the collective, the slowdown of
the iteration the failure fell in, and #wrong. The goals (issue 26): traffic
stopped under 10 ms for a clean failure, under 50 ms for a silent one with
BFD.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

from harness import TOPOLOGIES
from harness.commandline import command_line
from harness.failover import idle_case, loaded_case, summary
from lab.lifecycle import Lab
from topologies.fabric import load_fabric

# the probe's flows go h1 (leaf1) -> h3 (leaf2); single-path pins leaf2's
# servers to the second spine, so its cases fail that spine's links
LINKS = {("ecmp", "local"): "leaf1-spine1", ("ecmp", "remote"): "spine1-leaf2",
         ("single-path", "local"): "leaf1-spine2", ("single-path", "remote"): "spine2-leaf2"}


def main() -> int:
    parser = command_line(__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bfd", type=int, default=10, metavar="MS",
                        help="BFD interval of the silent-failure cases (0: skip them)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = load_fabric(TOPOLOGIES / "default.yaml")
    work = Path(f"/tmp/failover-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    out = {}
    print(f"{'policy':<12} {'link':<7} {'load':<10} {'stopped ms, a flow':<19} "
          f"{'the path (ms)':<22} {'hit of 8':<10} {'lost':<14} {'slowdown':<16} #wrong")
    cases = [(policy, "down", where, load) for policy in ("ecmp", "single-path")
             for where in ("local", "remote") for load in ("idle", "AllReduce")]
    if args.bfd:
        cases += [("ecmp", "silent", where, load) for where in ("local", "remote")
                  for load in ("idle", "AllReduce")]
    for (policy, kind), group in itertools.groupby(cases, key=lambda c: c[:2]):
        fabric = base.with_policy(policy)
        if kind == "silent":
            fabric = fabric.edited(lambda spec: spec["routing"].update(bfd_ms=args.bfd))
        name = policy if kind == "down" else f"{policy}, silent, BFD {args.bfd} ms"
        with Lab(fabric, work / f"{policy}-{kind}") as lab:
            for _policy, _kind, where, load in group:
                link = LINKS[(policy, where)]
                events = [idle_case(lab, link, kind) if load == "idle" else
                          loaded_case(lab, link, work / f"{policy}-{kind}-{where}-{k}", kind)
                          for k in range(args.repeat)]
                s = out[f"{name} {where} {load}"] = {"link": link, **summary(events)}
                print(f"{name if kind == 'down' else policy + ' BFD':<12} {where:<7} {load:<10} "
                      f"{', '.join(f'{x:g}' for x in s['stopped_ms']):<19} "
                      f"{', '.join('-' if x is None else f'{x:g}' for x in s['path_stopped_ms']):<22} "
                      f"{','.join(map(str, s['flows_hit'])):<10} "
                      f"{','.join(map(str, s['lost'])):<14} "
                      f"{','.join(f'{x:.2f}' for x in s['slowdown']) or '-':<16} "
                      f"{','.join(map(str, s['wrong'])) or '-'}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
