"""What an algorithm delivers when NCCL runs it, where that is not what
NCCL's tuner expects of it: the tuner chooses by its own figures
(tuner.py), the collective then takes as long as its links make it.

One such place is known and measured: Tree across NVLink domains on
Blackwell. The tuner caps a tree channel at its per-generation constant
(perChMaxTreeBws, 24 GB/s from three nodes on Blackwell), well below what a
channel's NIC carries; run anyway (NCCL_ALGO=Tree), the tree goes at its
NICs' pace. NCCL's double binary tree puts on a node's busiest NIC, per
byte of the channel's share, what its place in the two trees receives:
inside one tree a node gets its children's partial sums on the way up and
its parent's result on the way down, and each tree carries half the data:

- 2 nodes: 1 (each node the other's only child in one tree, root in the other);
- 3 nodes: 1.5 (root of two children in one tree, leaf in the other);
- 4 and more: 2 (two children and a parent in one tree, leaf in the other).

So the tree's algorithm bandwidth is channels x NIC speed / that load.
Measured on GB200 NVL72 partitions across racks (NVIDIA/nccl issue 1801,
NCCL 2.27.3, NVLS off, 16 GiB): NVL8 x 3, 8 NICs a partition, Tree 485.68
GB/s busbw where 8 x 48 / 1.5 gives 490.7; NVL4 x 3, 234.43 where 4 x 48 /
1.5 gives 234.7; the tuner's own figure, 8 x 24, is why NCCL runs Ring there
by default. On Hopper and before the caps are what a tree runs at: trees
need more SMs than NCCL's default gives them to reach their links (S.
Jeaugey, NVIDIA/nccl issue 1649), so this applies to Blackwell only (its
generation says `tree_at_the_nics`, topologies/gpus/).
"""

from __future__ import annotations

from typing import Optional

from sim.nccl.graph import Graph, Topology

def tree_load(nodes: int) -> float:
    """Bytes through a node's busiest NIC per byte of a channel's share."""
    return 1.0 if nodes <= 2 else 1.5 if nodes == 3 else 2.0


def algorithm_bandwidth(topo: Topology, graph: Graph, algorithm: str, protocol: str,
                        tuned: float, fabric_share: float = 1.0) -> Optional[float]:
    """The algorithm bandwidth (GB/s) the pair runs at where it differs from
    the tuner's `tuned` figure; None where the tuner's is what runs."""
    if (algorithm != "tree" or protocol != "Simple" or topo.nodes < 2
            or not topo.server.gpu.generation.tree_at_the_nics):
        return None
    wire = graph.channels * graph.bw_inter * fabric_share / tree_load(topo.nodes)
    return max(tuned, wire)
