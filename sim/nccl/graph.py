"""NCCL's topology search, by the graphs it ends with: for each algorithm,
how many channels a communicator gets and what one channel carries, in GB/s,
between GPUs of a server (`bw_intra`) and through a NIC (`bw_inter`).

The search (NCCL's src/graph/search.cc) tries per-channel speeds from a
table, fastest first, and keeps the pattern whose channels x speed is
largest while every link it crosses has the room; this module takes its
results from the same counting, not by searching:

- **Ring and Tree** on one server: channels over NVLink, each at a speed of
  the intra-node table, as many as the GPU's NVLink holds (8 H100: 6 at 60).
  On several servers: one channel per NIC at the fastest inter-node speed
  the NIC and the GPU's PCIe path allow (8 x 400G H100: 8 at 48 GB/s), each
  ring entering and leaving a server through the NIC of its rail, so every
  NIC works. Then NCCL duplicates the channels at half the speed when a
  channel is fast (connect.cc; not on Hopper and later below 50 GB/s with
  more than 4 channels).
- **NVLS / NVLSTree**: a head GPU per channel, one per GPU of the server up
  to 16; a head pulls twice, so (channels + 1) x speed fit a GPU's NVLink.
  On one server, the graph's inter figure is raised to twice the intra one
  (at most the table's top); on several, one head per NIC.
- **CollNet** (the switches reduce, SHARP): a channel per NIC.
- **PAT** runs on the ring's graph.

Tree's search on two servers raises its intra speed (a chain over NVLink),
modelled as the fastest intra speed whose channels fit the NVLink.

On a full mesh (AMD's Infinity Fabric, `Gpu.mesh`) a ring's hop is one link
to the next GPU, so no channel runs faster than one link; RCCL's search
lays its rings over distinct links (8 GPUs, 7 links each: 7 rings of one
link), with RCCL's own speed table (its search.cc under HIP). The NVLink
domain is NCCL's node whatever its size: on an NVL72 rack (MNNVL) the
search runs over the 72 GPUs of the clique, and across cliques over NICs.

The speed tables, and which of connect.cc's rules apply, are the GPU's
generation's (topologies/gpus/: `intra_speeds`, `inter_speeds`,
`keeps_slow_channels`, `doubles_across_servers`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict

from topologies.hardware import Server

MAX_SEARCH_CHANNELS = 32           # MAXCHANNELS / 2
MAX_CHANNELS = 64                  # MAXCHANNELS: execution channels
MAX_NVLS_HEADS = 16


@dataclass(frozen=True)
class Graph:
    algorithm: str
    channels: int                  # the search's channels (what the tuner counts)
    bw_intra: float                # GB/s per channel between GPUs of a server
    bw_inter: float                # GB/s per channel through a NIC
    intra: str = "nvlink"          # the intra-node hardware row: nvlink or pci


@dataclass(frozen=True)
class Topology:
    """A communicator's shape: `nodes` servers of `server`, `ppn` ranks on
    each (default: all its GPUs)."""
    server: Server
    nodes: int
    ppn: int

    @property
    def ranks(self) -> int:
        return self.nodes * self.ppn


def fastest_speed(speeds, fits) -> float:
    """The fastest speed of the table that `fits`, or the slowest there is."""
    for s in speeds:
        if fits(s):
            return s
    return speeds[-1]


def _intra_ring(topo: Topology):
    """(channels, speed) of rings over NVLink: the largest channels x speed
    the GPU's NVLink holds, the fastest speed that reaches it."""
    gpu = topo.server.gpu
    nvlink = gpu.nvlink_gbytes
    speeds = gpu.generation.intra_speeds
    best = (0.0, 1, speeds[-1])
    for s in speeds:
        if gpu.mesh and s > gpu.link_gbytes + 1e-9:      # a hop is one link of the mesh
            continue
        ch = min(MAX_SEARCH_CHANNELS, int(nvlink // s))
        if ch and ch * s > best[0] + 1e-9:
            best = (ch * s, ch, s)
    return best[1], best[2]


def nic_speed(topo: Topology) -> float:
    """The per-channel speed of a channel through one NIC: the fastest
    inter-node speed the NIC and the GPU's PCIe path both carry."""
    cap = min(topo.server.nic_gbytes, topo.server.pcie_gbytes)
    return fastest_speed(topo.server.gpu.generation.inter_speeds, lambda s: s <= cap + 1e-9)


def _inter_ring(topo: Topology):
    """(channels, speed) of rings through the NICs: one per NIC in use, as
    fast as the NIC allows and the GPUs' NVLink carries (a ring's entry GPU
    only sends on NVLink, its exit GPU only receives)."""
    nics = max(1, min(topo.server.nics, topo.ppn))
    nvlink = topo.server.gpu.nvlink_gbytes
    share = (topo.ppn - 1) / topo.ppn

    def fits(s):
        return s <= min(topo.server.nic_gbytes, topo.server.pcie_gbytes) + 1e-9 and \
            nics * s * share <= nvlink + 1e-9
    return nics, fastest_speed(topo.server.gpu.generation.inter_speeds, fits)


def duplicated(topo: Topology, channels: int, speed: float):
    """connect.cc's duplication: twice the channels at half the speed."""
    keeps = topo.server.gpu.generation.keeps_slow_channels
    if speed >= 25 and not (keeps and speed < 50 and channels > 4):
        return min(MAX_SEARCH_CHANNELS * 2, channels * 2), speed / 2
    return channels, speed


def ring(topo: Topology) -> Graph:
    if topo.nodes == 1:
        ch, s = _intra_ring(topo)
    else:
        ch, s = _inter_ring(topo)
    ch, s = duplicated(topo, ch, s)
    return Graph("ring", ch, s, s)


def tree(topo: Topology) -> Graph:
    """The ring's channels; on two servers the chain's intra speed raised."""
    r = ring(topo)
    if topo.nodes != 2:
        return Graph("tree", r.channels, r.bw_intra, r.bw_inter)
    nvlink = topo.server.gpu.nvlink_gbytes
    intra = fastest_speed(topo.server.gpu.generation.intra_speeds,
                     lambda s: r.channels * s <= nvlink + 1e-9 and s <= 2 * r.bw_inter)
    return Graph("tree", r.channels, max(intra, r.bw_intra), r.bw_inter)


def nvls(topo: Topology) -> Graph:
    """Heads: one per GPU (at most 16); (heads + 1) x speed fit the NVLink."""
    speeds = topo.server.gpu.generation.intra_speeds
    heads = min(MAX_NVLS_HEADS, topo.ppn)
    nvlink = topo.server.gpu.nvlink_gbytes
    intra = fastest_speed(speeds, lambda s: (heads + 1) * s <= nvlink + 1e-9)
    if topo.nodes == 1:
        inter = min(2 * intra, speeds[0])
    else:
        inter = nic_speed(topo) * min(1.0, topo.server.nics / heads)
    return Graph("nvls", heads, intra, inter)


def collnet(topo: Topology) -> Graph:
    r = ring(topo)
    nics = max(1, min(topo.server.nics, topo.ppn))
    return Graph("collnet", nics, r.bw_intra, nic_speed(topo))


def search(topo: Topology) -> Dict[str, Graph]:
    """The graphs of every algorithm family NCCL searches."""
    return {"ring": ring(topo), "tree": tree(topo), "nvls": nvls(topo),
            "collnet": collnet(topo)}


def execution_channels(topo: Topology, graph: Graph, min_channels: int = 0) -> int:
    """The channels a collective runs on (connect.cc): twice the search's,
    doubled again on Hopper and later across servers while a fast graph
    has fewer than 16; raised to NCCL_MIN_NCHANNELS (`min_channels`)."""
    ch = min(MAX_CHANNELS, 2 * graph.channels)
    doubles = topo.server.gpu.generation.doubles_across_servers
    if doubles and topo.nodes > 1 and graph.bw_intra > 45 and ch < 16:
        ch *= 2
    return min(MAX_CHANNELS, max(ch, min_channels))


def log2_floor(n: int) -> int:
    return int(math.floor(math.log2(n))) if n >= 1 else 0
