#!/usr/bin/env python3
"""How fast a recorded training job replays in the simulator: issue 38's
"a 64-rank trace of one iteration with 10,000 events a rank replays in under
60 s on 2 cores". No network, no root.

    scripts/lab bench trace             # or: .venv/bin/python -m bench.trace_bench
    .venv/bin/python -m bench.trace_bench [--ranks 64 --events 10000 --keep DIR --json OUT]

The trace is made here, one NCCL Kineto trace (`rank-N.json.gz`) a rank, in
the form the PyTorch profiler writes for a GPU job (as the real one-rank
trace tests/data/traces/hta-nccl-resnet): distributedInfo (rank, world size,
backend nccl, the rank's process groups), one ProfilerStep#N span on the
training thread, each kernel launched by a cudaLaunchKernel (correlated to
it) inside its operator, the compute kernels on one stream and the NCCL
kernels on one stream per communicator, each NCCL kernel carrying its
record_param_comms arguments (collective, dtype, in and out elements, group
size, process group name, description and ranks).

The job is a GPT layer stack trained like Megatron-LM: tensor parallel over
the 8 GPUs of a server with sequence parallelism (per layer, an all-gather
before and a reduce-scatter after attention and the MLP, forward and
backward: 8 a layer; hidden 4096, 4096 tokens, bf16: 4 MiB in, 32 MiB out),
the vocabulary-parallel loss's 3 small all-reduces, data parallel across the
servers with a distributed optimizer (the gradients reduce-scattered in
40M-element buckets as the backward pass finishes them, the parameters
all-gathered back after the step) and the gradient norm's all-reduce over
all ranks. An iteration of about 0.8 s. Events a rank: each kernel is 3
(its operator on the CPU, the cudaLaunchKernel inside it, the kernel), plus
the ProfilerStep; the file's 2 metadata rows are not counted, and it has no
flow arrows (the profiler's ac2g links, which the reader does not use). The
layers' compute kernels are as many as make `--events`.

Then, timed in one run: (a) reading the folder (traces/reading.py
`read_trace`), (b) the step program (sim/trace_step.py `program_of`), (c)
each collective priced on the fabric, event by event (`fabric_seconds`, as
the command line prices them), (d) the walk and the critical path
(`times`), and (e) the whole command line, wall clock:
`run_topology.py bench/trace-64.yaml --engine sim --trace DIR --json`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
FABRIC = REPO / "bench" / "trace-64.yaml"
BOUND_S = 60.0
TP = 8
HIDDEN, TOKENS = 4096, 4096
LAYERS = 32
BUCKET = 40_000_000            # elements: Megatron's gradient bucket
FWD_MS, BWD_MS = 7.5, 15.0     # compute a layer
NVLINK_GBS, NIC_GBS = 360.0, 45.0      # what a ring moves a rank per second (bus bandwidth)
BASE_US = 4458676416788.066    # the first rank's step start, on the trace's clock
EVENTS_PER_OP = 3              # operator, cudaLaunchKernel, kernel
AHEAD = 4                      # the host launches at most this many kernels ahead of the GPU

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
KERNELS = [  # (kernel, its operator, share of the layer's compute)
    (GEMM, "aten::mm", 10.0),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>",
     "FlashAttnFunc", 8.0),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
     "aten::gelu", 1.0),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
     "aten::native_layer_norm", 1.0),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>",
     "aten::add", 0.5),
    ("void apply_rotary_kernel<c10::BFloat16>", "RotaryEmbedding", 0.5),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>",
     "aten::copy_", 0.3),
]
NCCL = {"_allgather_base": "AllGather_RING_LL128", "_reduce_scatter_base":
        "ReduceScatter_Sum_bf16_RING_LL128", "allreduce": "AllReduce_Sum_bf16_RING_LL"}


@dataclass
class Op:
    """One kernel of the iteration, as every rank runs it."""
    name: str
    operator: str
    us: float = 0.0                    # compute: how long it runs
    comm: str = ""                     # NCCL: "tp", "dp" or "world"
    collective: str = ""
    elems: Tuple[int, int] = (0, 0)    # in, out
    blocking: bool = True              # compute waits for it before going on
    wait_dp: bool = False              # compute: waits for the data-parallel stream first


@dataclass
class Placed:
    """An op on one rank's clocks (microseconds from its step start)."""
    op: Op
    launch: float
    kernel: float
    dur: float


