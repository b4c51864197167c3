"""AMD Instinct MI325X platform: as MI300X's, 8 GPUs in a full mesh, a 400G
NIC per GPU on PCIe Gen5, AMD EPYC hosts."""

from topologies.gpus.cdna3 import MI325X
from topologies.servers.sold import Server, register

MI325X_PLATFORM = register(Server("mi325x", MI325X, 8, 8, 400, 48.0, "amd"))
