"""GPU servers as they are sold, in the units NCCL's topology search counts
them: what the NCCL model (sim/nccl/) derives its channels and bandwidths
from, and what the rest of the project imports of them.

A GPU is a part of its generation (topologies/gpus/, one module a
generation: which of NCCL's, or RCCL's, per-architecture tables apply, the
tables themselves beside it, and its parts: scale-up links, peak, memory);
a server model is one module of topologies/servers/ (its GPUs, how many
share one NVLink domain, its NICs, PCIe path and host CPU). `SERVERS` is
the registry of server models, in their order; a rack-scale domain may be
partitioned into smaller NVLink domains (`partition`). Each figure's source
is beside it, in the generation's or the server's module.
"""

from __future__ import annotations

from dataclasses import replace

from topologies.gpus import SCALEUP, Generation, Gpu
from topologies.servers import CPUS, REGISTRY as SERVERS, Server

__all__ = ["CPUS", "Generation", "Gpu", "SCALEUP", "SERVERS", "Server", "partition", "server"]


def partition(sold: Server, gpus: int) -> Server:
    """`sold` split into NVLink domains of `gpus` GPUs each (an NVL72 rack as
    NVL36, NVL8, NVL4 partitions), each domain with its share of the NICs:
    NCCL's node is then the partition, what lies beyond it crossed over the
    NICs. One sentence where the split cannot be made."""
    if gpus == sold.gpus:
        return sold
    if sold.gpu.mesh:
        raise ValueError(f"a {sold.name}'s {sold.gpus} GPUs are one full mesh of links, not "
                         "switches a partition could divide; its NVLink domain is all of them")
    if not 1 <= gpus < sold.gpus or sold.gpus % gpus:
        raise ValueError(f"an NVLink domain of a {sold.name} holds a divisor of its "
                         f"{sold.gpus} GPUs, got {gpus}")
    return replace(sold, name=f"{sold.name}/nvl{gpus}", gpus=gpus,
                   nics=max(1, sold.nics * gpus // sold.gpus))


def server(name: str) -> Server:
    """The server called `name`, or one sentence naming those there are."""
    return SERVERS.find(name)
