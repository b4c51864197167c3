#!/usr/bin/env python3
"""What the fabric adds to a training step, measured on real labs, and what
it adds at 200,000 GPUs, simulated.

    sudo scripts/lab bench step [--steps 3 --draws 3 --json out.json --no-planner]

The step: 8 layers, 256K float32 parameters (1 MiB of gradients), forward
30 ms and backward 60 ms a layer (0.72 s of compute), a ring AllReduce per
bucket over 8 ranks at 20 Mbit/s (4 servers on each of 2 leaves), so that
its communication is about its compute.

1. Overlap off and on, buckets of 64K, 256K and 1M (16, 4 and 1 of them),
   ranks in leaf order on 4 spines (the ring crosses the spines once each
   way: no two flows share a link, whatever ECMP draws): step, compute,
   communication, exposed communication, overlap efficiency, measured
   (median of `--steps`) and simulated.
2. The fabric: the same step (256K buckets, overlap on) with the ranks
   alternating between the leaves, so every ring hop crosses the spines (4
   flows up each leaf, the collectives benchmark's crossing placement):
   under ECMP on 4 spines (`--draws` runs, each with new connections: a new
   hash draw), under single-path (every flow between the leaves on one
   spine) and on a 2:1 oversubscribed fabric (2 spines, ECMP, `--draws`
   runs). Each against part 1's step in leaf order, where no link is shared:
   what the fabric adds to the step.
3. The planner: days for 1e24 FLOPs at 200,000 GPUs (8 per server, 400
   Gbit/s, radix 128) for a 70e9-parameter model, 4,096 tokens per GPU per
   step, with and without the communication, with PyTorch's 25M buckets and
   with 1G buckets (`python -m planner --gpus 200000 --radix 128 --params
   70e9 [--bucket 1G]`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness.commandline import command_line
from harness.commands import python
from harness.fabrics import crossing_fabric, interleaved
from lab.lifecycle import Lab
from toolkit.validators import normalise
from sim import training_step
from runs.experiment import Experiment
from runs.training import run_step

RATE = 20
BUCKETS = (64 * 1024, 256 * 1024, 1 << 20)
MODEL = {"layers": 8, "params": 256 * 1024, "fwd_ms": 30, "bwd_ms": 60}


def experiment(ranks, bucket: int, overlap: bool, steps: int) -> Experiment:
    step = normalise({**MODEL, "bucket": bucket, "overlap": overlap}, training_step.STEP_SCHEMA, "step",
                     "bench")
    return Experiment(step=step, ranks=ranks, iters=steps, warmup=1)


def one(lab, bucket, overlap, steps, ranks=None) -> dict:
    ranks = ranks or [h.name for h in lab.fabric.endpoints]
    result = run_step(lab, experiment(ranks, bucket, overlap, steps))
    sim = result["predicted"]["overlap_on" if overlap else "overlap_off"]
    return {"bucket": bucket, "overlap": overlap, "buckets": len(result["step"]["buckets"]),
            **{k: result["summary"][k] for k in T_KEYS}, "wrong": result["wrong"],
            "sim_step_s": sim["step_s"], "sim_exposed_s": sim["exposed_s"],
            "steps": [r["step_s"] for r in result["runs"]], "host": result["host"]}


T_KEYS = ("step_s", "compute_s", "comm_s", "exposed_s", "overlap_efficiency")


def part1(workdir, steps) -> list:
    fabric = crossing_fabric(4, RATE)
    out = []
    with Lab(fabric, workdir / "part1") as lab:
        for bucket in BUCKETS:
            for overlap in (False, True):
                out.append(one(lab, bucket, overlap, steps))
                print(row_text(out[-1]), flush=True)
    return out


def part2(workdir, steps, draws, ideal: dict) -> list:
    out = []
    cases = (("4 spines, ecmp", crossing_fabric(4, RATE), draws),
             ("4 spines, single-path", crossing_fabric(4, RATE).with_policy("single-path"), 1),
             ("2 spines (2:1), ecmp", crossing_fabric(2, RATE), draws))
    for name, fabric, runs in cases:
        with Lab(fabric, workdir / name.replace(" ", "").replace(",", "-")) as lab:
            for k in range(runs):
                r = {"fabric": name, "draw": k + 1,
                     **one(lab, 256 * 1024, True, steps, interleaved(fabric))}
                r["added_s"] = r["step_s"] - ideal["step_s"]
                r["over_ideal"] = r["step_s"] / ideal["step_s"]
                out.append(r)
                print(f"  {name:<22} run {k + 1}: step {r['step_s']:.3f} s, comm "
                      f"{r['comm_s']:.3f} s, exposed {r['exposed_s']:.3f} s; the fabric adds "
                      f"{r['added_s']:+.3f} s ({r['over_ideal']:.2f}x the step in leaf order, "
                      f"{ideal['step_s']:.3f} s); simulated {r['sim_step_s']:.3f} s; #wrong "
                      f"{r['wrong']}", flush=True)
    return out


def part3() -> list:
    out = []
    for extra in ([], ["--bucket", "1G"]):
        t0 = time.monotonic()
        proc = python("-m", "planner", "--gpus", "200000", "--radix", "128", "--params", "70e9",
                      "--json", *extra, timeout=3600)
        if proc.returncode:
            out.append({"error": proc.stderr.strip()})
            continue
        t = json.loads(proc.stdout)["training_step"]
        out.append({"bucket": t["bucket_bytes"], "buckets": t["buckets"],
                    "seconds": time.monotonic() - t0, "compute_s": t["compute_s"],
                    "days_compute_only": t["days_compute_only"], "rows": t["rows"]})
        print(f"  buckets of {t['bucket_bytes']:,} B ({t['buckets']:,}): compute only "
              f"{t['days_compute_only'] * 24:.2f} hours ({t['compute_s']:.3f} s a step)")
        for r in t["rows"]:
            print(f"    {r['design']} {r['wiring']:<7} a bucket's AllReduce "
                  f"{r['bucket_allreduce_s'] * 1e3:.1f} ms, step {r['step_s']:.3f} s "
                  f"(exposed {r['exposed_s']:.3f} s): {r['days']:,.2f} days with overlap, "
                  f"{r['days_no_overlap']:,.2f} without")
        print(f"    (the planner took {out[-1]['seconds']:.0f} s)", flush=True)
    return out


def row_text(r: dict) -> str:
    return (f"  bucket {r['bucket'] >> 10:>5}K x{r['buckets']:<3} overlap "
            f"{'on ' if r['overlap'] else 'off'}  step {r['step_s']:.3f} s  compute "
            f"{r['compute_s']:.3f} s  comm {r['comm_s']:.3f} s  exposed {r['exposed_s']:.3f} s "
            f"({r['overlap_efficiency']:.0%} hidden)  simulated step {r['sim_step_s']:.3f} s, "
            f"exposed {r['sim_exposed_s']:.3f} s  #wrong {r['wrong']}  host CPU "
            f"{r['host']['cpu_busy_pct']:.0f}%")


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--steps", type=int, default=3, help="timed steps per case (default 3)")
    p.add_argument("--draws", type=int, default=3,
                   help="ECMP runs in part 2, each a new hash draw (default 3)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--no-planner", action="store_true", help="leave out part 3")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/step-bench"))
    a = p.parse_args(argv)
    print(f"1. Overlap off and on, 3 bucket sizes (8 ranks in leaf order, 2 leaves, 4 spines, "
          f"{RATE} Mbit/s, ECMP; median of {a.steps} steps)")
    first = part1(a.workdir, a.steps)
    print("2. The fabric under the same step (256K buckets, overlap on), ranks alternating "
          "between the leaves")
    ideal = next(r for r in first if r["bucket"] == 256 * 1024 and r["overlap"])
    second = part2(a.workdir, a.steps, a.draws, ideal)
    third = None
    if not a.no_planner:
        print("3. The planner at 200,000 GPUs: 70e9 parameters, 4,096 tokens per GPU, 1e24 FLOPs")
        third = part3()
    if a.json:
        a.json.write_text(json.dumps({"overlap": first, "fabric": second, "planner": third},
                                     indent=1))
    bad = [r for r in first + second if r["wrong"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
