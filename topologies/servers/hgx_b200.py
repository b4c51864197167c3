"""HGX B200: 8 B200 on NVSwitch, 8 x 400G NICs on PCIe Gen5, Intel Xeon
hosts."""

from topologies.gpus.blackwell import B200
from topologies.servers.sold import Server, register

HGX_B200 = register(Server("hgx-b200", B200, 8, 8, 400, 48.0, "intel"))
