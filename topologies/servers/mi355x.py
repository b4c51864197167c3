"""AMD Instinct MI355X platform: 8 MI355X on a universal baseboard, as
MI300X's; a 400G NIC per GPU, PCIe Gen5 x16 (the MLPerf Inference 6.0
MI355X systems: 8 GPUs a node, PCIe Gen 5 x16 to the host), AMD EPYC hosts."""

from topologies.gpus.cdna4 import MI355X
from topologies.servers.sold import Server, register

MI355X_PLATFORM = register(Server("mi355x", MI355X, 8, 8, 400, 48.0, "amd"))
