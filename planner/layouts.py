"""The best parallel layouts (``python -m planner --params P --layouts``, or
``--model NAME``): for the plan's GPUs on each simulated Clos design and
wiring, the layouts of tensor, pipeline, data, context and expert
parallelism that fit a GPU's memory, searched and priced by
sim/parallel/ with the NIC share that design delivers; the best few with
step time, exposed communication per kind, bubble, memory, MFU and the days
the run's FLOPs take. Compute runs at the GPU's peak times the efficiency
calibrated on a published run (sim/parallel/published.py).
"""

from __future__ import annotations

from planner.inputs import PlanError
from planner.nccl_plan import server_of
from planner.report import _count
from planner.simulate import WIRING_NAMES
from sim.parallel import from_params, model as published_model, search
from sim.parallel.model import MODELS
from sim.parallel.published import CALIBRATION_RUN, EFFICIENCY

KEEP = 5


def add_flags(p, number) -> None:
    p.add_argument("--layouts", action="store_true",
                   help="with --params or --model: search the layouts of tensor, pipeline, "
                        "data, context and expert parallelism on each design and print the "
                        "best (implies --simulate)")
    p.add_argument("--model", help=f"with --layouts: a published model's shape: "
                                   f"{', '.join(MODELS)}")
    p.add_argument("--batch-tokens", type=number,
                   help="with --layouts: tokens per step (default --tokens-per-gpu x GPUs, "
                        "the data-parallel step's)")
    p.add_argument("--efficiency", type=number,
                   help=f"with --layouts: the share of the GPU's peak its matrix "
                        f"multiplications reach (default {EFFICIENCY}, from {CALIBRATION_RUN})")


def check_flags(args) -> None:
    own = [k for k in ("model", "batch_tokens", "efficiency") if getattr(args, k) is not None]
    if not args.layouts:
        if own:
            raise PlanError(f"--{own[0].replace('_', '-')} goes with --layouts")
        return
    if args.model is not None and args.params is not None:
        raise PlanError("--model: give the model by name or by --params, not both")
    if args.model is None and args.params is None:
        raise PlanError("--layouts needs the model: --params (e.g. 70e9) or --model")
    if args.model is not None:
        try:
            published_model(args.model)
        except ValueError as exc:
            raise PlanError(f"--model: {exc}") from None
        args.params = float(published_model(args.model).params)
    if args.efficiency is not None and not 0 < args.efficiency <= 1:
        raise PlanError(f"--efficiency must be above 0 and at most 1, got {args.efficiency:g}")
    if args.batch_tokens is not None and not 1 <= args.batch_tokens <= 1e12:
        raise PlanError(f"--batch-tokens must be from 1 to 1e12, got {args.batch_tokens:g}")


def the_model(args):
    if args.model:
        return published_model(args.model)
    return from_params(args.params, layers=args.layers)


def layouts(args, result: dict) -> dict:
    """Per design and wiring the simulation priced: the search's best."""
    inp = result["inputs"]
    server = server_of(inp, args.server or "hgx-h100")
    m = the_model(args)
    gpus = result["servers"] * inp["gpus_per_server"]
    batch = args.batch_tokens or args.tokens_per_gpu * gpus
    efficiency = args.efficiency or EFFICIENCY
    shares = {}
    for r in result["nccl"]["rows"]:
        shares[(r["design"], r["radix"], r["wiring"])] = r["fabric_share"]
    blocks = []
    for (design, radix, wiring), share in shares.items():
        found = search(m, gpus, server, efficiency, batch, share, keep=KEEP)
        blocks.append({"design": design, "radix": radix, "wiring": wiring, "share": share,
                       "tried": found["tried"], "refused_memory": found["refused_memory"],
                       "smallest_refused": found["smallest_refused"],
                       "best": [_row(f, m, inp) for f in found["best"]]})
    return {"model": m.name, "params": m.params, "layers": m.layers, "hidden": m.hidden,
            "seq": m.seq, "gpus": gpus, "server": server.name, "gpu": server.gpu.name,
            "efficiency": efficiency, "batch_tokens": batch, "designs": blocks}


def _row(found, m, inp) -> dict:
    f, lay = found.figures, found.layout
    tokens = inp["total_flops"] / m.flops_per_token()
    return {"layout": lay.name(), "micro_batch": lay.micro_batch, "zero": lay.zero,
            "recompute": lay.recompute, "micro_batches": lay.micro_batches,
            "batch_tokens": f["tokens_per_step"], "step_s": f["step_s"],
            "tp_s": f["tp_s"], "pp_s": f["pp_s"], "dp_s": f["dp_s"],
            "ep_s": f["ep_s"], "cp_s": f["cp_s"], "bubble_s": f["bubble_s"],
            "memory_gb": found.memory["total"] / 1e9, "mfu": f["mfu"],
            "days": tokens / f["tokens_per_s"] / 86400}


def format_layouts(t: dict, inp: dict) -> str:
    lines = [f"Parallel layouts: {t['model']} ({t['params']:.3g} parameters, {t['layers']} "
             f"layers of {t['hidden']:,}, {t['seq']:,} tokens a sequence) on {_count(t['gpus'])} "
             f"{t['gpu']} ({t['server']}); {t['batch_tokens']:.3g} tokens a step; compute at "
             f"{t['efficiency']:g} of peak (calibrated on a published run, "
             "docs/training.md)",
             f"# days: {inp['total_flops']:.0e} FLOPs at the layout's tokens per second; "
             "exposed seconds per step by kind".replace("e+", "e")]
    for b in t["designs"]:
        lines += ["", f"# {b['design']}, {WIRING_NAMES[b['wiring']]} wiring, radix {b['radix']}: "
                      f"{b['share']:.0%} of a NIC's rate to the rings; {b['tried']:,} layouts, "
                      f"{b['refused_memory']:,} too large for the GPU's memory",
                  f"#  {'layout':<24} {'mb':>2} {'zero':>4} {'recomp':>9} {'step':>8} "
                  f"{'TP':>7} {'PP':>7} {'DP':>7} {'EP':>7} {'CP':>7} {'bubble':>7} "
                  f"{'GB':>5} {'MFU':>5} {'days':>8}"]
        for r in b["best"]:
            lines.append(
                f"   {r['layout']:<24} {r['micro_batch']:>2} {r['zero']:>4} "
                f"{r['recompute']:>9} {r['step_s']:8.3g} {r['tp_s']:7.3g} {r['pp_s']:7.3g} "
                f"{r['dp_s']:7.3g} {r['ep_s']:7.3g} {r['cp_s']:7.3g} {r['bubble_s']:7.3g} "
                f"{r['memory_gb']:5.1f} {r['mfu']:5.1%} {_days(r['days']):>8}")
        if not b["best"]:
            s = b["smallest_refused"]
            lines.append("   no layout fits: the smallest, " + (
                f"{s['layout']}, needs {s['total'] / 1e9:.1f} GB a GPU" if s else
                "none splits these GPUs"))
    return "\n".join(lines)


def _days(d: float) -> str:
    return f"{d:,.0f}" if d >= 100 else f"{d:.1f}" if d >= 1 else f"{d:.3g}"
