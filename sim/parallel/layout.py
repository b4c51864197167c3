"""A parallel layout: how a model's training is cut over GPUs, and whether
the cuts fit the model and the servers.

Megatron-LM's order, innermost first: tensor parallel (TP) across the GPUs
of a server (each layer's matrices split, an AllReduce, or with sequence
parallelism a ReduceScatter and an AllGather, per attention and MLP block),
context parallel (CP: the sequence split, keys and values gathered),
data parallel (DP: a replica per group, gradients reduced; `zero` shards
the optimizer (1), the gradients too (2), the parameters too (3, FSDP)),
pipeline parallel (PP: layers in stages on different servers, micro-batches
flowing through them in the 1F1B schedule; `vp` > 1 interleaves that many
virtual stages per GPU). Expert parallel (EP) splits a MoE layer's experts
over `ep` of the data-parallel ranks. GPUs = tp x cp x dp x pp.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.parallel.model import Model

RECOMPUTE = ("none", "selective", "full")


class LayoutError(ValueError):
    """A layout that cannot run: one sentence saying why."""


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    vp: int = 1                  # virtual stages per GPU (interleaved 1F1B)
    micro_batch: int = 1         # sequences per micro-batch
    global_batch: int = 0        # sequences per step (0: one micro-batch per DP rank)
    zero: int = 1                # 0 none, 1 optimizer, 2 + gradients, 3 + parameters
    recompute: str = "selective"

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def batch(self) -> int:
        return self.global_batch or self.dp * self.micro_batch

    @property
    def micro_batches(self) -> int:
        """Micro-batches each pipeline runs per step (gradient accumulation)."""
        return self.batch // (self.dp * self.micro_batch)

    def name(self) -> str:
        parts = [f"TP{self.tp}", f"PP{self.pp}" + (f"x{self.vp}" if self.vp > 1 else ""),
                 f"DP{self.dp}"]
        parts += [f"CP{self.cp}"] if self.cp > 1 else []
        parts += [f"EP{self.ep}"] if self.ep > 1 else []
        return " ".join(parts)


def check(layout: Layout, model: Model, gpus_per_server: int) -> None:
    """Raise LayoutError when the layout cannot run `model` on servers of
    `gpus_per_server` GPUs."""
    lay = layout
    for key in ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch"):
        if not isinstance(getattr(lay, key), int) or getattr(lay, key) < 1:
            raise LayoutError(f"{key} must be a whole number of at least 1, got "
                              f"{getattr(lay, key)!r}")
    if lay.recompute not in RECOMPUTE:
        raise LayoutError(f"recompute must be one of {', '.join(RECOMPUTE)}, got "
                          f"{lay.recompute!r}")
    if lay.zero not in (0, 1, 2, 3):
        raise LayoutError(f"zero must be 0, 1, 2 or 3, got {lay.zero!r}")
    if lay.tp > gpus_per_server:
        raise LayoutError(f"TP {lay.tp} spans more than a server's {gpus_per_server} GPUs: "
                          "tensor parallelism stays inside the scale-up domain")
    if gpus_per_server % lay.tp:
        raise LayoutError(f"TP {lay.tp} does not divide a server's {gpus_per_server} GPUs")
    if model.heads % lay.tp or model.kv_heads % lay.tp and lay.tp % model.kv_heads:
        raise LayoutError(f"TP {lay.tp} does not divide {model.name}'s {model.heads} heads "
                          f"({model.kv_heads} key/value heads)")
    if model.layers < lay.pp * lay.vp:
        raise LayoutError(f"PP {lay.pp} x {lay.vp} virtual stages need at least "
                          f"{lay.pp * lay.vp} layers; {model.name} has {model.layers}")
    if model.seq % lay.cp:
        raise LayoutError(f"CP {lay.cp} does not divide the sequence of {model.seq} tokens")
    _check_experts(lay, model)
    _check_batch(lay)


def _check_experts(lay: Layout, model: Model) -> None:
    if lay.ep > 1 and model.experts == 1:
        raise LayoutError(f"EP {lay.ep}: {model.name} is dense, it has no experts to split")
    if model.experts % lay.ep:
        raise LayoutError(f"EP {lay.ep} does not divide {model.name}'s {model.experts} experts")
    if (lay.dp * lay.cp) % lay.ep:
        raise LayoutError(f"EP {lay.ep} must divide DP x CP ({lay.dp * lay.cp}): the experts "
                          "are split over data-parallel ranks")


def _check_batch(lay: Layout) -> None:
    if lay.batch % (lay.dp * lay.micro_batch):
        raise LayoutError(f"a global batch of {lay.batch} sequences does not split into "
                          f"DP {lay.dp} x micro-batches of {lay.micro_batch}")
    if lay.vp > 1 and lay.micro_batches % lay.pp:
        raise LayoutError(f"interleaved stages need the {lay.micro_batches} micro-batches "
                          f"to be a multiple of PP {lay.pp}")


def pipeline_bubble(pp: int, micro_batches: int, vp: int = 1) -> float:
    """The share of a 1F1B step the pipeline stands idle: (p-1)/(m+p-1),
    with v interleaved stages (p-1)/(v m + p-1) (Narayanan et al., SC21,
    section 2.2)."""
    return (pp - 1) / (vp * micro_batches + pp - 1)


def stage_layers(layers: int, pp: int) -> list:
    """Layers per pipeline stage: even where they divide, else the first and
    last stages (which also hold the embedding and the output layer) one
    fewer, as Llama 3's 126 layers ran on 16 stages."""
    base, extra = divmod(layers, pp)
    if not extra:
        return [base] * pp
    counts = [base] * pp
    middle = list(range(1, pp - 1)) or list(range(pp))
    for i in range(extra):
        counts[middle[i % len(middle)]] += 1
    return counts
