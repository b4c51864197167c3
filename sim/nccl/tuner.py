"""NCCL's tuner: what each algorithm and protocol would take for a
collective of a given size, and which NCCL runs (the quickest of those
allowed), as NCCL 2.30's src/graph/tuning.cc and src/enqueue.cc model them.

An (algorithm, protocol) pair costs ``latency + bytes / algbw``:

- **latency**: a base per algorithm and protocol, plus a per-hop latency
  for each dependent step, by the hardware it crosses (NVLink, PCIe or the
  network): a ring AllReduce pays 2(n-1) steps, a tree 2 x (its chain inside
  a server + log2(servers) hops across), NVLS one switch reduction. A step
  between servers also pays what the network adds to NCCL's own figure
  (`Cluster.extra_us`: its switches, links and transport, networks/).
  A ring on several servers pays at least the host's per-message network
  overhead a step (1 us on Intel, 2 on AMD; three times for Simple).
- **bandwidth**: the search's channels x per-channel bandwidth
  (graph.py), a channel's NIC as the fabric and the transport deliver it
  (`fabric_share` x the technology's efficiency), the protocol's efficiency (LL 1/2: 8-byte stores carry 4 bytes
  of data and a flag; LL128 0.92: 120 bytes of 128; Simple all), per-channel
  caps the tuner has measured per GPU generation, NVLS's efficiency on the
  NVSwitch (Hopper 0.85, Blackwell 0.74): each generation's, in its module
  of topologies/gpus/; then bus to algorithm bandwidth:
  n/nsteps for ring and NVLS (exactly nccl-tests' busbw factor), 1/2 for
  tree and CollNet.

The constants are NCCL 2.30.7's (tuning.cc), read, not copied as code; the
published measurements they are checked against are in bench/reality_bench.py.

Which pairs NCCL allows: Broadcast and Reduce only Ring; AllGather and
ReduceScatter Ring, PAT (one GPU per server), NVLS and CollNetDirect;
AllReduce all but PAT. NVLS and NVLSTree need an NVSwitch that reduces, two
GPUs or more, and Simple; NVLSTree several servers, NVLS on several
servers and CollNet a fabric whose switches reduce (`collnet`). LL and
LL128 are off for NVLS and CollNet. `NCCL_ALGO` / `NCCL_PROTO` strings
narrow the choice as NCCL's do (overrides.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import networks
from networks.technology import REFERENCE_SWITCHES, Technology
from sim.nccl import graph as graphs
from sim.nccl import delivered, rccl
from sim.nccl.graph import Topology, log2_floor

RING = "ring"               # NCCL's Ring: what it falls back on where nothing else runs
ALGORITHMS = ("tree", RING, "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOCOLS = ("LL", "LL128", "Simple")
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce")
NAMES = {"tree": "Tree", "ring": "Ring", "collnet_direct": "CollNetDirect",
         "collnet_chain": "CollNetChain", "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT",
         "p2p": "P2P"}

# microseconds, (LL, LL128, Simple)
BASE_LATENCY = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
                "collnet_direct": (0, 0, 0), "collnet_chain": (0, 0, 0),
                "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0), "pat": (8.0, 8.0, 8.0)}
HW_LATENCY = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4),
               "collnet_direct": (0, 0, 3.7), "collnet_chain": (0, 0, 2.8),
               "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25), "pat": (0, 0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7),
            "collnet_direct": (0, 0, 3.7), "collnet_chain": (0, 0, 2.8),
            "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0), "pat": (0, 0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0),
            "collnet_direct": (0, 0, 31), "collnet_chain": (0, 0, 30),
            "nvls": (0, 0, 18), "nvls_tree": (0, 0, 20.9), "pat": (0, 0, 14)},
}
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
# GB/s; LL's cap on several servers: (2 servers, more), by the host CPU: AMD (and mixed
# hosts) take row 1, every other vendor, Arm included, row 0 (tuning.cc). On one server
# the cap, and the per-channel caps, are the GPU's generation's (topologies/gpus/)
LL_MAX_SERVERS = {"intel": (39.0, 20.4), "amd": (22.5, 19.0), "arm": (39.0, 20.4)}
LL_EFFICIENCY, LL128_EFFICIENCY = 0.5, 0.92
TREE_EFFICIENCY, PAT_EFFICIENCY = 0.92, 0.75
RING_PLATEAU = 1.4                  # a multi-server Ring/Simple AllReduce's latency, sm80 on
# bytes per thread below which a channel is dropped (comm.h), and threads per channel
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}


@dataclass(frozen=True)
class Cluster:
    """Where a collective runs: `topo` (servers and ranks), whether the
    switches reduce (`collnet`, SHARP), NCCL_MIN_NCHANNELS (`min_channels`:
    more CTAs raise the per-channel caps, not the links), the share of
    each NIC's rate the fabric delivers to the collective's flows
    (`fabric_share`, 1 on a fabric that never collides; the flow-level
    simulator's figure for ECMP and oversubscription: bandwidth alone), the
    share AllToAll's own pattern gets (`alltoall_share`, rails.py; None:
    `fabric_share`), the scale-out technology (`network`: its transport's
    efficiency), and what a message between servers takes beyond NCCL's
    constants (`net_extra_us`: the path's switches and links against the
    reference path, and the transport's cost; None: the technology on the
    reference path)."""
    topo: Topology
    collnet: bool = False
    min_channels: int = 0
    fabric_share: float = 1.0
    alltoall_share: Optional[float] = None
    network: Technology = field(default_factory=lambda: networks.network(networks.DEFAULT))
    net_extra_us: Optional[float] = None

    @property
    def extra_us(self) -> float:
        """`net_extra_us`, or the technology's on the reference path."""
        if self.net_extra_us is not None:
            return self.net_extra_us
        return self.network.path_extra_us(REFERENCE_SWITCHES, 0.0)


