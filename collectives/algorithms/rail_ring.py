"""NCCL's multi-channel ring on rail-optimized servers: one ring AllReduce
per rail (NIC) over all ranks, each on its share of the buffer, laid out
by server."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class RailRing(Algorithm):
    name, order = "rail-ring", 5
    collectives = ("allreduce",)
    by_server = True
    nccl = "ring"

    def build(self, collective, n, count, root, local):
        return schedules.rail_ring_allreduce(n, count, local)

    def phase(self, step, n, local):
        return schedules.rail_ring_phase(step, n, local) or self.name
