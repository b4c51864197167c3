"""What a Clos delivers to NCCL's channels: the share of a NIC's rate its
rail-matched rings get once ECMP has hashed their flows onto uplinks.

NCCL's channels leave each server through the NIC of their rail and reach
the same rail of the next server (graph.py), so the network carries one
ring per rail; on a rail-optimized Clos those stay on their rail's leaf, on
a Clos whose leaves take whole servers they cross the spines between
leaves. Each ring's transfers are flows hashed per switch (ECMP), as many
per NIC pair as `connections` (NCCL's channels on that NIC x queue pairs per
connection, NCCL_IB_QPS_PER_CONNECTION; consecutive messages go round the
connections). Where two flows share an uplink each runs at half the rate,
and a ring runs at the pace of its slowest edge.

`share` is the inter-server part of the hierarchical AllReduce (sim/phases.py)
timed on the real Clos against the same Clos with unlimited switch-to-switch
capacity, bandwidth alone (no latency: that is the tuner's, per step), the
median over `seeds` ECMP draws: 1 where nothing collides. The routing
decides: ECMP hashes `connections` flows per NIC pair (NCCL's channels on
that NIC x queue pairs per connection), D-mod-K places each destination by
number, spraying and adaptive routing split every flow evenly over all
paths, a single path pins each destination leaf.
The tuner (tuner.py, `Cluster.fabric_share`) caps each channel's NIC
bandwidth by it.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Callable

from collectives.metrics import TYPE_SIZE
from sim.clos import ClosNetwork, ClosShape
from sim.nccl import graph
from sim.phases import allreduce_phases, phase_seconds
from topologies.hardware import Server

IDEAL_BPS = 1e30
PROBE_ELEMENTS = 1 << 26          # any size: the share is a ratio of bandwidth-bound times


def connections_per_nic(hw: Server, servers: int) -> int:
    """NCCL's connections to a peer through one NIC: its execution channels
    over the NICs (16 on 8 NICs of 400G H100: 2)."""
    topo = graph.Topology(hw, servers, hw.gpus)
    ring = graph.ring(topo)
    return max(1, graph.execution_channels(topo, ring) // max(1, min(hw.nics, hw.gpus)))


def share(shape: ClosShape, connections: int = 1, seeds: int = 5) -> float:
    """The median share of a NIC's rate the rail rings get (see the module
    docstring); 1 on one server. Bandwidth alone: no latency enters it."""
    if shape.servers < 2:
        return 1.0
    phases = _inter_phases(shape.n, shape.gpus, connections)
    ideal = ideal_seconds(shape, phases)
    draws = [ideal / phase_seconds(ClosNetwork(shape, seed), phases, with_latency=False)
             for seed in range(seeds if shape.routing == "hash" else 1)]
    return min(1.0, statistics.median(draws))


def share_on(network: Callable[[int], object], ranks: int, gpus: int, nics: int,
             nic_bps: float, connections: int = 1, seeds: int = 5) -> float:
    """`share` on any network the phases can walk (`network(seed)`: its
    `path(a, b, flow)` between rank numbers and its `links`), such as a fabric
    file's (a leaf-spine, rail-optimized or fat-tree one), `ranks` in servers
    of `gpus` in order, `nics` NICs of `nic_bps` each. Where GPUs share a NIC
    the rings that cross it divide its rate, the ideal time growing as much."""
    if ranks <= gpus:
        return 1.0
    phases = _inter_phases(ranks, gpus, connections)
    ideal = sum(p.steps * p.elements * TYPE_SIZE * 8 / nic_bps for p in phases) * (
        gpus / max(1, min(nics, gpus)))
    draws = [ideal / phase_seconds(network(seed), phases, with_latency=False)
             for seed in range(seeds)]
    return min(1.0, statistics.median(draws))


def _inter_phases(ranks: int, gpus: int, connections: int) -> list:
    """The inter-server phases of the hierarchical AllReduce: one ring per
    rail, the rings NCCL's channels make between servers (with one GPU a
    server, the ring itself)."""
    every = allreduce_phases("hierarchical", ranks, PROBE_ELEMENTS, gpus, channels=connections)
    return every if gpus == 1 else [p for p in every if p.name.startswith("inter")]


RING_PATH_SAMPLE = 4096          # edges enough for a mean: at 200,000 GPUs a path is ~10 us


def ring_path_us(network, ranks: int, gpus: int) -> float:
    """The mean latency, in microseconds, of the hops NCCL's rail rings make
    between servers (rank k of a server to rank k of the next) on `network`
    (its hops' `delay_s`: links, switches, the transport's message cost),
    over at most RING_PATH_SAMPLE of them spread evenly."""
    servers = ranks // gpus
    if servers < 2:
        return 0.0
    stride = max(1, servers * gpus // RING_PATH_SAMPLE)
    edges = [(s * gpus + k, (s + 1) % servers * gpus + k)
             for s in range(servers) for k in range(gpus)][::stride]
    return sum(sum(h.delay_s for h in network.path(a, b)) for a, b in edges) / len(edges) * 1e6


def ideal_seconds(shape: ClosShape, phases) -> float:
    """The rings' time where nothing collides. With a NIC per GPU each
    transfer has its NICs to itself, and a ring's step takes a block at the
    NIC's rate (phases.ring_seconds of alike edges, without latency); with
    GPUs sharing a NIC, the simulator's own figure on an unlimited fabric."""
    if shape.nics < shape.gpus or shape.nic_bps > shape.intra_bps:
        return phase_seconds(ClosNetwork(replace(shape, fabric_bps=IDEAL_BPS)), phases)
    return sum(p.steps * p.elements * TYPE_SIZE * 8 / shape.nic_bps for p in phases)
