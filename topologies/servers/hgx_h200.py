"""HGX H200: as an HGX H100 with H200s: 8 GPUs on NVSwitch, 8 x 400G NICs
on PCIe Gen5, Intel Xeon hosts."""

from topologies.gpus.hopper import H200
from topologies.servers.sold import Server, register

HGX_H200 = register(Server("hgx-h200", H200, 8, 8, 400, 48.0, "intel"))
