"""What one GPU holds for a layout: weights, gradients, optimizer states,
activations and a workspace, against the GPU's memory.

Mixed-precision Adam as Megatron-LM keeps it: 16-bit weights (2 bytes a
parameter), 32-bit gradients (4) and 32-bit master weights, momentum and
variance (12). ZeRO stage 1 (Megatron's distributed optimizer) shards the
12 over the data-parallel ranks, stage 2 the gradients too, stage 3 (FSDP)
the weights too (Rajbhandari et al., "ZeRO", 2020, section 5).

Activations: the model's bytes per token and layer (model.py), split over
TP (with sequence parallelism every part is) and CP, for the micro-batches
the first stage has in flight in 1F1B: min(m, p), times 1 + (p-1)/(p v)
interleaved (Korthikanti et al. 2022, section 4.2.3). Full recomputation
keeps only each layer's input (2 h per token) and one layer's whole set;
selective recomputation drops the attention scores. The last stage also
holds the logits in 32 bits.
"""

from __future__ import annotations

from typing import Dict

from sim.parallel.layout import Layout, LayoutError, stage_layers
from sim.parallel.model import BYTES, Model

GB = 1e9
WORKSPACE_GB = 4.0        # CUDA context, NCCL buffers, allocator fragmentation


def params_per_gpu(model: Model, lay: Layout) -> float:
    """Parameters the busiest GPU holds before any ZeRO sharding: its
    stage's layers (experts split over EP) and, on the first stage, the
    embedding (the last stage's output layer, if untied, is as large)."""
    most = max(stage_layers(model.layers, lay.pp))
    experts = model.experts * model.expert_params
    per_layer = model.layer_params - experts + experts / lay.ep
    edge = model.vocab * model.hidden
    first = stage_layers(model.layers, lay.pp)[0] * per_layer + edge
    return max(most * per_layer, first) / lay.tp


def activation_bytes_per_layer(model: Model, lay: Layout) -> float:
    """Bytes one layer keeps for one micro-batch on one GPU."""
    tokens = lay.micro_batch * model.seq / lay.cp
    parts = model.activation_bytes(scores=lay.recompute == "none")
    if "scores" in parts:
        parts["scores"] /= lay.cp                  # each rank's queries only
    return tokens * sum(parts.values()) / lay.tp


def in_flight(lay: Layout) -> float:
    """Micro-batches whose activations the first stage holds at once."""
    held = min(lay.micro_batches, lay.pp)
    if lay.vp > 1:
        held *= 1 + (lay.pp - 1) / (lay.pp * lay.vp)
    return held


def memory(model: Model, lay: Layout, workspace_gb: float = WORKSPACE_GB) -> Dict[str, float]:
    """Bytes per GPU by kind, and their total."""
    p = params_per_gpu(model, lay)
    dp = lay.dp * lay.cp                           # the ranks a replica's state spreads over
    weights = BYTES * p / (dp if lay.zero >= 3 else 1)
    grads = 4 * p / (dp if lay.zero >= 2 else 1)
    optimizer = 12 * p / (dp if lay.zero >= 1 else 1)
    layers = max(stage_layers(model.layers, lay.pp))
    per_layer = activation_bytes_per_layer(model, lay)
    tokens = lay.micro_batch * model.seq / lay.cp
    if lay.recompute == "full":
        acts = in_flight(lay) * layers * tokens * BYTES * model.hidden / lay.tp + per_layer
    else:
        acts = in_flight(lay) * layers * per_layer
    logits = tokens * model.vocab * 4 / lay.tp
    out = {"weights": weights, "gradients": grads, "optimizer": optimizer,
           "activations": acts + logits, "workspace": workspace_gb * GB}
    out["total"] = sum(out.values())
    return out


def check_fits(model: Model, lay: Layout, gpu_name: str, gpu_gbytes: float,
               workspace_gb: float = WORKSPACE_GB) -> Dict[str, float]:
    """The memory per GPU, or LayoutError saying by how much it does not fit."""
    m = memory(model, lay, workspace_gb)
    if m["total"] > gpu_gbytes * GB:
        parts = ", ".join(f"{k} {v / GB:.1f}" for k, v in m.items() if k != "total")
        raise LayoutError(f"{lay.name()} does not fit: {model.name} needs "
                          f"{m['total'] / GB:.1f} GB per GPU ({parts}), "
                          f"{m['total'] / GB - gpu_gbytes:.1f} GB more than the {gpu_name}'s "
                          f"{gpu_gbytes:g} GB")
    return m
