"""Pairwise AllToAll: at step s each rank sends to rank + s and receives
from rank - s."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class Pairwise(Algorithm):
    name, order = "pairwise", 8
    collectives = ("alltoall",)

    def build(self, collective, n, count, root, local):
        return schedules.pairwise_alltoall(n, count)
