"""Hierarchical AllReduce, laid out by server: reduce-scatter inside each
server, a ring AllReduce across servers on each GPU's rail, all-gather
inside each server."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class Hierarchical(Algorithm):
    name, order = "hierarchical", 4
    collectives = ("allreduce",)
    by_server = True
    rings = "by-server"

    def build(self, collective, n, count, root, local):
        return schedules.hierarchical_allreduce(n, count, local)

    def phase(self, step, n, local):
        return schedules.hierarchical_phase(step, n, local) or self.name
