"""A binary tree AllReduce rooted at rank 0: reduce up, then broadcast down."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class Tree(Algorithm):
    name, order = "tree", 3
    collectives = ("allreduce",)
    nccl = "tree"

    def build(self, collective, n, count, root, local):
        return schedules.tree_allreduce(n, count)

    def operations(self, collective, n):
        return 8 * n
