"""RCCL's tuner: where NCCL's fork for AMD GPUs prices a collective
differently from NCCL (tuner.py asks here for a server whose GPUs RCCL runs,
`Gpu.rccl`).

RCCL searches the same graphs (graph.py, with its own speed table and, on
the Infinity Fabric mesh, one link per hop) and converts bus to algorithm
bandwidth as NCCL does, but its bus bandwidth is its own (ROCm/rccl
src/graph/tuning.cc under __HIP_PLATFORM_AMD__): the graph's channels x
per-channel speed (the intra-node speed on up to 2 nodes, the NIC's beyond)
times a ratio per algorithm and protocol measured on AMD systems
(`BW_RATIO`, its tuning model 0), instead of NCCL's per-generation caps and
protocol efficiencies. And on gfx94x (MI300X, MI325X), and gfx950 (MI355X) taken as
gfx94x (its own tuning rows are not modelled):

- no NVLS and no NVLSTree: the GPUs meet over point-to-point links, with no
  switch to reduce in (the GPU says `nvls` False);
- no Tree/Simple inside one node (RCCL skips it when all ranks are local);
- LL128 is off by default (RCCL enables it by default on gfx90a only).

The latency side is NCCL's (tuner.py): RCCL's own hwLat table for tuning
model 0 is not modelled, which matters below a few MiB only.
"""

from __future__ import annotations

from sim.nccl.graph import Graph, Topology

# RCCL tuning model 0's bwRatio, (LL, LL128, Simple); [up to 2 nodes, more]
BW_RATIO = {
    "tree": ((0.04, 0.22, 0.91), (0.04, 0.22, 0.95)),
    "ring": ((0.04, 0.34, 1.00), (0.04, 0.34, 1.00)),
    "collnet_direct": ((0.0, 0.0, 1.0), (0.0, 0.0, 1.0)),
    "collnet_chain": ((0.0, 0.0, 1.0), (0.0, 0.0, 1.0)),
}
PROTOCOLS = ("LL", "LL128", "Simple")


def enabled(topo: Topology, algorithm: str, protocol: str) -> bool:
    """Whether RCCL would price the pair at all on these GPUs."""
    if algorithm not in BW_RATIO or protocol == "LL128":
        return False
    return not (algorithm == "tree" and protocol == "Simple" and topo.nodes == 1)


def bus_bandwidth(topo: Topology, graph: Graph, algorithm: str, protocol: str,
                  fabric_share: float = 1.0) -> float:
    """RCCL's bus bandwidth of the pair, GB/s (0 where RCCL would not run it):
    channels x speed x its measured ratio, each channel's NIC as the fabric
    delivers it."""
    if not enabled(topo, algorithm, protocol):
        return 0.0
    per_channel = graph.bw_intra if topo.nodes <= 2 else graph.bw_inter
    if topo.nodes > 1:
        per_channel = min(per_channel, graph.bw_inter * fabric_share)
    ratio = BW_RATIO[algorithm][0 if topo.nodes <= 2 else 1][PROTOCOLS.index(protocol)]
    return graph.channels * per_channel * ratio
