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
from planner.report import count_text
from planner.simulate import WIRING_NAMES
from sim.parallel import (Layout, LayoutError, check, check_fits, from_params, memory,
                          model as published_model, search, step_time)
from sim.parallel.model import MODELS
from sim.parallel.search import Found
from sim.parallel.published import CALIBRATION_RUN, EFFICIENCY

KEEP = 5
# --layout's keys: Layout's fields by the names the table prints
LAYOUT_KEYS = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "vp": "vp",
               "mb": "micro_batch", "zero": "zero", "recompute": "recompute"}
LEGEND = [
    "# layout: TPt tensor parallel over t GPUs of a server, PPp p pipeline stages (PPpxv: v "
    "interleaved virtual stages a GPU), DPd d data-parallel replicas, CPc the sequence split "
    "over c GPUs, EPe a MoE layer's experts over e of the replicas; GPUs = t x p x d x c",
    "# batch: tokens a step the layout runs (the nearest whole number of micro-batches to "
    "--batch-tokens, up to half as large again or half as small); rows are sorted by seconds "
    "per token, so a larger batch may rank above a shorter step",
    "# mb: sequences a micro-batch; zero: ZeRO stage (1: optimizer states sharded over the "
    "replicas, 2: gradients too, 3: weights too, FSDP; 0: none); recomp: activations "
    "recomputed in the backward pass (selective: the attention scores; full: the whole "
    "forward)",
    "# step: seconds a step; TP, PP, DP, EP, CP: seconds a step each kind's communication "
    "is exposed; bubble: seconds the pipeline stands idle; GB: memory a GPU (1e9 bytes); "
    "MFU: model FLOPs per second against the GPUs' BF16 peak; days: --flops at the "
    "layout's tokens per second; *: your --layout, priced whether or not the search "
    "would keep it; =: pure data parallelism as DDP runs it (TP1 PP1, every GPU holding the "
    "whole model, ZeRO 0), priced as every other row"]
PURE_DP_NOTE = ("Training step with communication: with --layouts, pure data parallelism is "
                "priced once, in the layout table below (its rows marked =), by the model that "
                "prices every layout (--params alone prices DDP's buckets one by one at "
                "--gpu-pflops)")


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
    p.add_argument("--layout", help="with --params or --model: price this layout beside the "
                                    "search's best, e.g. tp=8,pp=16,dp=128 (also cp, ep, vp, "
                                    "mb, zero, recompute; dp defaults to what the GPUs leave); "
                                    "implies --layouts")
    p.add_argument("--efficiency", type=number,
                   help=f"with --layouts: the share of the GPU's peak its matrix "
                        f"multiplications reach (default {EFFICIENCY}, from {CALIBRATION_RUN})")


def check_flags(args) -> None:
    if args.layout is not None:
        args.named = parse_layout(args.layout)
        args.layouts = True
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


def parse_layout(text: str) -> dict:
    """--layout's key=value pairs, as Layout's fields."""
    fields = {}
    for part in (text or "").split(","):
        key, eq, value = part.strip().partition("=")
        if key not in LAYOUT_KEYS or not eq:
            raise PlanError(f"--layout: expected key=value pairs separated by commas, keys "
                            f"{', '.join(LAYOUT_KEYS)} (e.g. tp=8,pp=16,dp=128), got "
                            f"{part.strip()[:40]!r}")
        if key == "recompute":
            fields["recompute"] = value
        elif value.isdigit() and len(value) <= 7:
            fields[LAYOUT_KEYS[key]] = int(value)
        else:
            raise PlanError(f"--layout: {key} must be a whole number, got {value[:20]!r}")
    return fields


def named_layout(args, m, gpus: int, server, batch: float) -> Layout:
    """--layout on the plan's GPUs, its batch the nearest whole number of
    micro-batches to `batch` tokens (as the search's), or PlanError."""
    return _layout(dict(args.named), m, gpus, server, batch, "--layout")


