"""NCCL's Tree AllReduce on multi-GPU servers: a chain inside each server,
the double binary tree across servers, two channels per rail."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class NcclTree(Algorithm):
    name, order = "nccl-tree", 6
    collectives = ("allreduce",)
    by_server = True
    nccl = "tree"

    def build(self, collective, n, count, root, local):
        return schedules.nccl_tree_allreduce(n, count, local)

    def operations(self, collective, n):
        return 8 * n

    def phase(self, step, n, local):
        return schedules.nccl_tree_phase(step, n, local) or self.name