@dataclass(frozen=True)
class Estimate:
    algorithm: str
    protocol: str
    latency_us: float
    busbw_model: float             # GB/s, the tuner's bus bandwidth
    algbw: float                   # GB/s, user bytes per second at the plateau
    channels: int                  # execution channels this size runs on
    time_us: float
    tuned_us: Optional[float] = None   # the tuner's own time where the run's differs
                                       # (delivered.py): what NCCL compares

    @property
    def name(self) -> str:
        return f"{NAMES[self.algorithm]}/{self.protocol}"


def nsteps(collective: str, n: int) -> int:
    return {"allreduce": 2 * (n - 1), "allgather": n - 1, "reducescatter": n - 1,
            "broadcast": n, "reduce": n}[collective]


def allowed(cluster: Cluster, collective: str, algorithm: str, protocol: str) -> bool:
    """Whether NCCL would consider this pair at all, on this hardware."""
    topo, gpu = cluster.topo, cluster.topo.server.gpu
    if collective in ("broadcast", "reduce") and algorithm != "ring":
        return False
    if collective in ("allgather", "reducescatter") and algorithm not in (
            "ring", "pat", "nvls", "collnet_direct"):
        return False
    if collective == "allreduce" and algorithm == "pat":
        return False
    if algorithm.startswith(("nvls", "collnet")) and protocol != "Simple":
        return False
    if algorithm.startswith("nvls"):
        if not gpu.nvls or topo.ppn < 2:
            return False
        if algorithm == "nvls_tree" and topo.nodes == 1:
            return False
        if algorithm == "nvls" and topo.nodes > 1 and not cluster.collnet:
            return False
    if algorithm.startswith("collnet"):
        if not cluster.collnet or topo.ppn > 8 or topo.nodes == 1:
            return False
        if algorithm == "collnet_direct" and collective != "allreduce" and topo.nodes > 1:
            return False
    if algorithm == "pat" and topo.ppn != 1:
        return False
    return True


def _column(topo: Topology) -> int:
    return 0 if topo.nodes == 1 else 1 if topo.nodes == 2 else 2


def _graph(cluster: Cluster, algorithm: str) -> graphs.Graph:
    topo = cluster.topo
    if algorithm == "ring" or algorithm == "pat":
        return graphs.ring(topo)
    if algorithm == "tree":
        return graphs.tree(topo)
    if algorithm.startswith("nvls"):
        return graphs.nvls(topo)
    return graphs.collnet(topo)