def _layout(f: dict, m, gpus: int, server, batch: float, flag: str) -> Layout:
    """The layout of fields `f` on `gpus` GPUs with its batch fitted, or
    PlanError naming `flag`."""
    rest = f.get("tp", 1) * f.get("pp", 1) * f.get("cp", 1)
    f.setdefault("dp", max(1, gpus // rest))
    lay = Layout(**f)
    if lay.gpus != gpus:
        raise PlanError(f"{flag}: TP{lay.tp} x PP{lay.pp} x DP{lay.dp} x CP{lay.cp} is "
                        f"{lay.gpus:,} GPUs; the plan has {gpus:,}")
    seqs = max(1, round(batch / m.seq))
    per = lay.dp * lay.micro_batch
    mbs = max(1, round(seqs / per))
    if lay.vp > 1:
        mbs = max(lay.pp, lay.pp * round(mbs / lay.pp))
    f["global_batch"] = mbs * per
    lay = Layout(**f)
    try:
        check(lay, m, server.gpus)
    except LayoutError as exc:
        raise PlanError(f"{flag}: {exc}") from None
    return lay


def the_model(args):
    if args.model:
        return published_model(args.model)
    return from_params(args.params, layers=args.layers)


def _setting(args, result: dict):
    """The model, GPUs, server, batch and efficiency the layouts are priced for."""
    inp = result["inputs"]
    gpus = result["servers"] * inp["gpus_per_server"]
    return (the_model(args), gpus, server_of(inp, args.server or "hgx-h100"),
            args.batch_tokens or args.tokens_per_gpu * gpus, args.efficiency or EFFICIENCY)


def check_named(args, result: dict) -> None:
    """PlanError, before anything is priced, when --layout cannot run here
    or the search cannot price the plan's fabric at its own rates."""
    inside = result.get("in_server_gbps")
    if args.layouts and inside is not None:
        sold = server_of(result["inputs"], args.server or "hgx-h100")
        if abs(inside - sold.gpu.nvlink_gbytes * 8) > 1e-6 * inside:
            raise PlanError(f"--layouts: the layout search prices tensor parallelism on the "
                            f"{sold.name}'s NVLink as sold ({sold.gpu.nvlink_gbytes:g} GB/s as NCCL counts it), "
                            f"not on the fabric's {inside:g} Gbit/s in-server links; leave "
                            "out --fabric or --results to search layouts")
    if args.layout:
        m, gpus, server, batch, _ = _setting(args, result)
        named_layout(args, m, gpus, server, batch)


def layouts(args, result: dict) -> dict:
    """Per design and wiring the simulation priced: the search's best, and
    --layout's."""
    inp = result["inputs"]
    m, gpus, server, batch, efficiency = _setting(args, result)
    shares = {}
    for r in result["nccl"]["rows"]:
        shares[(r["design"], r["radix"], r["wiring"])] = r["fabric_share"]
    blocks = []
    named = named_layout(args, m, gpus, server, batch) if args.layout else None
    ddp = _pure_dp(m, gpus, server, batch)
    for (design, radix, wiring), share in shares.items():
        found = search(m, gpus, server, efficiency, batch, share, keep=KEEP)
        blocks.append({"design": design, "radix": radix, "wiring": wiring, "share": share,
                       "tried": found["tried"], "refused_memory": found["refused_memory"],
                       "smallest_refused": found["smallest_refused"],
                       "best": [_row(f, m, inp) for f in found["best"]],
                       "named": _named_row(named, m, inp, server, (efficiency, share, batch)),
                       "pure_dp": _named_row(ddp, m, inp, server, (efficiency, share, batch))})
    return {"model": m.name, "params": m.params, "layers": m.layers, "hidden": m.hidden,
            "seq": m.seq, "gpus": gpus, "server": server.name, "gpu": server.gpu.name,
            "efficiency": efficiency, "batch_tokens": batch, "designs": blocks}


def _pure_dp(m, gpus: int, server, batch: float):
    """Pure data parallelism as DDP runs it, or None where it cannot run."""
    try:
        return _layout({"dp": gpus, "zero": 0}, m, gpus, server, batch, "pure DP")
    except PlanError:
        return None


def _named_row(lay, m, inp, server, priced):
    """A layout the search did not choose priced on one design (`priced`:
    efficiency, NIC share, the batch asked in tokens), flagged when it does
    not fit or runs another batch than the one asked (the search would
    keep neither)."""
    if lay is None:
        return None
    efficiency, share, batch = priced
    found = Found(lay, step_time(m, lay, server, efficiency, share), memory(m, lay))
    row = _row(found, m, inp)
    try:
        check_fits(m, lay, server.gpu.name, server.gpu.memory_gbytes)
        row["does_not_fit"] = ""
    except LayoutError as exc:
        row["does_not_fit"] = str(exc)
    asked = max(1, round(batch / m.seq)) * m.seq
    row["other_batch"] = "" if abs(row["batch_tokens"] - asked) <= asked / 2 else (
        f"{lay.name()} runs {row['batch_tokens']:,} tokens a step, not the {asked:,} asked: "
        f"its {lay.dp:,} replicas take at least {lay.micro_batch} sequence(s) of "
        f"{m.seq:,} tokens each")
    return row


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
             f"layers of {t['hidden']:,}, {t['seq']:,} tokens a sequence) on {count_text(t['gpus'])} "
             f"{t['gpu']} ({t['server']}); {t['batch_tokens']:.3g} tokens a step asked; "
             f"compute at {t['efficiency']:g} of peak (calibrated on a published run, "
             "docs/training.md)",
             f"# days: {inp['total_flops']:.0e} FLOPs at the layout's tokens per second; "
             "exposed seconds per step by kind".replace("e+", "e")] + LEGEND
    for b in t["designs"]:
        lines += ["", f"# {b['design']}, {WIRING_NAMES[b['wiring']]} wiring, radix {b['radix']}: "
                      f"{b['share']:.0%} of a NIC's rate to the rings; {b['tried']:,} layouts, "
                      f"{b['refused_memory']:,} too large for the GPU's memory",
                  f"#  {'layout':<24} {'batch':>6} {'mb':>2} {'zero':>4} {'recomp':>9} "
                  f"{'step':>8} {'TP':>7} {'PP':>7} {'DP':>7} {'EP':>7} {'CP':>7} "
                  f"{'bubble':>7} {'GB':>6} {'MFU':>5} {'days':>8}"]
        for mark, key in (("=", "pure_dp"), ("*", "named")):
            row = b.get(key)
            if row:
                lines.append(_table_row(row, mark))
            if row and row["does_not_fit"]:
                lines.append(f"#  {mark} {row['does_not_fit']}: priced as if it did")
            if row and row["other_batch"]:
                lines.append(f"#  {mark} {row['other_batch']}")
        lines += [_table_row(r) for r in b["best"]]
        if not b["best"]:
            s = b["smallest_refused"]
            lines.append("   no layout fits: the smallest, " + (
                f"{s['layout']}, needs {s['total'] / 1e9:.1f} GB a GPU" if s else
                "none splits these GPUs"))
    return "\n".join(lines)


def _table_row(r: dict, mark: str = " ") -> str:
    return (f" {mark} {r['layout']:<24} {_tokens(r['batch_tokens']):>6} {r['micro_batch']:>2} "
            f"{r['zero']:>4} {r['recompute']:>9} {r['step_s']:8.3g} {r['tp_s']:7.3g} "
            f"{r['pp_s']:7.3g} {r['dp_s']:7.3g} {r['ep_s']:7.3g} {r['cp_s']:7.3g} "
            f"{r['bubble_s']:7.3g} {r['memory_gb']:6.1f} {r['mfu']:5.1%} {_days(r['days']):>8}")


def _tokens(n: float) -> str:
    """A batch in tokens: 16.8M, 524k, 8192."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


def _days(d: float) -> str:
    return f"{d:,.0f}" if d >= 100 else f"{d:.1f}" if d >= 1 else f"{d:.3g}"
