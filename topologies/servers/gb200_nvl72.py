"""GB200 NVL72: one rack, 72 B200 in one NVLink domain through 9 NVLink
Switch trays, a ConnectX-7 400G NIC per GPU on PCIe Gen5, Grace hosts."""

from topologies.gpus.blackwell import B200
from topologies.servers.sold import Server, register

GB200_NVL72 = register(Server("gb200-nvl72", B200, 72, 72, 400, 48.0, "arm"))
