"""A training step of a parallel layout, priced: compute from the model's
shape at the GPU's peak times an achieved efficiency, the memory-bound
work at the HBM's bandwidth, every collective as NCCL would run it on the
servers (sim/nccl/), the 1F1B pipeline and its bubble; MFU and HFU as the
published runs report them.

Per micro-batch, on the busiest pipeline stage (its layers, and on the last
stage the output layer):

- **compute**: forward FLOPs (model.py) / TP / CP, backward twice that,
  plus what recomputation runs again (full: the forward; selective: the
  attention scores), at `peak x efficiency`. `efficiency` is the one
  figure set from a published run (bench/training_bench.py), reused for
  every other;
- **memory-bound work** (norms, softmax, dropout, activations): the bytes
  a layer keeps for the backward pass written once forward and read and
  written backward, at the HBM's bandwidth: the simple roofline's second
  roof;
- **TP**: an AllReduce of the micro-batch's activations (tokens x hidden x
  2 bytes) after attention and after the MLP, forward and backward (with
  sequence parallelism a ReduceScatter and an AllGather of the same bytes),
  two more with full recomputation, on the server's NVLink, exposed
  (`tp_overlap` hides a share);
- **CP**: keys and values gathered forward, gathered again and their
  gradients reduce-scattered backward, per layer;
- **EP**: two all-to-alls forward (tokens to their experts and back) and
  two backward per MoE layer, the busiest rank's share `ep_skew` x the mean;
- **PP**: the activations sent to the next stage and their gradients back
  (tokens x hidden x 2 / TP: Megatron's scatter-gather), per virtual stage.

The step: m micro-batches plus the bubble, (m + (p-1)/v) x the micro-batch
time; then the data-parallel gradient reduction (ZeRO 1-2: ReduceScatter
and AllGather, otherwise AllReduce; ZeRO 3 also gathers the parameters for
every micro-batch's forward and backward) where the last backward pass does
not hide it; then the optimizer's update, memory-bound (30 bytes read and
written per parameter it owns).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Dict

from sim import nccl
from sim.nccl.minimum import nic_minimum_s
from sim.parallel.layout import Layout, check, stage_layers
from sim.parallel.memory import params_per_gpu
from sim.parallel.model import BYTES, Model
from topologies.hardware import Server

P2P_LATENCY_S = 20e-6      # one send/recv across servers: NCCL's network step, a few hops
OPTIMIZER_BYTES = 30       # Adam: read fp32 weight, gradient, m, v; write weight, m, v, bf16 copy


@lru_cache(maxsize=100_000)
def collective_seconds(server: Server, collective: str, nbytes: float, ranks: int,
                       stride: int, share: float = 1.0) -> float:
    """`collective` of `nbytes` over `ranks` GPUs whose neighbours are
    `stride` GPUs apart (Megatron's rank order): as many share a server as
    fit, each group with its share of the server's NICs; never faster than
    those NICs carry the bytes between servers (sim/nccl/minimum.py)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    here = max(1, min(ranks, server.gpus // stride)) if stride < server.gpus else 1
    nodes = ranks // here
    sub = replace(server, gpus=here, nics=max(1, server.nics * here // server.gpus))
    where = nccl.cluster(sub, nodes, here, fabric_share=share)
    return max(nccl.predict(where, collective, nbytes).chosen.time_us * 1e-6,
               nic_minimum_s(where, collective, nbytes))


def alltoall_seconds(server: Server, nbytes: float, ranks: int, stride: int,
                     share: float = 1.0) -> float:
    """Each rank sends `nbytes` spread evenly over the group: the peers in its
    server over NVLink, the others through its share of the NICs."""
    if ranks <= 1:
        return 0.0
    here = max(1, min(ranks, server.gpus // stride)) if stride < server.gpus else 1
    nvlink = server.gpu.nvlink_gbytes * 1e9
    nic = server.nic_gbytes * 1e9 * server.nics / server.gpus * share
    local = nbytes * (here - 1) / ranks / nvlink
    remote = nbytes * (ranks - here) / ranks / nic if ranks > here else 0.0
    return max(local, remote) + P2P_LATENCY_S * (1 if ranks == here else 2)


def micro_batch(model: Model, lay: Layout, server: Server, efficiency: float,
                layers: int, last: bool, share: float = 1.0, tp_overlap: float = 0.0,
                ep_skew: float = 1.0) -> Dict[str, float]:
    """Seconds one micro-batch spends on a stage of `layers` layers, by kind."""
    gpu = server.gpu
    rate = gpu.bf16_tflops * 1e12 * efficiency
    tokens = lay.micro_batch * model.seq / lay.cp
    split = lay.tp
    layer = model.layer_flops(tokens) / split
    if model.experts > 1:
        expert = tokens * 2 * model.top_k * model.expert_params / split
        layer += (ep_skew - 1) * expert
    extra = {"none": 0.0, "selective": model.attention_core_flops(tokens) / split,
             "full": layer}[lay.recompute]
    flops = layers * (3 * layer + extra)
    if last:
        flops += 3 * model.logits_flops(tokens) / split
    hbm = gpu.hbm_tbytes * 1e12
    traffic = tokens * sum(model.activation_bytes(scores=True).values()) / split
    out = {"compute": flops / rate, "memory": layers * 3 * traffic / hbm}
    act = tokens * model.hidden * BYTES
    tp_calls = 4 + (2 if lay.recompute == "full" else 0)
    out["tp"] = layers * tp_calls * (1 - tp_overlap) * collective_seconds(
        server, "allreduce", act, lay.tp, 1)
    kv = tokens * 2 * model.kv_dim * BYTES * lay.cp
    out["cp"] = layers * (2 * collective_seconds(server, "allgather", kv, lay.cp, lay.tp, share)
                          + collective_seconds(server, "reducescatter", kv, lay.cp, lay.tp,
                                               share))
    routed = tokens * model.top_k * model.hidden * BYTES * ep_skew
    out["ep"] = (layers * 4 * alltoall_seconds(server, routed, lay.ep, lay.tp * lay.cp, share)
                 if model.experts > 1 else 0.0)
    send = act / lay.tp
    nic = server.nic_gbytes * 1e9 * server.nics / server.gpus * share
    out["pp"] = (2 * lay.vp * (P2P_LATENCY_S + send / nic)) if lay.pp > 1 else 0.0
    return out


def data_parallel_seconds(model: Model, lay: Layout, server: Server,
                          share: float = 1.0) -> Dict[str, float]:
    """The gradient reduction once a step, and ZeRO-3's parameter gathers per
    micro-batch (forward and backward), over DP x CP ranks."""
    p = params_per_gpu(model, lay)
    ranks, stride = lay.dp * lay.cp, lay.tp
    grads = p * BYTES
    if lay.zero >= 1:
        reduce = (collective_seconds(server, "reducescatter", grads, ranks, stride, share)
                  + collective_seconds(server, "allgather", grads, ranks, stride, share))
    else:
        reduce = collective_seconds(server, "allreduce", grads, ranks, stride, share)
    gathers = (2 * collective_seconds(server, "allgather", grads, ranks, stride, share)
               if lay.zero >= 3 else 0.0)
    return {"reduce": reduce, "gather_per_micro_batch": gathers}


def step_time(model: Model, lay: Layout, server: Server, efficiency: float,
              share: float = 1.0, overlap_dp: bool = True, tp_overlap: float = 0.0,
              ep_skew: float = 1.0) -> Dict[str, float]:
    """The step's seconds by kind, its MFU and HFU, tokens per second."""
    check(lay, model, server.gpus)
    counts = stage_layers(model.layers, lay.pp)
    stages = [(counts[0], lay.pp == 1), (max(counts), False), (counts[-1], True)]
    per = [micro_batch(model, lay, server, efficiency, n, last, share, tp_overlap, ep_skew)
           for n, last in stages]
    t = max(per, key=lambda d: sum(d.values()))
    t_mb = sum(t.values())
    m = lay.micro_batches
    dp = data_parallel_seconds(model, lay, server, share)
    backward = 2 / 3 * t["compute"]
    zero3 = max(0.0, dp["gather_per_micro_batch"] - t["compute"]) * m
    exposed_dp = max(0.0, dp["reduce"] - (backward if overlap_dp else 0.0)) + zero3
    owned = params_per_gpu(model, lay) / (lay.dp * lay.cp if lay.zero >= 1 else 1)
    optimizer = owned * OPTIMIZER_BYTES / (server.gpu.hbm_tbytes * 1e12)
    out = {kind: m * t[kind] for kind in t}
    out["bubble"] = (lay.pp - 1) / lay.vp * t_mb
    out["dp"] = exposed_dp
    out["optimizer"] = optimizer
    step = sum(out.values())
    return _figures(model, lay, server, out, step, dp["reduce"])


def hardware_flops_per_token(model: Model, recompute: str) -> float:
    """FLOPs the GPUs run per token, recomputation included (HFU counts these)."""
    extra = {"none": 0.0, "selective": model.layers * model.attention_core_flops(1),
             "full": model.layers * model.layer_flops(1)}[recompute]
    return model.flops_per_token() + extra


def _figures(model, lay, server, parts, step, dp_reduce) -> Dict[str, float]:
    tokens = lay.batch * model.seq
    peak = server.gpu.bf16_tflops * 1e12 * lay.gpus
    return {"step_s": step, **{f"{k}_s": v for k, v in parts.items()},
            "dp_reduce_s": dp_reduce, "tokens_per_step": tokens,
            "tokens_per_s": tokens / step,
            "mfu": model.flops_per_token() * tokens / step / peak,
            "hfu": hardware_flops_per_token(model, lay.recompute) * tokens / step / peak,
            "bubble_share": parts["bubble"] / step}
