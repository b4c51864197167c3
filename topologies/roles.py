"""Switch roles: what each kind of switch is to the rest of the code, in one
table. A switch's role decides its datapath ids, whether it is part of the
network or inside a server, whether servers attach to it, where the
spanning-tree baseline puts it, its name prefix in a fabric file's `names:`,
and its row in the fabric figure.

The roles below are those of the fabric kinds in topologies/kinds/; a kind
that needs a new one (a super-spine, say) registers it from its own module
with `register_role` (registries/: the one registry pattern), and the
loader, the controller, the lab and the figures all ask this table.

    role("spine").tier          # 3
    network_roles()             # ("leaf", "spine", "agg", "core")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from registries import Registry

DEFAULT_STP_PRIORITY = 0x8000       # Open vSwitch's bridge priority when none is set


@dataclass(frozen=True)
class Role:
    name: str
    dpid_base: int                  # its switches' datapath ids: base + 1-based index
    tier: int                       # its row in the fabric figure (servers are 0)
    in_server: bool = False         # inside a server (NVSwitch, PCIe switch), not the network
    edge: bool = False              # servers attach to it: it hands their ARP to the controller
    stp_priority: int = DEFAULT_STP_PRIORITY   # spanning tree: lower is nearer the root
    names: Optional[str] = None     # what `names:` says its prefix names (network roles)


def _own_datapath_ids(new: Role) -> None:
    """Refuse a role whose datapath ids would meet another's."""
    for old in ROLES.values():
        if old.dpid_base == new.dpid_base:
            raise ValueError(f"role {new.name!r} would take datapath ids {new.dpid_base:#x} "
                             f"and up, those of role {old.name!r}")


# the roles, in the order registered: the order a fabric lists its switches in
ROLES = Registry("switch role", "switch roles", check=_own_datapath_ids)


def register_role(new: Role) -> Role:
    """Add a role; its name and its datapath ids must be its own."""
    return ROLES.register(new)


def role(name: str) -> Role:
    return ROLES[name]


def network_roles() -> Tuple[str, ...]:
    """The roles of the network's switches, in the order a fabric lists them."""
    return tuple(r.name for r in ROLES.values() if not r.in_server)


def tier_names() -> Dict[int, str]:
    """A name per row of the fabric figure: the roles on it ("spine / agg");
    a server's inside switches are its "node"."""
    rows: Dict[int, list] = {0: ["GPU / server"]}
    for r in ROLES.values():
        label = "node" if r.in_server else r.name
        if label not in rows.setdefault(r.tier, []):
            rows[r.tier].append(label)
    return {tier: " / ".join(labels) for tier, labels in sorted(rows.items())}


register_role(Role("leaf", 0x100, 2, edge=True, names="leaf (edge) switches"))
register_role(Role("spine", 0x200, 3, stp_priority=0x4000, names="spine switches"))
register_role(Role("agg", 0x300, 3, stp_priority=0x6000, names="fat-tree aggregation switches"))
register_role(Role("core", 0x400, 4, stp_priority=0x2000, names="fat-tree core switches"))
register_role(Role("node", 0x1000, 1, in_server=True, edge=True))
register_role(Role("nvswitch", 0x2000, 1, in_server=True, edge=True))
