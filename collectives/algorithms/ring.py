"""Ring: NCCL's ring for AllReduce (reduce-scatter then all-gather around the
ring), AllGather and ReduceScatter; the chain from the root for Broadcast
and Reduce; each rank to the next for SendRecv."""

from __future__ import annotations

from collectives import schedules
from collectives.algorithms import Algorithm, register


@register
class Ring(Algorithm):
    name, order = "ring", 1
    collectives = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "sendrecv")
    nccl = "ring"
    rings = "flat"

    def build(self, collective, n, count, root, local):
        if collective == "broadcast":
            return schedules.chain_broadcast(n, count, root)
        if collective == "reduce":
            return schedules.chain_reduce(n, count, root)
        return {"allreduce": schedules.ring_allreduce, "allgather": schedules.ring_allgather,
                "reducescatter": schedules.ring_reducescatter,
                "sendrecv": schedules.ring_sendrecv}[collective](n, count)

    def operations(self, collective, n):
        if collective in ("broadcast", "reduce", "sendrecv"):    # a chain, a message a rank
            return 8 * n
        return super().operations(collective, n)
