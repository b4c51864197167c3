"""What a server model is (Server: one as sold, in the units NCCL's topology
search counts it) and the registry of them.

A server is its GPUs (one scale-up domain: NCCL's "node", its MNNVL clique
on a rack-scale system), its scale-out NICs and their rate, the PCIe path
from a GPU to its NIC, and the host CPU's vendor (NCCL's LL caps and
per-message overhead on several nodes depend on it). A rack-scale domain
may be partitioned into smaller NVLink domains (topologies/hardware.py,
`partition`).
"""

from __future__ import annotations

from dataclasses import dataclass

from registries import Registry
from topologies.gpus import Gpu

CPUS = ("intel", "amd", "arm")


@dataclass(frozen=True)
class Server:
    name: str
    gpu: Gpu
    gpus: int                 # GPUs in one NVLink domain
    nics: int                 # scale-out NICs
    nic_gbps: float           # Gbit/s per NIC
    pcie_gbytes: float        # GB/s from a GPU to its NIC (x16 Gen4 24, Gen5 48)
    cpu: str                  # one of CPUS

    @property
    def nic_gbytes(self) -> float:
        return self.nic_gbps / 8

    def describe(self) -> str:
        if self.gpu.mesh:
            inside = (f"Infinity Fabric mesh, {self.gpu.nvlinks} links of "
                      f"{self.gpu.link_gbytes:g} GB/s per direction as RCCL counts them")
        else:
            inside = f"NVLink {self.gpu.nvlink_gbytes:g} GB/s per direction as NCCL counts it"
        return (f"{self.name}: {self.gpus} x {self.gpu.name} ({inside}), "
                f"{self.nics} x {self.nic_gbps:g} Gbit/s NICs")


# the models, by their GPUs' generation (oldest first), then the size of
# their NVLink domain, then name: the order `server.model` lists them in
REGISTRY = Registry("server", "server models",
                    key=lambda s: (s.gpu.generation.order, s.gpus, s.name))
# registers a Server (and returns it)
register = REGISTRY.register
