"""Collectives as NCCL runs them: its topology search's channels, its
algorithms and protocols, and its tuner's choice per size, on GPU servers
as they are sold (topologies/hardware.py).

- graph.py: the graphs NCCL's search ends with: channels per algorithm and
  what each carries inside a server and through a NIC (rings rail-matched,
  one channel per NIC across servers);
- tuner.py: latency and bandwidth of every algorithm and protocol, and the
  quickest NCCL allows;
- overrides.py: NCCL_ALGO / NCCL_PROTO strings;
- rails.py: the share of a NIC's rate a Clos delivers to the rail rings,
  once its routing has placed their flows, and to AllToAll's rail-to-rail
  pattern (the flow-level simulator's figures);
- alltoall.py: AllToAll, NCCL's point-to-point path (no tuner entry);
- minimum.py: the least time the bytes between servers take at the NICs'
  rate, the floor a price on links slower than NCCL's tables is held to.

`predict` is the one call the planner and the benchmarks make.
"""

from __future__ import annotations

from typing import Optional

from topologies.hardware import Server
from sim.nccl import alltoall
from sim.nccl.graph import Topology
from sim.nccl.overrides import enabled
from sim.nccl.tuner import Choice, Cluster, choose


# the algorithms whose reduction a switch carries out (the NVSwitch's NVLink
# SHARP, the fabric's SHARP): end hosts cannot replay them
IN_SWITCH = ("collnet_direct", "collnet_chain", "nvls", "nvls_tree")


def cluster(server: Server, nodes: int, ppn: Optional[int] = None, **options) -> Cluster:
    """`nodes` servers of `server`, `ppn` ranks each (default all GPUs);
    `options`: Cluster's (collnet, min_channels, fabric_share, alltoall_share, ...)."""
    ppn = server.gpus if ppn is None else ppn
    if not 1 <= ppn <= server.gpus:
        raise ValueError(f"ranks per server must be from 1 to {server.gpus} on "
                         f"{server.name}, got {ppn}")
    if nodes < 1:
        raise ValueError(f"servers must be at least 1, got {nodes}")
    return Cluster(Topology(server, nodes, ppn), **options)


def predict(where: Cluster, collective: str, nbytes: float, algo: Optional[str] = None,
            proto: Optional[str] = None) -> Choice:
    """What NCCL runs for `collective` of `nbytes` on `where`, and its time;
    `algo` / `proto` as NCCL_ALGO / NCCL_PROTO (AllToAll, point to point,
    takes neither)."""
    if collective == "alltoall":
        e = alltoall.price(where, nbytes)
        return Choice(collective, nbytes, e, [e])
    return choose(where, collective, nbytes, enabled(algo, proto)[collective])
