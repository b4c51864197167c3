"""HGX H100 (as in a DGX H100): 8 H100 on NVSwitch, 8 single-port
ConnectX-7 NICs of 400 Gbit/s on PCIe Gen5, Intel Xeon hosts (NVIDIA's DGX
H100 user guide)."""

from topologies.gpus.hopper import H100
from topologies.servers.sold import Server, register

HGX_H100 = register(Server("hgx-h100", H100, 8, 8, 400, 48.0, "intel"))