def bus_bandwidth(cluster: Cluster, collective: str, algorithm: str, protocol: str) -> float:
    """The tuner's bus bandwidth, GB/s, of the pair (tuning.cc's busBw)."""
    topo, gen = cluster.topo, cluster.topo.server.gpu.generation
    g, col = _graph(cluster, algorithm), _column(cluster.topo)
    if topo.server.gpu.rccl:                # AMD GPUs: RCCL's own figure (rccl.py)
        return rccl.bus_bandwidth(topo, g, algorithm, protocol, cluster.fabric_share)
    caps_ch = max(g.channels, cluster.min_channels)
    share = cluster.fabric_share * cluster.network.efficiency if topo.nodes > 1 else 1.0
    if algorithm.startswith("nvls"):
        intra = g.bw_intra * gen.nvls_efficiency * (g.channels - 1) / g.channels
        intra *= 2 if collective == "allreduce" else (topo.ppn - 1) / topo.ppn
        inter = g.bw_inter * (2 if algorithm == "nvls_tree" and topo.nodes <= 2 else 1) * share
        inter = min(inter, _transport_cap(cluster, g))
        bw = min(intra, inter)
        if algorithm == "nvls_tree":
            bw = min(bw, gen.per_channel_nvls_tree[col])
        return g.channels * bw
    per_channel = g.bw_intra if (topo.nodes <= 2 or algorithm.startswith("collnet")) \
        else g.bw_inter
    if topo.nodes > 1:                      # a channel's NIC, as the fabric delivers it
        # a tree between two servers moves the buffer once each way where its
        # bus bandwidth counts it twice (algbw = bus / 2), as NVLSTree's does
        twice = 2 if algorithm == "tree" and topo.nodes == 2 else 1
        per_channel = min(per_channel, g.bw_inter * share * twice)
    per_channel = min(per_channel, _transport_cap(cluster, g))
    bus = g.channels * per_channel
    if algorithm == "ring" and protocol == "LL":
        bus = min(_ll_max(cluster), LL_EFFICIENCY * bus)
    elif algorithm == "ring" and protocol == "LL128":
        bus = min(LL128_EFFICIENCY * bus, caps_ch * gen.per_channel_ring_ll128)
    elif algorithm == "tree":
        bus = min(TREE_EFFICIENCY * bus, caps_ch * gen.per_channel_tree[col])
        if protocol == "LL":
            bus = min(bus / 3.8, _ll_max(cluster))
        elif protocol == "LL128":
            bus = min(bus * (7 / 9 if topo.nodes == 1 else 120 / 128),
                      caps_ch * gen.per_channel_tree_ll128[col])
    elif algorithm == "pat":
        bus *= PAT_EFFICIENCY
    elif algorithm == "collnet_direct":
        r = topo.ppn / g.channels
        bus /= r - (r - 1) / 2
        bus *= gen.collnet_efficiency
    return bus


def _transport_cap(cluster: Cluster, g: graphs.Graph) -> float:
    """What one channel gets of its NIC where the transport copies through
    the hosts' CPUs (the technology's `nic_gbytes_cap`, the NICs' channels
    sharing it); unlimited otherwise."""
    cap, topo = cluster.network.nic_gbytes_cap, cluster.topo
    if not cap or topo.nodes < 2:
        return float("inf")
    return cap * max(1, min(topo.server.nics, topo.ppn)) / g.channels


def _ll_max(cluster: Cluster) -> float:
    topo = cluster.topo
    if topo.nodes == 1:
        return topo.server.gpu.generation.ll_max_one_server
    return LL_MAX_SERVERS[topo.server.cpu][0 if topo.nodes == 2 else 1]


def latency_us(cluster: Cluster, collective: str, algorithm: str, protocol: str) -> float:
    """The tuner's latency of the pair, microseconds."""
    topo = cluster.topo
    p = PROTOCOLS.index(protocol)
    g = _graph(cluster, algorithm)
    intra = HW_LATENCY[g.intra][algorithm][p]
    # NCCL's figure for a step between servers, and what this network adds
    inter = HW_LATENCY["net"]["tree" if topo.ppn == 1 else algorithm][p] + cluster.extra_us
    base = BASE_LATENCY[algorithm][p]
    n, nodes, ppn = topo.ranks, topo.nodes, topo.ppn
    if algorithm == "ring":
        if collective in ("broadcast", "reduce"):
            return base + (intra if nodes == 1 else inter)
        steps = nsteps(collective, n)
        inter_steps = 0 if nodes == 1 else (2 if collective == "allreduce" else 1) * (nodes - 1)
        overhead = 0.0 if nodes == 1 else NET_OVERHEAD_US[topo.server.cpu] * (
            3 if protocol == "Simple" else 1)
        return base + (steps - inter_steps) * max(intra, overhead) + inter_steps * inter
    if algorithm == "tree":
        return base + 2 * ((ppn - 1) * intra + log2_floor(nodes) * inter)
    if algorithm == "collnet_direct":
        return base + 2 * (min(1, ppn - 1) * intra + 0.4 * (ppn - 1)) + inter
    if algorithm == "collnet_chain":
        return base + 2 * (ppn - 1) * intra + inter
    if algorithm == "nvls":
        return intra + (inter if nodes > 1 else 0.0)
    if algorithm == "nvls_tree":
        return base + intra + 2 * log2_floor(nodes) * inter
    return base + log2_floor(nodes) * inter / 3.5 + 2.8 * n           # pat


