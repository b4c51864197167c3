"""GPU servers as they are sold, in the units NCCL's topology search counts
them: what the NCCL model (sim/nccl/) derives its channels and bandwidths
from.

A GPU is its generation (which of NCCL's, or RCCL's, per-architecture
tables apply), its scale-up links (how many, GB/s per link as the library's
topo.h counts one: 20.6 GB/s for NVLink4, the share of the 25 GB/s wire NCCL
reaches) and where they go (`scaleup`): to NVSwitches, so any two GPUs of
the domain meet at the whole NVLink rate, or straight to the other GPUs (a
full mesh, AMD's Infinity Fabric: one link per peer, so a ring's hop gets
one link), and whether its switch can reduce (NVLink SHARP, NVSwitch 3 and
later). A server is its GPUs (one scale-up domain: NCCL's "node", its
MNNVL clique on a rack-scale system), its scale-out NICs and their rate, the
PCIe path from a GPU to its NIC, and the host CPU's vendor (NCCL's LL caps
and per-message overhead on several nodes depend on it). A rack-scale
domain may be partitioned into smaller NVLink domains (`partition`).

Sources: NVIDIA's datasheets for the GPUs, NVLink and the DGX/HGX systems
(DGX A100 and DGX H100 user guides: 8 GPUs, 8 single-port ConnectX NICs of
200 and 400 Gbit/s, AMD EPYC and Intel Xeon hosts); NCCL 2.30's
src/graph/topo.h for the per-link and PCIe figures; NVIDIA's GB300 NVL72
enterprise reference architecture (docs.nvidia.com/enterprise-reference-
architectures/nvl72-ai-factory: 9 NVSwitch trays, 4 ConnectX-8 per 4-GPU
tray); AMD's ROCm blog "Understanding RCCL Bandwidth and xGMI Performance on
AMD Instinct MI300X" (each GPU linked to its 7 peers, 64 GB/s per link and
direction) and RCCL's src/graph/topo.h (GFX94X_XGMI_WIDTH 48: the link as
RCCL counts it, after CRC and protocol; ROCm/rccl issue 1210).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ARCHS = ("volta", "ampere", "hopper", "blackwell", "cdna3", "cdna4")
RCCL_ARCHS = ("cdna3", "cdna4")          # AMD Instinct: collectives by RCCL (sim/nccl/rccl.py)
CPUS = ("intel", "amd", "arm")
SCALEUP = ("nvswitch", "mesh")


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
    scaleup: str = "nvswitch"  # one of SCALEUP: links to switches, or a full mesh

    @property
    def nvlink_gbytes(self) -> float:
        """A GPU's scale-up bandwidth, all its links, per direction (GB/s)."""
        return self.nvlinks * self.link_gbytes

    @property
    def mesh(self) -> bool:
        """Each link goes straight to one peer GPU: a channel's hop gets one link."""
        return self.scaleup == "mesh"

    @property
    def rccl(self) -> bool:
        """Collectives by RCCL, NCCL's fork for AMD GPUs."""
        return self.arch in RCCL_ARCHS


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
# Blackwell Ultra in GB300: NVLink 5 as B200's (18 links, 1.8 TB/s both ways); 2.5 PFLOP/s
# BF16 dense, 279 GB, 8 TB/s (Verda's per-GPU table of NVIDIA's figures, verda.com/blog/
# gb300-nvl72-architecture)
B300 = Gpu("B300", "blackwell", 18, 40.1, True, 2500.0, 279.0, 8.0)
# AMD Instinct, CDNA 3 (gfx942): 7 Infinity Fabric links, one to each peer of the 8, 64 GB/s
# per direction on the wire, 48 as RCCL counts it; 1,307.4 TFLOP/s BF16 dense; MI300X 192 GB at
# 5.3 TB/s, MI325X 256 GB at 6.0 TB/s (AMD's MI300X platform data sheet, 128 GB/s a link both
# ways, as ROCm/rccl issue 1210 quotes it; the MI325X product page as Vultr's ROCm docs quote
# it). A PCIe Gen6 x16 path is taken as twice Gen5's 48 GB/s.
MI300X = Gpu("MI300X", "cdna3", 7, 48.0, False, 1307.4, 192.0, 5.3, "mesh")
MI325X = Gpu("MI325X", "cdna3", 7, 48.0, False, 1307.4, 256.0, 6.0, "mesh")
# AMD Instinct MI355X, CDNA 4 (gfx950): 288 GB of HBM3E at 8 TB/s (AMD's launch figures as The
# Register, 2025-06-12, and Boston's MI355X page quote them); 2,516.6 TFLOP/s BF16 dense, half
# its 5 PFLOP/s dense FP8 (the ISSCC 2026 paper as reported; AMD's data sheet was not found
# here: the BF16 figure is the FP8 one halved, as on every CDNA 3 and 4 part). Still 7 Infinity
# Fabric links, one per peer; about 153.6 GB/s a link both ways on the wire, and RCCL's topo.h
# counts one as 48 GB/s (GFX95X_XGMI_WIDTH), as on gfx942, so the model prices its mesh as
# MI300X's.
MI355X = Gpu("MI355X", "cdna4", 7, 48.0, False, 2516.6, 288.0, 8.0, "mesh")

SERVERS = {s.name: s for s in (
    # DGX-1: 8 V100 SXM2 in a hybrid cube-mesh of NVLink 2 (taken here as one
    # NVLink domain), 4 x 100G NICs on PCIe Gen3, Intel hosts
    Server("dgx-1v", V100, 8, 4, 100, 12.0, "intel"),
    Server("dgx-a100", A100, 8, 8, 200, 24.0, "amd"),
    Server("hgx-h100", H100, 8, 8, 400, 48.0, "intel"),
    Server("hgx-h200", H200, 8, 8, 400, 48.0, "intel"),
    Server("hgx-b200", B200, 8, 8, 400, 48.0, "intel"),
    # one rack: 72 GPUs in one NVLink domain through 9 NVLink Switch trays, a NIC per GPU
    # (GB200: ConnectX-7 400G, PCIe Gen5; GB300: ConnectX-8 800G, PCIe Gen6), Grace hosts
    Server("gb200-nvl72", B200, 72, 72, 400, 48.0, "arm"),
    Server("gb300-nvl72", B300, 72, 72, 800, 96.0, "arm"),
    # 8 GPUs in a full mesh, a 400G NIC per GPU (Pollara or ConnectX-7), AMD EPYC hosts
    Server("mi300x", MI300X, 8, 8, 400, 48.0, "amd"),
    Server("mi325x", MI325X, 8, 8, 400, 48.0, "amd"),
    # 8 MI355X on a universal baseboard, as MI300X's; a 400G NIC per GPU, PCIe Gen5 x16 (the
    # MLPerf Inference 6.0 MI355X systems: 8 GPUs a node, PCIe Gen 5 x16 to the host)
    Server("mi355x", MI355X, 8, 8, 400, 48.0, "amd"),
)}


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
    try:
        return SERVERS[name]
    except KeyError:
        raise ValueError(f"no server called {name!r}; there are: {', '.join(SERVERS)}") from None
