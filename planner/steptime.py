"""Training time with communication (``python -m planner --params P``): a
data-parallel step of a model of P parameters on the plan's GPUs, its
gradients' buckets AllReduced as the backward pass produces them, each
bucket's AllReduce priced by the flow-level simulator on each Clos design
and wiring the plan simulates; the step's exposed communication from
sim/training_step.py's closed form; and how many days the run's FLOPs then take,
against compute alone.

Compute per step is the article's arithmetic: 6 x params x tokens per GPU
(forward 2, backward 4) at the GPU's rate x utilisation, split evenly over
the layers. Gradients are bfloat16 (2 bytes a parameter) in DDP buckets of
`--bucket` bytes, one AllReduce at a time (one NCCL stream). Pure data
parallelism: every GPU holds the whole model, as the article's AllReduce
does; tensor and pipeline parallelism are not modelled.
"""

from __future__ import annotations

from collectives.registry import FLAT_RING, PHASED, SERVER_RINGS
from planner.inputs import PlanError, parse_bytes
from planner.nccl_plan import DEFAULT_SERVER, server_of
from planner.report import count_text, number_text
from planner.simulate import WIRING_NAMES
from sim import training_step
from sim.parallel import Layout, from_params, memory, model as published_model
from sim.parallel.memory import WORKSPACE_GB

DEFAULT_LAYERS, DEFAULT_TOKENS, DEFAULT_BUCKET = 80, 4096, "25M"
MAX_LAYERS = training_step.MAX_LAYERS
MAX_STEP_BUCKETS = 1_000_000
GRADIENT_TYPE = "bfloat16"


def add_flags(p, whole, number) -> None:
    p.add_argument("--params", type=number,
                   help="model parameters (e.g. 70e9): also print the training step with "
                        "communication and the days the FLOPs take (implies --simulate)")
    p.add_argument("--layers", type=whole,
                   help=f"with --params: layers, 1 to {MAX_LAYERS} (default {DEFAULT_LAYERS})")
    p.add_argument("--tokens-per-gpu", type=whole,
                   help=f"with --params: tokens per GPU per step (default {DEFAULT_TOKENS})")
    p.add_argument("--bucket", help="with --params: gradient bucket size, 1K to 1G "
                                    f"(default {DEFAULT_BUCKET}, PyTorch DDP's)")


def check_flags(args) -> None:
    """The step's flags: only with --params, each in range; --params implies
    --simulate, whose sizes are then the buckets'."""
    own = [k for k in ("layers", "tokens_per_gpu", "bucket") if getattr(args, k) is not None]
    if args.params is None:
        if own:
            raise PlanError(f"--{own[0].replace('_', '-')} goes with --params")
        return
    if not 1 <= args.params <= training_step.MAX_PARAMS:
        raise PlanError(f"--params must be a number from 1 to {training_step.MAX_PARAMS:.0e}, got "
                        f"{args.params:g}")
    if args.sizes is not None:
        raise PlanError("--sizes: with --params the simulated sizes are the gradient "
                        "buckets'; leave out --sizes")
    args.layers = DEFAULT_LAYERS if args.layers is None else args.layers
    args.tokens_per_gpu = DEFAULT_TOKENS if args.tokens_per_gpu is None else args.tokens_per_gpu
    args.bucket = parse_bytes(args.bucket or DEFAULT_BUCKET, "--bucket")
    if not 1 <= args.layers <= MAX_LAYERS:
        raise PlanError(f"--layers must be a whole number from 1 to {MAX_LAYERS}, got "
                        f"{args.layers}")
    if not 1 <= args.tokens_per_gpu <= 1 << 40:
        raise PlanError(f"--tokens-per-gpu must be a whole number from 1 to {1 << 40:,}, got "
                        f"{args.tokens_per_gpu}")
    if not 1024 <= args.bucket <= 1 << 30:
        raise PlanError(f"--bucket must be from 1K to 1G, got {args.bucket:,} bytes")
    if args.params < args.layers:
        raise PlanError(f"--params: {args.params:g} parameters cannot fill {args.layers} layers")
    if args.params * 2 / args.bucket > MAX_STEP_BUCKETS:
        raise PlanError(f"--bucket: {args.bucket:,} bytes cut {args.params:g} parameters' "
                        f"gradients into more than {MAX_STEP_BUCKETS:,} buckets: raise it")
    args.simulate = True


