"""Rabenseifner's AllReduce: reduce-scatter by recursive halving, all-gather by
recursive doubling, over the largest power of two of the ranks (the others
hand their buffers to a neighbour first and get the result back last)."""

from __future__ import annotations

import math

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class Rhd(Algorithm):
    name, order = "rhd", 2
    collectives = ("allreduce",)
    folds = True

    def build(self, collective, n, count, root, local):
        return schedules.rhd_allreduce(n, count)

    def operations(self, collective, n):
        log = max(1, math.ceil(math.log2(n)))
        return 4 * n * log + 4 * n
