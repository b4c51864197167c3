#!/usr/bin/env python3
"""Training with real parallelism against published runs, and the layout
search at 200,000 GPUs. No network, no root.

    scripts/lab bench training          # or: .venv/bin/python -m bench.training_bench
    .venv/bin/python -m bench.training_bench --json out.json

First the calibration: the one efficiency (the share of the GPU's peak the
matrix multiplications reach) at which the calibration run's prediction is
its published figure. Then every published run (sim/parallel/published.py
names each source) predicted with it: published and predicted MFU or HFU,
their ratio, and whether it is within 15%. Runs whose layout is partly
unpublished are shown but not counted.

Then the search: a 70e9-parameter GPT on 200,000 H100 (hgx-h100 servers,
non-blocking), the best layout at each batch and the search's own time,
beside the pure data-parallel layout (ZeRO-3, as only sharding fits it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness.commandline import command_line
from sim.parallel import Layout, from_params, memory, published, search, step_time
from topologies.hardware import SERVERS

GPUS = 200_000
PARAMS = 70e9
BATCHES = (16e6, 64e6, 4096 * GPUS)      # Llama 3's batch, 4x it, and the DP step's 4,096 a GPU


def calibration_table() -> tuple:
    efficiency = published.calibrate()
    rows = published.compare(round(efficiency, 3))
    lines = [f"efficiency calibrated on {published.CALIBRATION_RUN}: {efficiency:.4f} "
             f"(the constant: {published.EFFICIENCY})",
             f"#  {'run':<26} {'source':<16} {'layout':<20} {'GPU':<5} {'kind':<4} "
             f"{'published':>9} {'predicted':>9} {'ratio':>6} {'bubble':>6} {'TP':>5}  verdict"]
    for r in rows:
        verdict = ("calibration" if r["calibration"] else
                   ("within 15%" if r["within"] else "OFF") +
                   ("" if r["counted"] else " (not counted: layout partly unpublished)"))
        lines.append(f"   {r['run']:<26} {r['source']:<16} {r['layout']:<20} {r['gpu']:<5} "
                     f"{r['kind'].upper():<4} {r['published']:9.1%} {r['predicted']:9.1%} "
                     f"{r['ratio']:6.2f} {r['bubble_share']:6.1%} {r['tp_share']:5.1%}  "
                     f"{verdict}")
    counted = [r for r in rows if r["counted"] and not r["calibration"]]
    within = sum(r["within"] for r in counted)
    worst = max(abs(r["ratio"] - 1) for r in counted)
    lines.append(f"# {within} of {len(counted)} counted runs within 15%; worst "
                 f"|predicted/published - 1| = {worst:.1%}")
    return lines, {"efficiency": efficiency, "runs": rows}


def search_table() -> tuple:
    server = SERVERS["hgx-h100"]
    m = from_params(PARAMS, layers=80)
    lines = [f"{m.name}: {m.params:.3g} parameters, {m.layers} layers of {m.hidden:,}; "
             f"{GPUS:,} H100, non-blocking; 1e24 FLOPs",
             f"#  {'batch (tokens)':>14} {'best layout':<24} {'mb':>2} {'zero':>4} "
             f"{'recompute':>9} {'step':>8} {'MFU':>6} {'days':>7} {'GB':>5} {'search':>8} "
             f"{'layouts':>7}"]
    out = []
    for batch in BATCHES:
        t0 = time.perf_counter()
        found = search(m, GPUS, server, published.EFFICIENCY, batch)
        took = time.perf_counter() - t0
        best = found["best"][0]
        days = _days(m, best.figures)
        lines.append(f"   {batch:14.3g} {best.layout.name():<24} {best.layout.micro_batch:>2} "
                     f"{best.layout.zero:>4} {best.layout.recompute:>9} "
                     f"{best.figures['step_s']:8.3g} {best.figures['mfu']:6.1%} {days:7.3f} "
                     f"{best.memory['total'] / 1e9:5.1f} {took:7.2f}s {found['tried']:>7,}")
        out.append({"batch_tokens": batch, "layout": best.layout.name(),
                     "step_s": best.figures["step_s"], "mfu": best.figures["mfu"],
                     "days": days, "search_s": took, "tried": found["tried"]})
    dp = Layout(tp=1, pp=1, dp=GPUS, global_batch=GPUS, zero=3, recompute="full")
    f = step_time(m, dp, server, published.EFFICIENCY)
    lines.append(f"   pure data parallel at 4,096 tokens a GPU ({dp.name()}, ZeRO-3, full "
                 f"recomputation): step {f['step_s']:.3g} s, MFU {f['mfu']:.1%}, "
                 f"{_days(m, f):.3f} days, {memory(m, dp)['total'] / 1e9:.1f} GB a GPU; "
                 f"without ZeRO it needs {memory(m, Layout(dp=GPUS, zero=0))['total'] / 1e9:,.0f}"
                 " GB a GPU")
    return lines, {"searches": out, "pure_dp": {"step_s": f["step_s"], "mfu": f["mfu"],
                                                "days": _days(m, f)}}


def _days(m, figures) -> float:
    return 1e24 / m.flops_per_token() / figures["tokens_per_s"] / 86400


def main(argv=None) -> int:
    p = command_line(__doc__)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    lines, cal = calibration_table()
    more, srch = search_table()
    print("\n".join(lines + [""] + more))
    if args.json:
        Path(args.json).write_text(json.dumps({"published": cal, "search": srch}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
