"""A training step: compute, gradient buckets, and the collectives that
average them, overlapped with the backward pass as PyTorch DDP (or sharded,
as FSDP/ZeRO) does. Pure: the description (``experiment.step`` and the step
flags), the plan it makes, and the step's timeline given how long each
collective takes alone (the simulator's closed form; the rank agents run the
same plan for real, programs/stepper.py).

The model is a list of layers, each with its parameters and its forward and
backward compute time: given, or from FLOPs as the article's arithmetic has
it (forward 2 x params x tokens, backward twice that, at the GPU's rate).
Gradients fill buckets in backward order, DDP style: the last layer's first,
a bucket closing once it holds `bucket` bytes; a bucket's collective is
launched the moment the backward pass has produced its last gradient, and
collectives run in launch order, `in_flight` at a time (1: one NCCL stream,
as DDP issues them). With overlap off every collective waits for the end of
the backward pass.

Modes: `allreduce` (data parallel: an AllReduce per bucket), and `sharded`
(ZeRO-3/FSDP: each bucket's parameters are gathered (AllGather) before its
layers' forward pass, prefetched in forward order from the start of the
step, and its gradients reduce-scattered (ReduceScatter) after their
backward; the re-gather FSDP does before the backward pass is not modelled).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from toolkit.validators import Section, is_int, described, integer, number, optional, size
from toolkit.errors import shown
from toolkit.units import parse_count
from toolkit.validators import choice as _choice
from collectives.datatypes import datatype
from collectives.metrics import TYPE_SIZE
from sim.trace_step import trace_spec

MODES = ("allreduce", "sharded")
MAX_LAYERS = 1000
MAX_BUCKETS = 256
MAX_PARAMS = 10 ** 13
DEFAULTS = {"layers": 8, "params": 512 * 1024, "fwd_ms": 50.0}


def params_of(v, fail):
    """A parameter count as counts are written (toolkit/units.py: 1.3e9,
    70B, 512k; SI prefixes, powers of 1000), rounded to a whole count."""
    n = parse_count(v, whole=False)
    n = int(round(n)) if n is not None else None
    if n is None or not 1 <= n <= MAX_PARAMS:
        fail(f"expected a parameter count from 1 to 1e13 (such as 1.3e9, 70B or 512k), "
             f"got {shown(v)}")
    return n


def _flag(v, fail):
    if not isinstance(v, bool):
        fail(f"expected true or false, got {shown(v)}")
    return v


LAYER_KEYS = {"params": params_of, "fwd_ms": number(0, 1e6, "ms"), "bwd_ms": number(0, 1e6, "ms")}


def _layers(v, fail):
    """A layer count, or a list of layers {params, fwd_ms, bwd_ms}."""
    if is_int(v):
        return integer(1, MAX_LAYERS)(v, fail)
    if not isinstance(v, list) or not 1 <= len(v) <= MAX_LAYERS:
        fail(f"expected a layer count from 1 to {MAX_LAYERS}, or a list of 1 to {MAX_LAYERS} "
             f"layers each {{params, fwd_ms, bwd_ms}}, got {shown(v)}")
    out = []
    for i, item in enumerate(v):
        where = f"layer {i + 1}"
        if not isinstance(item, dict) or "params" not in item:
            fail(f"{where}: expected a mapping with params and, optionally, fwd_ms and "
                 f"bwd_ms, got {shown(item)}")
        unknown = [k for k in item if k not in LAYER_KEYS]
        if unknown:
            fail(f"{where}: unknown key {shown(unknown[0])}; expected params, fwd_ms, bwd_ms")
        out.append({k: LAYER_KEYS[k](item[k], lambda m, k=k: fail(f"{where}: {k}: {m}"))
                    for k in item})
    return out


PARALLEL_KEYS = {"tp": integer(1, 64), "pp": integer(1, 64), "dp": integer(1, 4096),
                 "micro_batches": integer(1, 64), "activation": size(4, 1 << 30)}
PARALLEL_DEFAULTS = {"micro_batches": 1, "activation": 64 * 1024}


def _parallel(v, fail):
    """A hybrid layout: {tp, pp, dp, micro_batches, activation} (sim/hybrid_step.py)."""
    if not isinstance(v, dict):
        fail(f"expected a mapping {{tp, pp, dp, micro_batches, activation}}, got {shown(v)}")
    unknown = [k for k in v if k not in PARALLEL_KEYS]
    if unknown:
        fail(f"unknown key {shown(unknown[0])}; expected {', '.join(PARALLEL_KEYS)}")
    missing = [k for k in ("tp", "pp", "dp") if k not in v]
    if missing:
        fail(f"{missing[0]} is missing: a layout gives tp, pp and dp")
    out = dict(PARALLEL_DEFAULTS)
    for k, item in v.items():
        out[k] = PARALLEL_KEYS[k](item, lambda m, k=k: fail(f"{k}: {m}"))
    return out


_parallel.json_schema = {"type": "object", "required": ["tp", "pp", "dp"]}
_layers.json_schema = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_LAYERS},
                                 {"type": "array", "minItems": 1, "maxItems": MAX_LAYERS,
                                  "items": {"type": "object", "required": ["params"]}}]}
params_of.json_schema = {"anyOf": [{"type": "number", "minimum": 1, "maximum": MAX_PARAMS},
                                 {"type": "string"}]}
_flag.json_schema = {"type": "boolean"}

STEP_SCHEMA = Section("a training step instead of a size sweep (docs/training.md)", {
    "layers": (described("a layer count, or a list of layers {params, fwd_ms, bwd_ms} "
                         "(default 8)", optional(_layers)), None),
    "params": (described("the model's parameters, split evenly over a layer count "
                         "(default 512K)", optional(params_of)), None),
    "fwd_ms": (described("forward compute per layer, ms (default 50, or from gpu_tflops)",
                         optional(number(0, 1e6, "ms"))), None),
    "bwd_ms": (described("backward compute per layer, ms (default twice fwd_ms)",
                         optional(number(0, 1e6, "ms"))), None),
    "gpu_tflops": (described("a GPU's rate: compute from FLOPs instead of fwd_ms",
                             optional(number(1e-9, 1e6, "TFLOP/s"))), None),
    "tokens": (described("tokens per GPU per step, with gpu_tflops",
                         optional(integer(1, 1 << 40))), None),
    "bucket": (described("gradient bucket size (PyTorch DDP's default is 25M)",
                         size(4, 1 << 30)), 256 * 1024),
    "mode": (described("allreduce (data parallel) or sharded (AllGather + ReduceScatter)",
                       _choice(*MODES)), "allreduce"),
    "overlap": (described("launch each bucket as the backward pass produces it", _flag), True),
    "in_flight": (described("collectives running at once (1: one NCCL stream)",
                            integer(1, 8)), 1),
    "parallel": (described("a hybrid layout instead of pure data parallelism: {tp, pp, dp, "
                           "micro_batches, activation} (docs/training.md)",
                           optional(_parallel)), None),
    "trace": (described("a recorded job's iteration instead of a made-up step: a trace's path, "
                        "or {path, iteration, replicas, ranks_per_server, rank_map} "
                        "(docs/traces.md)", optional(trace_spec)), None),
})
STEP_FLAGS = {"bucket": "--bucket", "overlap": "--overlap", "mode": "--step-mode",
              "in_flight": "--in-flight", "layers": "--layers", "params": "--params",
              "parallel": "--parallel", "trace": "--trace"}


class StepError(ValueError):
    """An impossible step, in one sentence; `key` is the step key at fault."""

    def __init__(self, key: Optional[str], detail: str):
        self.key, self.detail = key, detail
        super().__init__(f"{key}: {detail}" if key else detail)


@dataclass(frozen=True)
class Layer:
    params: int
    fwd_s: float
    bwd_s: float


@dataclass(frozen=True)
class Bucket:
    index: int                   # 0: the first filled, holding the last layers
    layers: Tuple[int, ...]      # layer indices, forward order
    bytes: int                   # gradient (or parameter) bytes


@dataclass
class Plan:
    """What a step does, as tasks the simulator and the agents both run:
    compute in order (each may need collectives finished first, and may
    launch collectives when it ends), collectives launched at the start
    (`initial`), run in launch order `in_flight` at a time."""
    layers: List[Layer]
    buckets: List[Bucket]
    mode: str
    overlap: bool
    in_flight: int
    dtype: str
    compute: List[dict] = field(default_factory=list)     # {name, seconds, needs, releases}
    collectives: List[dict] = field(default_factory=list)  # {id, name, collective, bytes, bucket}
    initial: List[int] = field(default_factory=list)

    @property
    def compute_s(self) -> float:
        return sum(t["seconds"] for t in self.compute)

    @property
    def gradient_bytes(self) -> int:
        return sum(b.bytes for b in self.buckets)


def layers_of(step: dict) -> List[Layer]:
    """The model's layers, compute times given or from FLOPs."""
    given = step.get("layers")
    if isinstance(given, list) and step.get("params") is not None:
        raise StepError("params", "the layers are listed with their own params; give params "
                        "with a layer count only")
    if step.get("gpu_tflops") is not None and step.get("fwd_ms") is not None:
        raise StepError("gpu_tflops", "compute comes from fwd_ms or from gpu_tflops and "
                        "tokens, not both")
    if step.get("gpu_tflops") is not None and step.get("tokens") is None:
        raise StepError("gpu_tflops", "needs tokens (per GPU per step) to count the FLOPs")
    if step.get("tokens") is not None and step.get("gpu_tflops") is None:
        raise StepError("tokens", "counts FLOPs only with gpu_tflops (a GPU's rate); give both, "
                        "or fwd_ms")
    if isinstance(given, list):
        items = given
    else:
        count = given or DEFAULTS["layers"]
        total = step.get("params") or DEFAULTS["params"]
        if total < count:
            raise StepError("params", f"{total:,} parameters cannot fill {count} layers")
        items = [{"params": p} for p in _split(total, count)]
    out = []
    for item in items:
        fwd_ms = item.get("fwd_ms", step.get("fwd_ms"))
        if fwd_ms is None and step.get("gpu_tflops") is not None:
            fwd_ms = 2 * item["params"] * step["tokens"] / (step["gpu_tflops"] * 1e12) * 1e3
        elif fwd_ms is None:
            fwd_ms = DEFAULTS["fwd_ms"]
        bwd_ms = item.get("bwd_ms", step.get("bwd_ms"))
        out.append(Layer(item["params"], fwd_ms / 1e3,
                         (2 * fwd_ms if bwd_ms is None else bwd_ms) / 1e3))
    return out


