"""The least time a collective can take through the NICs: the bytes each
server must send or receive between servers, at the rate its NICs carry
(what the fabric delivers of it). NCCL's search tries per-channel speeds
from a table whose slowest entry is 0.12 GB/s (about 1 Gbit/s): on a
slower NIC, as the lab's 20 Mbit/s links, its tuner's figure would be
faster than the wire, and this is the floor a price is held to.

Per server, for m servers each of `nics` NICs at R bytes/s (times the
fabric's share), S the buffer (AllGather's and ReduceScatter's whole one):

- AllReduce: 2(m-1)/m S / (nics R), the ring's bytes, which no algorithm
  without reduction in the switches beats (Patarasuk and Yuan, 2009); with
  the switches reducing (CollNet, SHARP), S / (nics R): each server sends
  its buffer once and receives the result once;
- AllGather and ReduceScatter: (m-1)/m S / (nics R);
- others: 0 (not bounded here).
"""

from __future__ import annotations

from sim.nccl.tuner import Cluster


def nic_minimum_s(where: Cluster, collective: str, nbytes: float) -> float:
    """Seconds the bytes between servers need at least on `where`."""
    m = where.topo.nodes
    if m <= 1 or nbytes <= 0:
        return 0.0
    server = where.topo.server
    rate = server.nics * server.nic_gbytes * 1e9 * where.fabric_share
    if collective == "allreduce":
        share = 1.0 if where.collnet else 2 * (m - 1) / m
    elif collective in ("allgather", "reducescatter"):
        share = (m - 1) / m
    else:
        return 0.0
    return share * nbytes / rate
