"""A kind of fabric as a class, and the registry that holds one of each.

A kind (``fabric.kind`` in the YAML) is everything the project knows of one
shape of network, in one module of this package:

- the counts of ``fabric:`` it requires and those it may take, and the link
  classes (``links:``) it needs and may take; checks of its own beyond those
  (`check`), and what a JSON Schema can say of its counts (`json_counts`);
- its layout (`layout`): its switches by role, the leaves each server's NICs
  land on, its switch-to-switch wires;
- the head of its shape, as ``--check`` prints it (`head`);
- how cluster mode cuts it (`cut`: the link kinds a machine boundary may
  cross; `group`: what the pieces left are called);
- what the planner and the Clos model need of it: the planner's design it is
  an instance of (`planner_design`), and, for a Clos, its wiring in the Clos
  model (`clos_wiring`, `clos_leaves`, `clos_leaf`).

`register` makes a class a kind (registries/: the one registry pattern);
topologies/kinds/__init__.py imports every module of the package, so a
kind's module is all it takes to add one. This module imports nothing of
topologies but the error type and the limits, so that the schema can import
the registry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from registries import Registry
from toolkit.errors import FabricError
from topologies.limits import MAX_ENDPOINTS

Wire = Tuple[str, Tuple[str, int], Tuple[str, int]]   # (link kind, (role, i), (role, j)), 1-based


@dataclass(frozen=True)
class Layout:
    """What a kind builds from its counts, 1-based throughout."""
    counts: Dict[str, int]          # switches by role, in the roles' order: leaf first
    homes: List[List[int]]          # per server, the leaf of each of its NICs
    wires: List[Wire]               # switch-to-switch links, in cabling order


@dataclass(frozen=True)
class Count:
    """A count of ``fabric:``: what it counts and its range. The schema's
    description names the kinds that take it (unless `named` is off)."""
    what: str
    lo: int
    hi: int
    even: bool = False
    note: str = ""                  # after the kinds, in the description
    named: bool = True


# The counts of `fabric:`, in the order the schema lists them; a kind that
# needs a count none of these is adds it in its own module (`FabricKind.counts`).
COUNTS = {
    "spines": Count("spine switches", 1, 64),
    "leaves": Count("leaf switches", 1, 128),
    "servers_per_leaf": Count("servers on each leaf", 1, 64),
    "units": Count("scalable units", 1, 16, note=", default 1"),
    "servers_per_unit": Count("servers in each unit", 1, 64),
    "k": Count("switch radix", 2, 16, even=True),
    "servers": Count("servers", 1, MAX_ENDPOINTS),
    "uplinks_per_spine": Count("parallel links between each leaf and each spine", 1, 8,
                               named=False),
}
# Each link kind a wire makes -> the link class (`links:`) whose rate and
# queue it takes; a kind adds its own link kinds in `FabricKind.wire_classes`.
LINK_CLASS_OF = {"server_leaf": "server_leaf", "leaf_spine": "leaf_spine",
                 "spine_core": "spine_core", "intra_node": "intra_node", "pcie": "intra_node"}


class FabricKind:
    """One kind of fabric; a subclass fills in the class attributes and
    `layout` and `head`, and is registered with `register`."""

    name: str = ""                               # as fabric.kind says it
    order: int = 1000                            # its place in lists and messages
    required: Tuple[str, ...] = ()               # counts of fabric: it needs
    optional: Tuple[str, ...] = ()               # ... and those it may take
    counts: Dict[str, Count] = {}                # counts of its own, beyond COUNTS
    json_counts: Dict[str, dict] = {}            # a count's further JSON Schema
    links: Tuple[str, ...] = ()                  # link classes it needs beyond server_leaf
    optional_links: Tuple[str, ...] = ()         # ... and those it may take
    wire_classes: Dict[str, str] = {}            # its own link kinds -> their link class
    cut: Tuple[str, ...] = ()                    # link kinds a machine boundary may cross
    group: Tuple[str, str, str] = ("group", "groups", "each group")   # one, many, what
    planner_design: Optional[str] = None         # the planner's design it is one of
    clos_wiring: Optional[str] = None            # its wiring in the Clos model (sim/clos.py)
    clos_wiring_name: str = ""                   # ... as the planner's report names it
    clos_several_nics: bool = False              # ... a wiring of its own only with
                                                 # several NICs per server

    def takes(self) -> Tuple[str, ...]:
        return self.required + self.optional

    def check(self, spec: dict, source: str) -> None:
        """Refuse (FabricError) what this kind cannot build though every key is
        in range; the keys and link classes are checked before."""

    def layout(self, spec: dict) -> Layout:
        raise NotImplementedError

    def head(self, fabric) -> str:
        """The start of the fabric's shape, before its totals."""
        raise NotImplementedError

    def clos_leaves(self, servers: int, nics: int, down: int) -> int:
        """The leaves of `down` server ports that hold `servers` in this wiring."""
        raise NotImplementedError

    def clos_leaf(self, server: int, nic: int, nics: int, down: int) -> int:
        """The leaf (0-based) of NIC `nic` of server `server`, in this wiring."""
        raise NotImplementedError

    def clos_port(self, server: int, nic: int, nics: int, down: int) -> int:
        """Which of its leaf's `down` server ports (0-based) NIC `nic` of
        server `server` is on: what destination routing (D-mod-K) numbers
        endpoints by. Servers leaf by leaf, NIC by NIC, unless a wiring says."""
        return (server * nics + nic) % down


def _counts_known(kind: FabricKind) -> None:
    """Refuse a kind taking a count neither shared nor its own."""
    unknown = [k for k in kind.takes() if k not in COUNTS and k not in kind.counts]
    if unknown:
        raise ValueError(f"fabric kind {kind.name}: counts {unknown} are neither in "
                         "COUNTS nor its own")


# The kinds, by name, in their order; its `version` counts registrations, so
# what is derived from the kinds (the schema's fabric section) knows when to
# derive again.
REGISTRY = Registry("fabric kind", "fabric kinds", key=lambda k: (k.order, k.name),
                    check=_counts_known)
# class decorator: one instance of the class in the registry
register = REGISTRY.register


def parallel(f: dict) -> str:
    """The shape's note on parallel uplinks, when there are several."""
    par = f["uplinks_per_spine"] or 1
    return f" ({par} parallel uplinks per spine)" if par > 1 else ""


def to_spines(leaves: int, spines: int, par: int) -> List[Wire]:
    """Every leaf to every spine, `par` links each, leaf by leaf."""
    return [("leaf_spine", ("leaf", l), ("spine", j)) for l in range(1, leaves + 1)
            for j in range(1, spines + 1) for _ in range(par)]


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)


__all__ = ["COUNTS", "Count", "FabricError", "FabricKind", "LINK_CLASS_OF", "Layout",
           "REGISTRY", "Wire", "register", "parallel", "to_spines"]
