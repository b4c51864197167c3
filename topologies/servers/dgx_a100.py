"""DGX A100: 8 A100 on NVSwitch, 8 single-port ConnectX-6 NICs of 200
Gbit/s on PCIe Gen4, AMD EPYC hosts (NVIDIA's DGX A100 user guide)."""

from topologies.gpus.ampere import A100
from topologies.servers.sold import Server, register

DGX_A100 = register(Server("dgx-a100", A100, 8, 8, 200, 24.0, "amd"))