@dataclass
class Job:
    ranks: int
    events: int
    per_layer: int = 0                 # compute kernels of a layer's forward pass
    ops: List[Op] = field(default_factory=list)


def layer_kernels(n: int, ms: float) -> List[Op]:
    """`n` compute kernels taking `ms` in all, the layer's mix."""
    picked = [KERNELS[i % len(KERNELS)] for i in range(n)]
    total = sum(share for _, _, share in picked)
    return [Op(name, operator, ms * 1e3 * share / total) for name, operator, share in picked]


def tp_comm(name: str, blocking: bool = True) -> Op:
    shard = TOKENS // TP * HIDDEN
    elems = (shard, shard * TP) if name == "_allgather_base" else (shard * TP, shard)
    return Op(f"ncclDevKernel_{NCCL[name]}(ncclDevComm*, unsigned long, ncclWork*)",
              "record_param_comms", comm="tp", collective=name, elems=elems, blocking=blocking)


def layer(n: int, backward: bool) -> List[Op]:
    """A layer's pass: per half (attention, MLP) an all-gather of the sequence
    shards, its compute, a reduce-scatter back to shards."""
    out: List[Op] = []
    ms = (BWD_MS if backward else FWD_MS) / 2
    for _half in range(2):
        kernels = layer_kernels(n, ms)
        out += [tp_comm("_allgather_base")] + kernels[:-1] + [tp_comm("_reduce_scatter_base"),
                                                               kernels[-1]]
    return out


