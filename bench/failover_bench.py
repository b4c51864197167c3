#!/usr/bin/env python3
"""How long traffic stops when a link between switches fails, and what the
collective loses: the default fabric's shape (2 spines, 2 leaves, 2 servers
per leaf, 20 Mbit/s), a link failing for 1 s, side by side in one run.

    sudo scripts/lab bench failover [--repeat 3] [--json out.json]

Cases: the routing policy (ecmp: the select group's watched buckets move
flows in the datapath; single-path: only the controller can), the failed
link local to the probe's sender (leaf1-spine) or one hop away (spine-leaf2),
and the fabric idle or under a ring AllReduce of 1 MiB (11 iterations). Per
case and repetition, the probe flows' report (traffic/measure/failures.py):
flows hit of 8, the longest stop, packets lost; under the collective, the
slowdown of the iteration the failure fell in, and #wrong. The goal (issue
12): traffic stopped under 10 ms.
"""

from __future__ import annotations

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
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    base = load_fabric(TOPOLOGIES / "default.yaml")
    work = Path(f"/tmp/failover-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    out = {}
    print(f"{'policy':<12} {'link':<7} {'load':<10} {'stopped ms (each run)':<26} {'median':>7} "
          f"{'hit of 8':<10} {'lost':<14} {'slowdown':<16} #wrong")
    for policy in ("ecmp", "single-path"):
        fabric = base.with_policy(policy)
        with Lab(fabric, work / policy) as lab:
            for where in ("local", "remote"):
                link = LINKS[(policy, where)]
                for load in ("idle", "AllReduce"):
                    events = [idle_case(lab, link) if load == "idle" else
                              loaded_case(lab, link, work / f"{policy}-{where}-{k}")
                              for k in range(args.repeat)]
                    s = out[f"{policy} {where} {load}"] = {"link": link, **summary(events)}
                    print(f"{policy:<12} {where:<7} {load:<10} "
                          f"{', '.join(f'{x:g}' for x in s['stopped_ms']):<26} "
                          f"{s['median_ms'] if s['median_ms'] is not None else '-':>7} "
                          f"{','.join(map(str, s['flows_hit'])):<10} "
                          f"{','.join(map(str, s['lost'])):<14} "
                          f"{','.join(f'{x:.2f}' for x in s['slowdown']) or '-':<16} "
                          f"{','.join(map(str, s['wrong'])) or '-'}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
