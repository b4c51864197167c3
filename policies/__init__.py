"""Routing policies as registered classes: one module a policy, each saying
how the controller plans for it, how the flow-level simulator picks paths,
how senders spread pieces over connections, and whether it needs a
controller at all (policy.py: the Policy class and what each hook means).

    from policies import policy, POLICIES
    policy("spray").connections_per_peer(channels=1, entropy=16)   # 16

A new policy is one new module here (and its tests): the registry imports
every module of this package, and each registers its class with @register
(registries/: the one registry pattern). The bottom layer: nothing here
imports another package of the project but registries/.
"""

from __future__ import annotations

from typing import Dict, Tuple

from policies.policy import REGISTRY, Policy, register
from registries import discover

discover(__name__, __path__, skip=("policy",))

# the names, in the order --policy and the schema list them
POLICIES: Tuple[str, ...] = REGISTRY.names()


def policy(name: str) -> Policy:
    """The policy called `name` (KeyError for a name no module registered)."""
    return REGISTRY[name]


def all_policies() -> Dict[str, Policy]:
    return dict(REGISTRY.items())


__all__ = ["POLICIES", "Policy", "all_policies", "policy", "register"]