def _split(total: int, parts: int) -> List[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def make_buckets(layers: List[Layer], bucket_bytes: int, itemsize: int) -> List[Bucket]:
    """DDP's buckets: gradients in backward order (last layer first), a
    bucket closed once it holds `bucket_bytes`; a layer with more gradients
    than a bucket has room for fills several (as its tensors would), all
    ready when its backward pass ends. The lab counts sizes in float32-sized
    units, so the bucket size is rounded up to 4 bytes once, and only the
    last bucket's own rounding can add to the gradients (3 bytes at most)."""
    bucket_bytes = -(-bucket_bytes // TYPE_SIZE) * TYPE_SIZE
    out, current, held = [], set(), 0

    def close():
        out.append(Bucket(len(out), tuple(sorted(current)), -(-held // TYPE_SIZE) * TYPE_SIZE))
    for i in reversed(range(len(layers))):
        left = layers[i].params * itemsize
        current.add(i)
        take = min(left, bucket_bytes - held)           # the current bucket's room
        held, left = held + take, left - take
        if held < bucket_bytes:
            continue
        close()
        whole, held = divmod(left, bucket_bytes)        # then whole buckets of this layer
        first = len(out)
        out.extend([Bucket(first + k, (i,), bucket_bytes) for k in range(whole)])
        current = {i} if held else set()
    if held:
        close()
    return out


def plan_step(step: dict, dtype: str = "float", max_buckets: int = MAX_BUCKETS) -> Plan:
    """The plan of a checked step section (StepError for an impossible one;
    `max_buckets`: None for the planner's models, far beyond a lab's)."""
    layers = layers_of(step)
    total = sum(l.params for l in layers) * datatype(dtype).size
    at_least = -(-total // step["bucket"])            # counted before any is made
    if max_buckets and at_least > max_buckets:
        _too_many(step["bucket"], total, at_least, max_buckets)
    buckets = make_buckets(layers, step["bucket"], datatype(dtype).size)
    if max_buckets and len(buckets) > max_buckets:
        _too_many(step["bucket"], total, len(buckets), max_buckets)
    plan = Plan(layers, buckets, step["mode"], step["overlap"], step["in_flight"],
                datatype(dtype).name)
    _tasks(plan)
    return plan


def _too_many(bucket: int, total: int, count: int, most: int) -> None:
    fix = "raise it" if bucket < 1 << 30 else "fewer parameters"
    raise StepError("bucket", f"{bucket:,} bytes cut the gradients ({total:,} bytes) into "
                    f"{count:,} buckets; at most {most}: {fix}")


def _tasks(plan: Plan) -> None:
    """Compute tasks and collectives (see Plan)."""
    n_layers, sharded = len(plan.layers), plan.mode == "sharded"
    holding: Dict[int, List[int]] = {i: [] for i in range(n_layers)}
    for b in plan.buckets:
        for i in b.layers:
            holding[i].append(b.index)
    reduce_kind = "reducescatter" if sharded else "allreduce"
    grads = {b.index: len(plan.collectives) + k for k, b in enumerate(plan.buckets)}
    plan.collectives = [{"id": grads[b.index], "name": f"bucket {b.index} {reduce_kind}",
                         "collective": reduce_kind, "bytes": b.bytes, "bucket": b.index}
                        for b in plan.buckets]
    gathers = {}
    if sharded:                    # forward order: the bucket holding layer 0 first
        for b in sorted(plan.buckets, key=lambda b: (b.layers[0], -b.index)):
            gathers[b.index] = len(plan.collectives)
            plan.collectives.append({"id": gathers[b.index], "name": f"bucket {b.index} "
                                     "allgather", "collective": "allgather", "bytes": b.bytes,
                                     "bucket": b.index})
        plan.initial = list(gathers.values())
    for i, layer in enumerate(plan.layers):
        needs = []
        if sharded:
            needs = sorted(gathers.values()) if not plan.overlap and i == 0 else (
                [gathers[b] for b in holding[i]] if plan.overlap else [])
        plan.compute.append({"name": f"forward {i}", "kind": "forward", "layer": i,
                             "seconds": layer.fwd_s, "needs": needs, "releases": []})
    for i in reversed(range(n_layers)):             # a bucket is full at its lowest layer
        releases = [grads[b] for b in holding[i]
                    if plan.overlap and min(plan.buckets[b].layers) == i]
        if not plan.overlap and i == 0:
            releases = [grads[x.index] for x in plan.buckets]
        plan.compute.append({"name": f"backward {i}", "kind": "backward", "layer": i,
                             "seconds": plan.layers[i].bwd_s, "needs": [],
                             "releases": releases})


# --- the step's timeline, given each collective's time alone -------------------------

def timeline(plan: Plan, alone: Callable[[dict], float]) -> dict:
    """Run the plan on a fluid model: compute tasks one after another, each
    when its needs are done; collectives in launch order, `in_flight` at a
    time, those running sharing the fabric equally (each at 1/k of its own
    speed when k run: processor sharing). `alone(collective)` is a
    collective's time with the fabric to itself (the simulator's)."""
    work = {c["id"]: alone(c) for c in plan.collectives}
    left = dict(work)
    launch: Dict[int, float] = {i: 0.0 for i in plan.initial}
    queue, active, start, finish = deque(plan.initial), [], {}, {}
    spans, t, k, busy_until = [], 0.0, 0, None
    while k < len(plan.compute) or queue or active:
        while queue and len(active) < plan.in_flight:
            cid = queue.popleft()
            active.append(cid)
            start[cid] = t
        if busy_until is None and k < len(plan.compute) and all(
                n in finish for n in plan.compute[k]["needs"]):
            busy_until = t + plan.compute[k]["seconds"]
            spans.append({**_span(plan.compute[k]), "start": t, "end": busy_until})
        ends = [busy_until] if busy_until is not None else []
        ends += [t + left[c] * len(active) for c in active]
        if not ends:
            raise RuntimeError("the step's plan waits forever")    # a bug, not an input
        t_next = min(ends)
        for c in active:
            left[c] -= (t_next - t) / len(active)
        t = t_next
        for c in [c for c in active if left[c] <= 1e-9 * max(work[c], 1e-9)]:
            active.remove(c)
            finish[c] = t
        if busy_until is not None and busy_until <= t:
            for cid in plan.compute[k]["releases"]:
                launch[cid] = t
                queue.append(cid)
            busy_until, k = None, k + 1
    return summarise(plan, spans, [
        {**_described(c), "launch": launch[c["id"]], "start": start[c["id"]],
         "finish": finish[c["id"]], "alone_s": work[c["id"]]} for c in plan.collectives])


def _span(task: dict) -> dict:
    return {"kind": task["kind"], "layer": task["layer"]}


def _described(c: dict) -> dict:
    return {"id": c["id"], "name": c["name"], "collective": c["collective"],
            "bytes": c["bytes"], "bucket": c["bucket"]}


def union_seconds(spans: List[Tuple[float, float]]) -> float:
    """The time covered by at least one of the spans."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def summarise(plan: Plan, compute: List[dict], collectives: List[dict]) -> dict:
    """One rank's step: times after its start (0)."""
    step_s = max([s["end"] for s in compute] + [c["finish"] for c in collectives])
    compute_s = sum(s["end"] - s["start"] for s in compute)
    comm_s = union_seconds([(c["start"], c["finish"]) for c in collectives])
    exposed = max(0.0, step_s - compute_s)
    return {"step_s": step_s, "compute_s": compute_s, "comm_s": comm_s, "exposed_s": exposed,
            "overlap_efficiency": max(0.0, 1 - exposed / comm_s) if comm_s > 0 else 1.0,
            "compute": compute, "collectives": sorted(collectives, key=lambda c: c["launch"])}


def bounds(plan: Plan, comm_s: float) -> Tuple[float, float]:
    """What a step can take: never less than the larger of its compute and
    its communication; with overlap off, their sum."""
    compute = plan.compute_s
    return (compute + comm_s, compute + comm_s) if not plan.overlap else \
        (max(compute, comm_s), compute + comm_s)
