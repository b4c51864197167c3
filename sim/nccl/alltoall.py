"""AllToAll as NCCL runs it. NCCL's tuner has no entry for it: AllToAll is
a group of point-to-point sends, every rank to every other, on the p2p
channels, so this module prices it from the same constants and graphs.

- **bandwidth**: a GPU's share of the buffer for the GPUs of its own server
  crosses NVLink at what NCCL's copy kernels reach there (the one-server
  ring's bus bandwidth: the 360-370 GB/s NCCL's maintainers quote for
  non-AllReduce operations on H100, nccl-tests issue 212); the share for
  other servers leaves through the NICs. With PXN (NCCL's default where
  NICs are rail-matched) a GPU hands what it sends to rail k to GPU k of
  its server over NVLink, so every NIC carries its rail's part and the
  forwarding adds to NVLink; either way a GPU's remote traffic cannot beat
  one NIC's rate ("Alltoall cannot aggregate the bandwidth of multiple
  NICs", nccl-tests issue 267). A NIC runs at its PCIe-capped speed x the
  share the fabric gives this pattern (`Cluster.alltoall_share`, rails.py:
  with PXN NIC k of each server to NIC k of every other, on its rail leaf
  within a rail-optimized unit, over the spines and their oversubscription
  between units or leaves of whole servers; the rail rings' share where
  none is given) x the transport's efficiency (tuner.py). The two ways
  overlap: the slower sets the time.
- **latency**: the ring's LL base and, per peer, the LL hop latency of the
  hardware it crosses (NVLink inside the server, the network plus what it
  adds between servers): NCCL's p2p kernel walks the peers of a channel
  one after another.

Checked against published AllToAll times (bench/reality_bench.py).
"""

from __future__ import annotations

from sim.nccl import graph as graphs
from sim.nccl.tuner import BASE_LATENCY, HW_LATENCY, Cluster, Estimate, bus_bandwidth

LL = 0                                   # the protocols' column: LL


def price(cluster: Cluster, nbytes: float) -> Estimate:
    """AllToAll of `nbytes` (nccl-tests' size: the whole buffer of a rank)."""
    topo = cluster.topo
    n, ppn = topo.ranks, topo.ppn
    latency = (BASE_LATENCY["ring"][LL] + (ppn - 1) * HW_LATENCY["nvlink"]["ring"][LL]
               + (n - ppn) * (HW_LATENCY["net"]["ring"][LL] + cluster.extra_us))
    local, remote = nbytes * (ppn - 1) / n, nbytes * (n - ppn) / n
    intra_gbytes = (bus_bandwidth(Cluster(graphs.Topology(topo.server, 1, ppn)), "allgather",
                                  "ring", "Simple") if ppn > 1 else float("inf"))
    nics = max(1, min(topo.server.nics, ppn))
    share = cluster.fabric_share if cluster.alltoall_share is None else cluster.alltoall_share
    nic_gbytes = graphs.nic_speed(topo) * share * cluster.network.efficiency
    if cluster.network.nic_gbytes_cap:
        nic_gbytes = min(nic_gbytes, cluster.network.nic_gbytes_cap)
    forwarded = remote * (ppn - 1) / ppn if nics == ppn else 0.0       # PXN's hop to the rail
    t_intra = (local + forwarded) / (intra_gbytes * 1e3)                # us: GB/s x 1e3 = B/us
    t_net = remote * ppn / nics / (nic_gbytes * 1e3) if remote else 0.0
    busy = max(t_intra, t_net)
    algbw = nbytes / (busy * 1e3) if busy > 0 else float("inf")
    return Estimate("p2p", "Simple", latency, algbw * (n - 1) / n, algbw,
                    graphs.execution_channels(topo, graphs.ring(topo)), latency + busy)