def step_plan(args, result, overlap: bool = True) -> training_step.Plan:
    inp = result["inputs"]
    return training_step.plan_step({
        "layers": args.layers, "params": int(args.params), "fwd_ms": None, "bwd_ms": None,
        "gpu_tflops": inp["gpu_flops"] * inp["utilisation"] / 1e12,
        "tokens": args.tokens_per_gpu, "bucket": args.bucket, "mode": "allreduce",
        "overlap": overlap, "in_flight": 1}, GRADIENT_TYPE, max_buckets=None)


def bucket_sizes(args, result) -> list:
    """The distinct bucket sizes to simulate."""
    return sorted({b.bytes for b in step_plan(args, result).buckets})


def training_with_comm(args, result: dict, sim: dict, algorithm: str = None) -> dict:
    """Per simulated design and wiring: the step, overlap on and off, and
    the days `--flops` take with it; each bucket's AllReduce from `sim`'s
    rows of `algorithm` ("nccl": as NCCL runs it, planner/nccl_plan.py;
    None: the lab's hierarchical schedule, or its ring with one GPU a
    server)."""
    plan, off = step_plan(args, result), step_plan(args, result, overlap=False)
    inp = result["inputs"]
    gpus = sim["gpus"]
    if algorithm is None:
        algorithm = SERVER_RINGS if inp["gpus_per_server"] > 1 else FLAT_RING
    flops_per_step = 6 * plan_params(plan) * args.tokens_per_gpu * gpus
    steps = inp["total_flops"] / flops_per_step
    rows, blocks = [], {}
    for r in sim["rows"]:
        if r["algorithm"] == algorithm:
            blocks.setdefault((r["design"], r["radix"], r["wiring"]), {})[r["size_bytes"]] = r
    for (design, radix, wiring), by_size in blocks.items():
        def alone(c):
            return by_size[c["bytes"]]["seconds"]
        on, no = training_step.timeline(plan, alone), training_step.timeline(off, alone)
        largest = max(by_size)
        per_rail = largest / (inp["gpus_per_server"] if algorithm != FLAT_RING else 1)
        rows.append({"design": design, "radix": radix, "wiring": wiring,
                     "bucket_bandwidth_s": 2 * per_rail / (inp["link_gbps"] * 1e9 / 8),
                     "algorithm": by_size[largest].get("ran", algorithm),
                     "bucket_allreduce_s": by_size[largest]["seconds"],
                     "comm_s": sum(alone(c) for c in plan.collectives),
                     "exposed_s": on["exposed_s"], "step_s": on["step_s"],
                     "overlap_efficiency": on["overlap_efficiency"],
                     "step_no_overlap_s": no["step_s"],
                     "days": steps * on["step_s"] / 86400,
                     "days_no_overlap": steps * no["step_s"] / 86400})
    return {"params": plan_params(plan), "layers": len(plan.layers),
            "tokens_per_gpu": args.tokens_per_gpu, "gradient_type": GRADIENT_TYPE,
            "bucket_bytes": args.bucket, "buckets": len(plan.buckets),
            "gradient_bytes": plan.gradient_bytes, "gpus": gpus,
            "compute_s": plan.compute_s, "steps": steps,
            "days_compute_only": steps * plan.compute_s / 86400, "rows": rows,
            "memory": pure_dp_memory(args, inp, gpus)}


def pure_dp_memory(args, inp: dict, gpus: int) -> dict:
    """What a GPU holds for pure data parallelism (no ZeRO: every GPU keeps
    the whole model's 16-bit weights, 32-bit gradients and Adam's 32-bit
    states, 18 bytes a parameter, as DDP does), its activations and
    workspace by sim/parallel/memory.py, the layout search's own account,
    against the GPU's memory."""
    gpu = server_of(inp, getattr(args, "server", None) or DEFAULT_SERVER).gpu
    p = args.params
    held = {"weights": 2 * p, "gradients": 4 * p, "optimizer": 12 * p}
    shape = (published_model(args.model) if getattr(args, "model", None) else
             from_params(p, layers=args.layers) if p >= 1e6 else None)
    if shape is None:           # too small to shape: its states and the workspace
        held["workspace"] = WORKSPACE_GB * 1e9
    else:
        lay = Layout(tp=1, pp=1, dp=gpus, zero=0,
                     micro_batch=max(1, round(args.tokens_per_gpu / shape.seq)))
        whole = memory(shape, lay)
        held.update(activations=whole["activations"], workspace=whole["workspace"])
    total, limit = sum(held.values()), gpu.memory_gbytes * 1e9
    return {"gpu": gpu.name, "gpu_bytes": limit, "bytes": held, "total": total,
            "fits": total <= limit}


