"""Server models as sold, one module each (hgx_h100.py, gb200_nvl72.py,
mi300x.py, ...): each registers its Server, the GPUs of a generation
(topologies/gpus/), how many share one NVLink domain, its NICs, PCIe path
and host CPU, with its sources in its docstring. sold.py holds the Server
class and the registry; topologies/hardware.py, what the rest of the
project imports, looks them up here.

A new server model is one new module here (and its tests): the package
imports every module in it, and a fabric file's `server.model`, the
planner's --server and the docs' lists follow.
"""

from __future__ import annotations

from registries import discover
from topologies.servers.sold import CPUS, REGISTRY, Server, register

discover(__name__, __path__, skip=("sold",))

__all__ = ["CPUS", "REGISTRY", "Server", "register"]
