"""AllReduce priced in closed form: the alpha-beta time of a ring and of a
hierarchical AllReduce from the cluster's shape alone, for clusters too
large to build a schedule for (the planner's 200,000 GPUs). The planner
prices with these and nothing of its own; sim/alphabeta.py reads the same
model off a schedule that is built (tests/test_alphabeta.py holds the two
together), and sim/nccl/ prices what NCCL itself would run.

A dependent step costs alpha seconds of latency, a byte beta seconds on the
link it crosses (beta = 8 / (Gbit/s x 1e9 x efficiency)).

Ring over n ranks, S bytes (Thakur et al. 2005, Patarasuk & Yuan 2009)::

    2(n-1) alpha + 2(n-1)/n S beta

Hierarchical over m servers of g GPUs, in three phases:

- ReduceScatter inside each server: latency ``(g-1) a_intra``, bytes
  ``(g-1)/g S b_intra``;
- a ring AllReduce per rail between servers on S/g: latency
  ``2(m-1) a_inter``, bytes ``2(m-1)/m (S/g) b_inter``;
- AllGather inside each server: as the ReduceScatter.

NCCL runs its hierarchical algorithms (NVLSTree, Tree, CollNetChain)
pipelined: the buffer moves in chunks, and while one chunk crosses between
servers the next is being reduced inside them and the one before broadcast
back. Every chunk still passes every phase, so the latencies add; the
phases move their bytes at once, so the byte terms overlap, except where
two phases share links. The ReduceScatter and the AllGather inside a server
both send on every GPU's NVLink port, so their byte terms add, and the
inter-server phase, on the NICs, overlaps them::

    T = 2 (g-1) a_intra + 2(m-1) a_inter
        + max(2 (g-1)/g S b_intra, 2(m-1)/m (S/g) b_inter)

That is how NCCL's tuner prices NVLSTree (sim/nccl/tuner.py, from
tuning.cc): the latencies summed, the bandwidth the lesser of the
in-server stage's (reduce and broadcast together) and the inter-server
stage's. Taking the largest of the three phases' byte terms instead would
let the two in-server phases share a port at full rate each: on one server
it would price an AllReduce at half the bandwidth term of a ring, below the
2(g-1)/g S b lower bound for a collective without in-network reduction. As
in NCCL's tuner there is no pipeline-fill term (one chunk per phase).

With m = 1 the formula is the ring over the server's g GPUs, with g = 1 the
ring over the m servers, as it must be.

`hierarchical_allreduce_terms` gives the phases' own terms; summed phase by
phase they are what sim/alphabeta.py `predict` reads off the lab's
hierarchical schedule, whose phases run one after the other.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Tuple

from toolkit.errors import shown

MAX_RANKS, MAX_GPUS_PER_NODE = 10 ** 12, 10 ** 6


class Term(NamedTuple):
    """One phase of a collective: its name, latency (alpha x its dependent
    steps) and byte term (beta x the bytes a rank moves), seconds."""
    name: str
    latency_s: float
    bytes_s: float


def ring_allreduce_seconds(n, size_bytes, alpha_s, beta_s_per_byte) -> float:
    """Ring AllReduce of `size_bytes` over `n` ranks: 2(n-1)a + 2(n-1)/n * S * b."""
    n = _whole("n", n, MAX_RANKS)
    S = _non_negative("size_bytes", size_bytes)
    a = _non_negative("alpha_s", alpha_s)
    b = _non_negative("beta_s_per_byte", beta_s_per_byte)
    return 2 * (n - 1) * a + 2 * (n - 1) / n * S * b


def hierarchical_allreduce_terms(nodes, gpus_per_node, size_bytes, alpha_intra, beta_intra,
                                 alpha_inter, beta_inter) -> Tuple[Term, Term, Term]:
    """The three phases of a hierarchical AllReduce over `nodes` servers of
    `gpus_per_node` GPUs (see the module docstring), each on its own."""
    m = _whole("nodes", nodes, MAX_RANKS)
    g = _whole("gpus_per_node", gpus_per_node, MAX_GPUS_PER_NODE)
    S = _non_negative("size_bytes", size_bytes)
    a_intra = _non_negative("alpha_intra", alpha_intra)
    b_intra = _non_negative("beta_intra", beta_intra)
    a_inter = _non_negative("alpha_inter", alpha_inter)
    b_inter = _non_negative("beta_inter", beta_inter)
    intra = ((g - 1) * a_intra, (g - 1) / g * S * b_intra)
    return (Term("intra-node reduce-scatter", *intra),
            Term("inter-node allreduce", 2 * (m - 1) * a_inter, 2 * (m - 1) / m * S / g * b_inter),
            Term("intra-node allgather", *intra))


def hierarchical_allreduce_seconds(nodes, gpus_per_node, size_bytes, alpha_intra, beta_intra,
                                   alpha_inter, beta_inter) -> float:
    """Hierarchical AllReduce pipelined as NCCL runs it: every phase's
    latency, plus the larger of the in-server byte terms (ReduceScatter and
    AllGather, on the same NVLink ports) and the inter-server one::

        2(g-1) a_intra + 2(m-1) a_inter
        + max(2(g-1)/g S b_intra, 2(m-1)/m (S/g) b_inter)
    """
    scatter, across, gather = hierarchical_allreduce_terms(
        nodes, gpus_per_node, size_bytes, alpha_intra, beta_intra, alpha_inter, beta_inter)
    latency = scatter.latency_s + across.latency_s + gather.latency_s
    return latency + max(scatter.bytes_s + gather.bytes_s, across.bytes_s)


def _whole(name, value, hi) -> int:
    """An int from 1 to `hi`; a float is accepted when it is whole."""
    what = "a whole number of at least 1"
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and not value.is_integer()) or not 1 <= value <= hi:
        raise ValueError(f"{name} must be {what}, got {shown(value)}")
    return int(value)


def _non_negative(name, value):
    """A finite number of at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a number of at least 0, got {shown(value)}")
    return value