def _memory_line(mem: dict, params: int) -> list:
    """One sentence when pure data parallelism does not fit a GPU."""
    if not mem or mem["fits"]:
        return []
    parts = ", ".join(f"{k} {v / 1e9:,.1f}" for k, v in mem["bytes"].items())
    return [f"# DOES NOT FIT: pure data parallelism keeps all {params:,} parameters' weights, "
            f"gradients and optimizer states on every GPU, {mem['total'] / 1e9:,.0f} GB "
            f"({parts}) against the {mem['gpu']}'s {mem['gpu_bytes'] / 1e9:g} GB, so the "
            "rows below price a step no GPU can hold (--layouts searches the layouts "
            "that fit)"]


def plan_params(plan: training_step.Plan) -> int:
    return sum(l.params for l in plan.layers)


def format_training(t: dict, inp: dict) -> str:
    lines = [
        f"Training step with communication: {t['params']:,} parameters in {t['layers']} "
        f"layers, {t['gradient_type']} gradients ({t['gradient_bytes']:,} B) in "
        f"{t['buckets']:,} DDP buckets of up to {t['bucket_bytes']:,} B, AllReduced one at a "
        f"time as the backward pass makes them; {count_text(t['tokens_per_gpu'])} tokens per GPU "
        f"per step on {count_text(t['gpus'])} GPUs",
        f"# compute {duration_text(t['compute_s'])} a step (6 x params x tokens at "
        f"{number_text(inp['gpu_flops'] / 1e15)} PFLOP/s x {inp['utilisation']:g}); "
        f"{inp['total_flops']:.0e} FLOPs = ".replace("e+", "e") + f"{t['steps']:,.0f} steps = "
        f"{days_text(t['days_compute_only'])} days on compute alone",
        *_memory_line(t.get("memory"), t["params"]),
        f"#  {'design':<8} {'wiring':<16} {'per bucket':>12} {'comm/step':>10} "
        f"{'exposed':>9} {'step':>9} {'hidden':>7} {'days':>9} {'no overlap':>11}"]
    for r in t["rows"]:
        lines.append(
            f"   {r['design']:<8} {WIRING_NAMES[r['wiring']]:<16} "
            f"{duration_text(r['bucket_allreduce_s']):>12} {duration_text(r['comm_s']):>10} "
            f"{duration_text(r['exposed_s']):>9} {duration_text(r['step_s']):>9} {r['overlap_efficiency']:7.0%} "
            f"{days_text(r['days']):>9} {days_text(r['days_no_overlap']):>10}")
    bound = [r for r in t["rows"] if r["bucket_allreduce_s"] > 10 * r["bucket_bandwidth_s"]]
    if bound:
        r = bound[0]
        lines.append(f"# latency-bound: a bucket's bytes need {r['bucket_bandwidth_s'] * 1e3:.3g} "
                     f"ms at the NIC's rate and its AllReduce takes "
                     f"{r['bucket_allreduce_s'] * 1e3:.3g} ms: " + _why_latency(r["algorithm"]))
    lines.append("# days: the run's FLOPs at this step time (with overlap; then without). "
                 "Pure data parallelism, every GPU holding the whole model; the AllReduce "
                 "per bucket is " + _which(t["rows"]))
    return "\n".join(lines)


def _why_latency(algorithm: str) -> str:
    if algorithm in PHASED:
        return ("the ring's 2(m-1) steps across the servers, each a few hops' latency; larger "
                "buckets, fewer GPUs per ring (more parallelism of other kinds) or a tree cut it")
    return (f"NCCL's {algorithm} pays its steps' latency; larger buckets or fewer GPUs per "
            "AllReduce (more parallelism of other kinds) cut it")


def _which(rows) -> str:
    """Which AllReduce the step priced its buckets with."""
    algorithm = rows[0]["algorithm"] if rows else ""
    if algorithm in PHASED + ("",):
        return f"the simulated {algorithm} one"
    return f"as NCCL would run it ({algorithm} for the largest bucket)"


def duration_text(seconds: float) -> str:
    """A duration in the unit that suits it, four significant figures."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            x = seconds / scale
            return f"{x:,.0f} {unit}" if x >= 1000 else f"{x:.4g} {unit}"
    return ""


def days_text(d: float) -> str:
    return f"{d:,.0f}" if d >= 100 else f"{d:.1f}" if d >= 1 else f"{d:.3g}"
