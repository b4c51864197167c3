"""One alpha-beta model at two speeds: the planner's closed forms
(planner/costmodel.py, for clusters too large to build a schedule for) give
the same time as the cost read off the schedule that runs (sim/alphabeta.py),
for ring and hierarchical AllReduce."""

import pytest

from planner.costmodel import hierarchical_allreduce_seconds, ring_allreduce_seconds
from sim.alphabeta import Costs, predict

ALPHA, BETA, BETA_INTRA = 5e-6, 8 / 50e9, 1 / 450e9


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 16, 33])
def test_the_closed_form_ring_is_the_schedules_cost(n):
    size = n * 4 * 1000
    assert ring_allreduce_seconds(n, size, ALPHA, BETA) == pytest.approx(
        predict("allreduce", "ring", n, size // 4, Costs(ALPHA, BETA)), rel=1e-12)


@pytest.mark.parametrize("nodes, gpus", [(2, 2), (2, 4), (3, 4), (4, 8), (5, 2)])
def test_the_closed_form_hierarchical_is_the_schedules_cost(nodes, gpus):
    size = nodes * gpus * 4 * 100
    closed = hierarchical_allreduce_seconds(nodes, gpus, size, ALPHA, BETA_INTRA, ALPHA, BETA)
    assert closed == pytest.approx(predict(
        "allreduce", "hierarchical", nodes * gpus, size // 4, Costs(ALPHA, BETA, BETA_INTRA), 0,
        gpus), rel=1e-12)