def dp_comm(name: str, elems: int) -> Op:
    io = (elems, elems // TP) if name == "_reduce_scatter_base" else (elems // TP, elems)
    return Op(f"ncclDevKernel_{NCCL[name]}(ncclDevComm*, unsigned long, ncclWork*)",
              "record_param_comms", comm="dp", collective=name, elems=io, blocking=False)


def iteration(per_layer: int) -> List[Op]:
    """Every rank's kernels in launch order (see the module)."""
    params_per_layer = 12 * HIDDEN * HIDDEN // TP
    small = Op(f"ncclDevKernel_{NCCL['allreduce']}(ncclDevComm*, unsigned long, ncclWork*)",
               "record_param_comms", comm="tp", collective="allreduce", elems=(TOKENS, TOKENS))
    ops = layer_kernels(4, 1.0)                                  # embedding
    for _ in range(LAYERS):
        ops += layer(per_layer, backward=False)
    ops += layer_kernels(6, 4.0)[:3] + [small, small, small] + layer_kernels(3, 2.0)   # loss
    pending = 0
    for _ in range(LAYERS):
        ops += layer(2 * per_layer, backward=True)
        pending += params_per_layer
        while pending >= BUCKET:
            ops.append(dp_comm("_reduce_scatter_base", BUCKET))
            pending -= BUCKET
    buckets = sum(1 for o in ops if o.comm == "dp")
    norm = Op(small.name, "record_param_comms", comm="world", collective="allreduce",
              elems=(1, 1))
    optimizer = layer_kernels(8, 6.0)
    optimizer[0].wait_dp = True
    ops += optimizer[:4] + [norm] + optimizer[4:]
    ops += [dp_comm("_allgather_base", BUCKET) for _ in range(buckets)]
    return ops


def sized(ranks: int, events: int) -> Job:
    """The job with as many compute kernels a layer as make about `events` a rank."""
    fixed = len(iteration(1)) - 3 * LAYERS * 2     # everything but the layers' compute
    per_layer = max(1, round((events / EVENTS_PER_OP - fixed) / (6 * LAYERS)))
    return Job(ranks, events, per_layer, iteration(per_layer))


def groups(ranks: int) -> Dict[str, Dict[int, List[int]]]:
    """Per communicator kind, each rank's group (global ranks, in order)."""
    tp = {r: [r // TP * TP + i for i in range(TP)] for r in range(ranks)}
    dp = {r: list(range(r % TP, ranks, TP)) for r in range(ranks)}
    return {"tp": tp, "dp": dp, "world": {r: list(range(ranks)) for r in range(ranks)}}


def pg_names(ranks: int) -> Dict[Tuple[str, int], Tuple[str, str]]:
    """(kind, first rank of the group) -> (process group name, description)."""
    names = {("world", 0): ("0", "default_pg")}
    for k, first in enumerate(range(0, ranks, TP)):
        names[("tp", first)] = (str(1 + k), f"TENSOR_MODEL_PARALLEL_GROUP_{k}")
    for k in range(TP):
        names[("dp", k)] = (str(1 + ranks // TP + k), f"DATA_PARALLEL_GROUP_{k}")
    return names


def comm_us(op: Op, size: int) -> float:
    """How long the collective runs once its last member arrived."""
    moved = max(op.elems) * 2 * (size - 1) / size
    gbs = NVLINK_GBS if op.comm == "tp" else NIC_GBS
    return 15.0 + moved / (gbs * 1e3)


class Clocks:
    """Every rank's host, compute stream and one stream per communicator,
    run op by op (each op on every rank at once, as a synchronous job)."""

    def __init__(self, ranks: int, seed: int = 0):
        rng = random.Random(seed)
        self.speed = [1 + rng.uniform(-0.03, 0.03) for _ in range(ranks)]   # each GPU's own
        self.host = [rng.uniform(0, 20) for _ in range(ranks)]
        self.gpu = [h + 30 for h in self.host]
        self.stream = {kind: [0.0] * ranks for kind in ("tp", "dp", "world")}
        self.starts: List[List[float]] = [[] for _ in range(ranks)]
        self.rng = rng

    def launch(self, r: int) -> float:
        """When rank r's host launches its next kernel: a few microseconds
        after the last, and no more than AHEAD kernels ahead of the GPU."""
        gap = self.rng.uniform(4, 12)
        behind = self.starts[r][-AHEAD] if len(self.starts[r]) >= AHEAD else 0.0
        self.host[r] = max(self.host[r] + gap, behind) + 8
        return self.host[r] - 8

    def compute(self, op: Op, r: int, at: float) -> Placed:
        if op.wait_dp:
            self.gpu[r] = max(self.gpu[r], self.stream["dp"][r])
        start = max(self.gpu[r], at + 6)
        dur = op.us * self.speed[r]
        self.gpu[r] = start + dur
        self.starts[r].append(start)
        return Placed(op, at, start, dur)

    def collective(self, op: Op, members: List[int], at: Dict[int, float]) -> Dict[int, Placed]:
        """The op on each member: its kernel starts once the rank's compute
        before it is done, and ends when the last member's has and the
        data moved."""
        stream = self.stream[op.comm]
        arrive = {r: max(self.gpu[r], at[r] + 6, stream[r]) for r in members}
        end = max(arrive.values()) + comm_us(op, len(members))
        out = {}
        for r in members:
            stream[r] = end
            if op.blocking:
                self.gpu[r] = end
            self.starts[r].append(arrive[r])
            out[r] = Placed(op, at[r], arrive[r], end - arrive[r])
        return out


def timelines(job: Job) -> List[List[Placed]]:
    """Each rank's ops placed on its clocks."""
    clocks, by_kind = Clocks(job.ranks), groups(job.ranks)
    placed: List[List[Placed]] = [[] for _ in range(job.ranks)]
    for op in job.ops:
        at = {r: clocks.launch(r) for r in range(job.ranks)}
        if not op.comm:
            for r in range(job.ranks):
                placed[r].append(clocks.compute(op, r, at[r]))
            continue
        done = set()
        for r in range(job.ranks):
            if r not in done:
                members = by_kind[op.comm][r]
                for m, p in clocks.collective(op, members, at).items():
                    placed[m].append(p)
                done.update(members)
    return placed


STREAMS = {"": 7, "tp": 20, "dp": 24, "world": 28}


def comm_args(op: Op, members: List[int], pg: Tuple[str, str]) -> dict:
    """record_param_comms' arguments, as the profiler copies them onto the kernel."""
    return {"Collective name": op.collective, "In msg nelems": op.elems[0],
            "Out msg nelems": op.elems[1], "Group size": len(members), "dtype": "BFloat16",
            "In split size": "[]", "Out split size": "[]", "Process Group Name": pg[0],
            "Process Group Description": pg[1], "Process Group Ranks": str(members)}


def rank_events(r: int, placed: List[Placed], job: Job, step: int) -> Tuple[list, int]:
    """Rank r's traceEvents and how many of them count (see the module)."""
    pid, device, t0 = 100_000 + r, r % TP, BASE_US
    by_kind, names = groups(job.ranks), pg_names(job.ranks)
    events = [{"name": "process_name", "ph": "M", "ts": t0, "pid": pid, "tid": 0,
               "args": {"name": "python3.10"}},
              {"name": "process_labels", "ph": "M", "ts": t0, "pid": device, "tid": 0,
               "args": {"labels": f"GPU {device}"}}]
    for i, p in enumerate(placed):
        op, corr, ext = p.op, 60_000 + i, 12_000 + i
        args: dict = {}
        if op.comm:
            members = by_kind[op.comm][r]
            args = comm_args(op, members, names[(op.comm, members[0] if op.comm != "dp"
                                                 else members[0] % TP)])
        events += [
            {"ph": "X", "cat": "cpu_op", "name": op.operator, "pid": pid, "tid": pid,
             "ts": round(t0 + p.launch - 1, 3), "dur": 8.0,
             "args": {"External id": ext, "Record function id": ext, **args}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid,
             "tid": pid, "ts": round(t0 + p.launch, 3), "dur": 6.0,
             "args": {"External id": ext, "cbid": 211, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": op.name, "pid": device,
             "tid": STREAMS[op.comm], "ts": round(t0 + p.kernel, 3), "dur": round(p.dur, 3),
             "args": {"External id": ext, "queued": 0, "device": device, "context": 1,
                      "stream": STREAMS[op.comm], "correlation": corr, "grid": [132, 1, 1],
                      "block": [256, 1, 1], **args}}]
    first = min(p.launch for p in placed) - 20
    last = max(p.kernel + p.dur for p in placed) + 30        # the host synchronizes at the end
    events.append({"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{step}", "pid": pid,
                   "tid": pid, "ts": round(t0 + first, 3), "dur": round(last - first, 3),
                   "args": {"External id": 1, "Record function id": 1}})
    return events, EVENTS_PER_OP * len(placed) + 1


def metadata(r: int, job: Job) -> dict:
    by_kind, names = groups(job.ranks), pg_names(job.ranks)
    own = [("world", 0), ("tp", by_kind["tp"][r][0]), ("dp", r % TP)]
    kinds = {"world": "world", "tp": "tp", "dp": "dp"}
    config = [{"pg_name": names[key][0], "pg_desc": names[key][1],
               "backend_config": "cuda:nccl", "pg_size": len(by_kind[kinds[key[0]]][r]),
               "ranks": by_kind[kinds[key[0]]][r]} for key in own]
    return {"schemaVersion": 1, "distributedInfo": {
        "backend": "nccl", "rank": r, "world_size": job.ranks, "pg_count": len(config),
        "pg_config": config, "nccl_version": "2.21.5"},
        "displayTimeUnit": "ms", "baseTimeNanoseconds": 1711964646000000000}


def write_trace(job: Job, folder: Path, step: int = 5) -> int:
    """The job's trace, a rank-N.json.gz a rank; the events counted a rank."""
    folder.mkdir(parents=True, exist_ok=True)
    counted = 0
    for r, placed in enumerate(timelines(job)):
        events, counted = rank_events(r, placed, job, step)
        doc = {**metadata(r, job), "traceEvents": events}
        with gzip.open(folder / f"rank-{r}.json.gz", "wt", encoding="utf-8") as f:
            json.dump(doc, f)
    return counted


def timed(what: str, figures: Dict[str, float], fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    figures[what] = time.perf_counter() - start
    print(f"  {what:<44} {figures[what]:8.2f} s", flush=True)
    return out


def stages(folder: Path, figures: Dict[str, float]) -> dict:
    """(a) to (d), each as the command line runs it."""
    from collectives.datatypes import datatype
    from runs.experiment import Experiment, piece_bytes_for
    from runs.trace_replay import placement
    from sim import trace_step
    from sim.simulator import Simulator
    from topologies.fabric import load_fabric
    from traces.reading import read_trace
    fabric = load_fabric(FABRIC, emulate=False)
    spec = {"path": str(folder), "replicas": 1}
    exp = Experiment(engine="sim", step={"trace": spec})
    itemsize = datatype(exp.datatype).size
    trace = timed("(a) read the folder (read_trace)", figures, read_trace, folder)
    p = timed("(b) the step program (program_of)", figures, trace_step.program_of, trace, 1,
              itemsize)
    ranks = placement(fabric, spec, p.world)
    piece = max(1, piece_bytes_for(exp, fabric.policy) // itemsize)
    seconds = timed("(c) priced on the fabric (fabric_seconds)", figures,
                    trace_step.fabric_seconds, p, Simulator.on_fabric(fabric, ranks), piece,
                    exp.channels)
    replay = timed("(d) walk and critical path (times)", figures, trace_step.times, p,
                   lambda c: seconds[c["id"]])
    waves = {c["wave"] for c in p.collectives}
    return {"ranks": trace.world, "collectives": len(p.collectives), "waves": len(waves),
            "comms_per_rank": max(len(rt.comms) for rt in trace.ranks.values()),
            "compute_per_rank": max(len(rt.compute) for rt in trace.ranks.values()),
            "measured_iteration_s": trace.iteration_s, "replayed_step_s": replay.step_s}


def end_to_end(folder: Path, figures: Dict[str, float]) -> dict:
    """(e) the command line, in a process of its own."""
    with tempfile.TemporaryDirectory(prefix="trace-bench-results-") as results:
        cmd = [sys.executable, str(REPO / "run_topology.py"), str(FABRIC), "--engine", "sim",
               "--trace", str(folder), "--json", "--results", results]
        out = timed("(e) the command line, end to end (wall clock)", figures,
                    lambda: subprocess.run(cmd, capture_output=True, text=True, cwd=REPO))
    if out.returncode != 0:
        raise SystemExit(f"trace_bench: the command line failed: {out.stderr.strip()[-400:]}")
    doc = json.loads(out.stdout)
    return {"cli_step_s": doc["step"]["predicted"]["trace"]["step_s"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=64, help="ranks (a multiple of 8; default 64)")
    ap.add_argument("--events", type=int, default=10_000, help="events a rank (default 10,000)")
    ap.add_argument("--keep", type=Path, help="write the trace here and keep it")
    ap.add_argument("--json", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)
    if args.ranks < TP or args.ranks % TP or args.ranks > 64:
        ap.error(f"--ranks: a multiple of {TP} up to 64 (the fabric's GPUs), got {args.ranks}")
    job = sized(args.ranks, args.events)
    with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp:
        folder = args.keep or Path(tmp) / "trace"
        start = time.perf_counter()
        events = write_trace(job, folder)
        print(f"# {args.ranks} ranks (TP {TP} x DP {args.ranks // TP}), {LAYERS} layers of "
              f"{6 * job.per_layer} compute kernels, {events:,} events a rank; trace written "
              f"in {time.perf_counter() - start:.1f} s to {folder}", flush=True)
        figures: Dict[str, float] = {}
        facts = stages(folder, figures)
        facts.update(end_to_end(folder, figures))
    report(facts, figures, events)
    if args.json:
        args.json.write_text(json.dumps({"events_per_rank": events, **facts,
                                         "seconds": figures}, indent=2) + "\n")
    return 0


def report(facts: dict, figures: Dict[str, float], events: int) -> None:
    e2e = figures["(e) the command line, end to end (wall clock)"]
    print(f"# events a rank {events:,}; per rank {facts['compute_per_rank']:,} compute spans "
          f"and {facts['comms_per_rank']} collectives; {facts['collectives']:,} collectives in "
          f"all, in {facts['waves']} waves")
    print(f"# iteration: measured {facts['measured_iteration_s']:.3f} s, replayed on the fabric "
          f"{facts['replayed_step_s']:.3f} s (the command line: {facts['cli_step_s']:.3f} s)")
    verdict = "under" if e2e < BOUND_S else "OVER"
    print(f"# end to end {e2e:.1f} s: {verdict} the {BOUND_S:.0f} s bound")


if __name__ == "__main__":
    sys.exit(main())
