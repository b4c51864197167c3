"""Scale-out network technologies as registered classes: one module a
technology (or a family of them), each saying what its switches and
transport cost, how it routes by default, what it does when a queue fills
and where every figure comes from (technology.py: the Technology class and
what each parameter means).

    from networks import network, NETWORKS, DEFAULT
    network("infiniband").switch_latency_us       # 0.13

A new technology is one new module here (and its tests): the registry
imports every module of this package, and each registers its class with
@register (registries/: the one registry pattern). The bottom layer: nothing
here imports another package of the project but registries/ (routing
policies are named, not imported).
"""

from __future__ import annotations

from typing import Dict, Tuple

from networks.technology import REGISTRY, Technology, register
from registries import discover

discover(__name__, __path__, skip=("technology",))

# the names, in the order --network and the schema list them
NETWORKS: Tuple[str, ...] = REGISTRY.names()
# a fabric file without `network:`: the Ethernet most AI clusters run, as
# the project's fabrics always were (ECMP-hashed)
DEFAULT = "roce"
# the technology NCCL's own constants were measured on (sim/nccl/tuner.py):
# the reference a technology's costs are told against
REFERENCE = "infiniband"


def network(name: str) -> Technology:
    """The technology called `name`, or ValueError: one sentence naming those there are."""
    return REGISTRY.find(name)


def all_networks() -> Dict[str, Technology]:
    return dict(REGISTRY.items())


__all__ = ["DEFAULT", "NETWORKS", "REFERENCE", "Technology", "all_networks", "network", "register"]
