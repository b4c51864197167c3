"""The layouts worth running: every TP, CP, PP (interleaved or not), DP, EP,
micro-batch, ZeRO stage and recomputation that cuts a model over a GPU
count, those that fit the GPU's memory priced (step.py), the quickest first.

The global batch is the user's, in tokens: each layout runs the nearest
whole number of micro-batches per pipeline to it, and the batch it then
runs is reported beside it; a layout whose batch would then be more than
half as large again or half as small (data-parallel ranks needing more
sequences than there are; interleaving needing micro-batches by the
pipeline's depth) is not one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional

from sim.parallel.layout import Layout, LayoutError, check
from sim.parallel.memory import WORKSPACE_GB, memory
from sim.parallel.model import Model
from sim.parallel.step import step_time
from topologies.hardware import Server

MAX_PIPELINE = 256
CONTEXT = (1, 2, 4, 8, 16, 32)
INTERLEAVE = (1, 2, 4)
MICRO_BATCHES = (1, 2, 4)


@dataclass(frozen=True)
class Found:
    layout: Layout
    figures: dict
    memory: dict


def divisors(n: int, within) -> List[int]:
    return [d for d in within if d <= n and n % d == 0]


def candidates(model: Model, gpus: int, server: Server, batch_tokens: float,
               ep_choices=None) -> Iterator[Layout]:
    """Every layout of `gpus` GPUs the checks (layout.py) let run `model`."""
    seqs = max(1, round(batch_tokens / model.seq))
    tps = divisors(server.gpus, (1, 2, 4, 8, 16, 32, 64, 72))
    eps = ep_choices or divisors(model.experts, (1, 2, 4, 8, 16, 32, 64, 128, 256))
    for tp in tps:
        for cp in divisors(gpus // tp if gpus % tp == 0 else 0, CONTEXT):
            rest = gpus // (tp * cp)
            for pp in divisors(rest, range(1, min(model.layers, MAX_PIPELINE) + 1)):
                dp = rest // pp
                yield from _more(model, server, tp, cp, pp, dp, seqs, eps)


def _more(model, server, tp, cp, pp, dp, seqs, eps) -> Iterator[Layout]:
    for vp in (INTERLEAVE if pp > 1 else (1,)):
        for mb in MICRO_BATCHES:
            if dp * mb > seqs:
                continue                 # more sequences in flight than the batch holds
            m = max(1, round(seqs / (dp * mb)))
            if vp > 1:
                m = max(pp, pp * round(m / pp))
            if abs(m * dp * mb - seqs) > seqs / 2:
                continue                 # the batch would be another one
            for ep in eps:
                for zero in (1, 3):
                    for rc in ("selective", "full"):
                        lay = Layout(tp, pp, dp, cp, ep, vp, mb, m * dp * mb, zero, rc)
                        try:
                            check(lay, model, server.gpus)
                        except LayoutError:
                            continue
                        yield lay


def search(model: Model, gpus: int, server: Server, efficiency: float, batch_tokens: float,
           share: float = 1.0, keep: int = 5, workspace_gb: float = WORKSPACE_GB,
           ep_skew: float = 1.0) -> dict:
    """The `keep` quickest layouts that fit, and how many were tried and
    refused for memory."""
    tried = refused = 0
    found: List[Found] = []
    limit = server.gpu.memory_gbytes * 1e9
    smallest: Optional[dict] = None
    for lay in candidates(model, gpus, server, batch_tokens):
        tried += 1
        mem = memory(model, lay, workspace_gb)
        if mem["total"] > limit:
            refused += 1
            if smallest is None or mem["total"] < smallest["total"]:
                smallest = dict(mem, layout=lay.name())
            continue
        figures = step_time(model, lay, server, efficiency, share, ep_skew=ep_skew)
        found.append(Found(lay, figures, mem))
    found.sort(key=lambda f: f.figures["step_s"] / f.figures["tokens_per_step"])
    return {"tried": tried, "refused_memory": refused, "best": found[:keep],
            "smallest_refused": smallest}
