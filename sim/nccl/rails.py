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

NCCL's AllToAll makes another pattern, so it gets a share of its own
(`alltoall_share_on`, `Cluster.alltoall_share`): every server sends to every
other, and with PXN (where each GPU has its NIC, as alltoall.py takes it)
a GPU hands its part for GPU k of another server to GPU k of its own over
NVLink, so across the network NIC k of each server sends to NIC k of every
other server: rail to rail, staying on a rail leaf within a rail-optimized
unit and crossing the spines everywhere else. Without PXN (GPUs sharing
NICs) each GPU sends to every GPU of the other servers through its own
NIC. NCCL's p2p schedule (init.cc) visits the other servers in a fixed
order of offsets, server a sending to a + d, and keeps as many peers in
flight as its channels serve (8 a channel, enqueue.cc), so a window of
offsets runs at once; every transfer of a window starts together and shares
the links max-min fairly, and the window ends with its last (a fabric file's
or a Clos's routing places them, as for the rings: hashed ECMP sees as many
flows per pair of NICs as the rings have, `connections`). The share is the
ideal time (each NIC busy at its rate) over that, bandwidth alone, the
median over `seeds` draws.
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
P2P_PER_CHANNEL = 8               # peers a p2p channel serves at once (device.h's
                                  # NCCL_MAX_DEV_WORK_P2P_PER_BATCH)
ALLTOALL_WINDOWS = 4              # windows priced at most, spread over the schedule, and
ALLTOALL_TRANSFERS = 1 << 18      # as many as these transfers hold (one at least, whole)
PROBE_BITS = 8.0 * (1 << 20)      # any size, as PROBE_ELEMENTS


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


def p2p_peers(hw: Server, servers: int) -> int:
    """The peers NCCL's point-to-point kernel serves at once: its channels
    (the execution channels, to a power of two) x P2P_PER_CHANNEL, one channel
    a peer once the peers outnumber the channels (enqueue.cc); 128 on
    8 x 400G H100."""
    topo = graph.Topology(hw, servers, hw.gpus)
    channels = graph.execution_channels(topo, graph.ring(topo))
    return (1 << (channels - 1).bit_length()) * P2P_PER_CHANNEL


def server_offsets(servers: int) -> list:
    """The order NCCL's p2p schedule visits the other servers in (init.cc):
    server a sends to a + d, d running (x^2 + x)/2 modulo the power of two
    at or above `servers`, those below `servers` kept, 0 (its own) left out:
    1, 3, 6, 10, 15, 5, 12, ... on 16."""
    size = 1 << max(0, servers - 1).bit_length()
    out, d = [], 0
    for step in range(1, size + 1):
        if 0 < d < servers:
            out.append(d)
        d = (d + step) & (size - 1)
    return out


def alltoall_share_on(network: Callable[[int], object], ranks: int, gpus: int, nics: int,
                      nic_bps: float, peers: int, connections: int = 1, seeds: int = 5) -> float:
    """The median share of a NIC's rate NCCL's AllToAll gets between servers
    on `network` (as `share_on` takes it), `peers` in flight per GPU
    (`p2p_peers`), `connections` flows per pair of NICs as the rings have
    (see the module docstring); 1 on one server. Bandwidth alone: no latency
    enters it."""
    servers = ranks // gpus
    if servers < 2:
        return 1.0
    windows = _alltoall_windows(servers, gpus, nics >= gpus, connections, peers)
    ideal = sum(len(w) for w in windows) * PROBE_BITS / (servers * max(1, min(nics, gpus))) / \
        nic_bps
    draws = []
    for seed in range(seeds):
        net = network(seed)
        split = getattr(net, "splits", False)
        draws.append(ideal / sum(_window_seconds(net, w, split) for w in windows))
    return min(1.0, statistics.median(draws))


def _alltoall_windows(servers: int, gpus: int, pxn: bool, flows: int, peers: int) -> list:
    """The transfers (src rank, dst rank, flow) of the windows of NCCL's
    schedule priced: consecutive offsets, as many as `peers` cover (a GPU's
    peers a server at a time), a window whole however large (how many flows
    share the links is what hashing's collisions depend on); at most
    ALLTOALL_WINDOWS of them, spread over the schedule, and as many as
    ALLTOALL_TRANSFERS hold."""
    size = max(1, peers // gpus)
    offsets = server_offsets(servers)
    chunks = [offsets[i:i + size] for i in range(0, len(offsets), size)]
    per_window = size * servers * gpus * (1 if pxn else gpus) * flows
    keep = min(len(chunks), ALLTOALL_WINDOWS, max(1, ALLTOALL_TRANSFERS // per_window))
    chunks = [chunks[i * len(chunks) // keep] for i in range(keep)]
    return [[(a * gpus + k, (a + d) % servers * gpus + (k if pxn else j), f)
             for d in chunk for a in range(servers) for k in range(gpus)
             for j in ((k,) if pxn else range(gpus)) for f in range(flows)]
            for chunk in chunks]


def _window_seconds(network, window: list, split: bool) -> float:
    """A window's transfers (alike, started together) sharing the links
    max-min fairly, as transfer_times runs them: when the last ends. That is
    the load of the link most loaded for its rate over that rate: it fills
    first, at the least share of all; flows ending never lower the least
    share, so nothing runs slower, and that link's flows, which fill it, run
    at exactly that share to the end. This takes each flow's links once
    instead of solving the shares again at every end."""
    load: dict = {}
    for a, b, f in window:
        links = network.even_split(a, b) if split else {h.intf: 1.0 for h in
                                                         network.path(a, b, f)}
        for intf, part in links.items():
            load[intf] = load.get(intf, 0.0) + part * PROBE_BITS
    return max(bits / network.links[intf].rate_bps for intf, bits in load.items())
