"""AMD Instinct MI300X platform: 8 GPUs in a full Infinity Fabric mesh, a
400G NIC per GPU (Pollara or ConnectX-7) on PCIe Gen5, AMD EPYC hosts."""

from topologies.gpus.cdna3 import MI300X
from topologies.servers.sold import Server, register

MI300X_PLATFORM = register(Server("mi300x", MI300X, 8, 8, 400, 48.0, "amd"))
