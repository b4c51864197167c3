"""DGX-1 (V100): 8 V100 SXM2 in a hybrid cube-mesh of NVLink 2 (taken here
as one NVLink domain), 4 x 100G NICs on PCIe Gen3, Intel hosts."""

from topologies.gpus.volta import V100
from topologies.servers.sold import Server, register

DGX_1V = register(Server("dgx-1v", V100, 8, 4, 100, 12.0, "intel"))
