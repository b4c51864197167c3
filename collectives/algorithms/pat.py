"""PAT (NCCL's Parallel Aggregated Trees) AllGather and ReduceScatter:
farthest first, one dimension of the ranks a step."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class Pat(Algorithm):
    name, order = "pat", 7
    collectives = ("allgather", "reducescatter")
    nccl = "pat"

    def build(self, collective, n, count, root, local):
        return {"allgather": schedules.pat_allgather,
                "reducescatter": schedules.pat_reducescatter}[collective](n, count)