def algorithm_bandwidth(cluster: Cluster, collective: str, algorithm: str, protocol: str) -> float:
    """Bus to algorithm bandwidth, GB/s: n/nsteps for ring and NVLS, 1/2
    for tree and CollNet's AllReduce."""
    bus = bus_bandwidth(cluster, collective, algorithm, protocol)
    n = cluster.topo.ranks
    if algorithm in ("ring", "nvls", "nvls_tree"):
        return bus * n / nsteps(collective, n)
    if collective == "allreduce":
        return bus * 0.5
    return bus


def channels_used(cluster: Cluster, algorithm: str, protocol: str, nbytes: float) -> int:
    """The execution channels a call of `nbytes` runs on (enqueue.cc): NVLS
    a fixed count; ring, tree and PAT drop channels while each thread would
    have fewer bytes than the protocol's threshold."""
    topo = cluster.topo
    g = _graph(cluster, algorithm)
    ch = graphs.execution_channels(topo, g, cluster.min_channels)
    if algorithm.startswith("nvls"):
        return min(ch, topo.server.gpu.generation.nvls_channels[0 if topo.nodes == 1 else 1])
    if algorithm not in ("ring", "tree", "pat"):
        return ch
    threshold = THREAD_THRESHOLD[protocol] * (topo.ranks if
                                              (algorithm, protocol) == ("ring", "LL") else 1)
    while ch >= 2 and nbytes < ch * THREADS[protocol] * threshold:
        ch -= 1
    return ch


def estimate(cluster: Cluster, collective: str, nbytes: float, algorithm: str,
             protocol: str) -> Optional[Estimate]:
    """The pair's estimate for `nbytes` (the whole buffer: AllGather's and
    ReduceScatter's all ranks' parts, as nccl-tests' size), None where NCCL
    would not run it."""
    if not allowed(cluster, collective, algorithm, protocol):
        return None
    algbw = algorithm_bandwidth(cluster, collective, algorithm, protocol)
    if algbw <= 0:
        return None
    lat = latency_us(cluster, collective, algorithm, protocol)
    topo = cluster.topo
    ch = channels_used(cluster, algorithm, protocol, nbytes)
    if (algorithm, protocol, collective) == ("ring", "Simple", "allreduce") and topo.nodes > 1 \
            and nbytes / (_graph(cluster, algorithm).channels * topo.ranks) >= 64:
        lat *= RING_PLATEAU
    run = delivered.algorithm_bandwidth(topo, _graph(cluster, algorithm), algorithm, protocol,
                                        algbw, cluster.fabric_share)
    tuned_us = lat + nbytes / (1000.0 * algbw)
    return Estimate(algorithm, protocol, lat, bus_bandwidth(cluster, collective, algorithm,
                                                             protocol), run or algbw, ch,
                    lat + nbytes / (1000.0 * (run or algbw)), None if run is None else tuned_us)


def _tuned(e: Estimate) -> float:
    return e.time_us if e.tuned_us is None else e.tuned_us


@dataclass(frozen=True)
class Choice:
    """What NCCL runs for one size: `chosen`, and every allowed pair."""
    collective: str
    nbytes: float
    chosen: Estimate
    table: List[Estimate] = field(default_factory=list)


def choose(cluster: Cluster, collective: str, nbytes: float,
           enabled: Optional[Dict[str, List[str]]] = None) -> Choice:
    """The quickest allowed pair, ties to the earlier in NCCL's order
    (algorithms Tree, Ring, CollNet, NVLS, NVLSTree, PAT; protocols LL,
    LL128, Simple). `enabled`: {"algorithms": [...], "protocols": [...]}
    as overrides.enabled gives for this collective."""
    if collective not in COLLECTIVES:
        raise ValueError(f"NCCL's tuner prices {', '.join(COLLECTIVES)}, not {collective!r}")
    algos = (enabled or {}).get("algorithms", ALGORITHMS)
    protos = (enabled or {}).get("protocols", PROTOCOLS)
    table = [e for a in ALGORITHMS if a in algos for p in PROTOCOLS if p in protos
             for e in [estimate(cluster, collective, nbytes, a, p)] if e is not None]
    if not table:
        raise ValueError(f"no algorithm/protocol available for {collective} on "
                         f"{cluster.topo.nodes} x {cluster.topo.server.name}: the overrides "
                         f"leave none that NCCL would run there")
    best = table[0]
    for e in table[1:]:
        if _tuned(e) < _tuned(best):
            best = e
    return Choice(collective, nbytes, best, table)
