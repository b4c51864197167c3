"""GB300 NVL72: one rack, 72 B300 in one NVLink domain through 9 NVSwitch
trays, a ConnectX-8 800G NIC per GPU (4 per 4-GPU tray) on PCIe Gen6 (taken
as twice Gen5's 48 GB/s), Grace hosts (NVIDIA's GB300 NVL72 enterprise
reference architecture, docs.nvidia.com/enterprise-reference-
architectures/nvl72-ai-factory)."""

from topologies.gpus.blackwell import B300
from topologies.servers.sold import Server, register

GB300_NVL72 = register(Server("gb300-nvl72", B300, 72, 72, 800, 96.0, "arm"))
