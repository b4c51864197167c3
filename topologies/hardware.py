"""GPU servers as they are sold, in the units NCCL's topology search counts
them: what the NCCL model (sim/nccl/) derives its channels and bandwidths
from.

A GPU is its generation (which of NCCL's per-architecture tables apply), its
NVLink (links to the NVSwitch and GB/s per link, as NCCL's topo.h counts a
link: 20.6 GB/s for NVLink4, the share of the 25 GB/s wire NCCL reaches) and
whether its NVSwitch can reduce (NVLink SHARP, NVSwitch 3 and later). A
server is its GPUs (one NVLink domain), its scale-out NICs and their rate,
the PCIe path from a GPU to its NIC, and the host CPU's vendor (NCCL's LL
caps and per-message overhead on several nodes depend on it).

Sources: NVIDIA's datasheets for the GPUs, NVLink and the DGX/HGX systems
(DGX A100 and DGX H100 user guides: 8 GPUs, 8 single-port ConnectX NICs of
200 and 400 Gbit/s, AMD EPYC and Intel Xeon hosts); NCCL 2.30's
src/graph/topo.h for the per-link and PCIe figures.
"""

from __future__ import annotations

from dataclasses import dataclass

ARCHS = ("volta", "ampere", "hopper", "blackwell")
CPUS = ("intel", "amd", "arm")


@dataclass(frozen=True)
class Gpu:
    name: str
    arch: str                 # one of ARCHS: which of NCCL's tables apply
    nvlinks: int              # NVLink links to the NVSwitch
    link_gbytes: float        # GB/s per link and direction, as NCCL counts one
    nvls: bool                # the NVSwitch reduces (NVLink SHARP)
    bf16_tflops: float = 0.0  # dense BF16 tensor-core peak, TFLOP/s (what MFU divides by)
    memory_gbytes: float = 0.0  # HBM capacity, GB (1e9 bytes, as sold)
    hbm_tbytes: float = 0.0   # HBM bandwidth, TB/s

    @property
    def nvlink_gbytes(self) -> float:
        """A GPU's NVLink bandwidth to its NVSwitch, per direction (GB/s)."""
        return self.nvlinks * self.link_gbytes


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
        return (f"{self.name}: {self.gpus} x {self.gpu.name} "
                f"(NVLink {self.gpu.nvlink_gbytes:g} GB/s per direction as NCCL counts it), "
                f"{self.nics} x {self.nic_gbps:g} Gbit/s NICs")


# peak, memory and HBM bandwidth from NVIDIA's datasheets: V100 SXM2 32GB
# (125 TFLOP/s tensor, 900 GB/s), A100 80GB SXM
# (312 TFLOP/s BF16 dense, 2,039 GB/s), H100 SXM (989 TFLOP/s, 80 GB, 3.35
# TB/s), H200 SXM (141 GB, 4.8 TB/s), HGX B200 (2.25 PFLOP/s BF16 dense per
# GPU, 180 GB, 7.7 TB/s)
V100 = Gpu("V100", "volta", 6, 20.0, False, 125.0, 32.0, 0.9)
A100 = Gpu("A100", "ampere", 12, 20.0, False, 312.0, 80.0, 2.039)
H100 = Gpu("H100", "hopper", 18, 20.6, True, 989.0, 80.0, 3.35)
H200 = Gpu("H200", "hopper", 18, 20.6, True, 989.0, 141.0, 4.8)
B200 = Gpu("B200", "blackwell", 18, 40.1, True, 2250.0, 180.0, 7.7)

SERVERS = {s.name: s for s in (
    # DGX-1: 8 V100 SXM2 in a hybrid cube-mesh of NVLink 2 (taken here as one
    # NVLink domain), 4 x 100G NICs on PCIe Gen3, Intel hosts
    Server("dgx-1v", V100, 8, 4, 100, 12.0, "intel"),
    Server("dgx-a100", A100, 8, 8, 200, 24.0, "amd"),
    Server("hgx-h100", H100, 8, 8, 400, 48.0, "intel"),
    Server("hgx-h200", H200, 8, 8, 400, 48.0, "intel"),
    Server("hgx-b200", B200, 8, 8, 400, 48.0, "intel"),
    # one rack: 72 GPUs in one NVLink domain, a 400G NIC per GPU, Grace hosts
    Server("gb200-nvl72", B200, 72, 72, 400, 48.0, "arm"),
)}


def server(name: str) -> Server:
    """The server called `name`, or one sentence naming those there are."""
    try:
        return SERVERS[name]
    except KeyError:
        raise ValueError(f"no server called {name!r}; there are: {', '.join(SERVERS)}") from None
