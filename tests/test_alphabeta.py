"""One alpha-beta model at two speeds: the closed forms (sim/closed_form.py,
for clusters too large to build a schedule for) against the cost read off
the schedule that runs (sim/alphabeta.py). The ring is the same time. The
hierarchical AllReduce's phases, one after the other as the lab's schedule
has them, sum to the schedule's cost; pipelined as NCCL runs it, the closed
form pays every phase's latency and only the larger byte term of the
server's two phases together and the inter-server one."""

import pytest

from sim.alphabeta import Costs, predict
from sim.closed_form import (hierarchical_allreduce_seconds, hierarchical_allreduce_terms,
                             ring_allreduce_seconds)

ALPHA, BETA, BETA_INTRA = 5e-6, 8 / 50e9, 1 / 450e9


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 16, 33])
def test_the_closed_form_ring_is_the_schedules_cost(n):
    size = n * 4 * 1000
    assert ring_allreduce_seconds(n, size, ALPHA, BETA) == pytest.approx(
        predict("allreduce", "ring", n, size // 4, Costs(ALPHA, BETA)), rel=1e-12)


SHAPES = [(2, 2), (2, 4), (3, 4), (4, 8), (5, 2)]


def schedule_cost(nodes, gpus, size):
    return predict("allreduce", "hierarchical", nodes * gpus, size // 4,
                   Costs(ALPHA, BETA, BETA_INTRA), 0, gpus)


@pytest.mark.parametrize("nodes, gpus", SHAPES)
def test_the_hierarchical_phases_in_turn_are_the_schedules_cost(nodes, gpus):
    size = nodes * gpus * 4 * 100
    terms = hierarchical_allreduce_terms(nodes, gpus, size, ALPHA, BETA_INTRA, ALPHA, BETA)
    in_turn = sum(t.latency_s + t.bytes_s for t in terms)
    assert in_turn == pytest.approx(schedule_cost(nodes, gpus, size), rel=1e-12)


@pytest.mark.parametrize("nodes, gpus", SHAPES)
def test_the_pipelined_hierarchical_hides_the_lesser_byte_term(nodes, gpus):
    """By hand: S bytes, g GPUs a server, m servers; in-server bytes
    2(g-1)/g S / 450e9, inter-server 2(m-1)/m (S/g) x 8 / 50e9; the schedule
    pays both, the pipelined closed form the larger."""
    size = nodes * gpus * 4 * 100
    inside = 2 * (gpus - 1) / gpus * size * BETA_INTRA
    across = 2 * (nodes - 1) / nodes * size / gpus * BETA
    closed = hierarchical_allreduce_seconds(nodes, gpus, size, ALPHA, BETA_INTRA, ALPHA, BETA)
    assert closed == pytest.approx(schedule_cost(nodes, gpus, size) - min(inside, across),
                                   rel=1e-12)
