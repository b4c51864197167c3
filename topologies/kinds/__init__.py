"""The kinds of fabric (``fabric.kind``), one module each; base.py holds the
class a kind fills in and the registry. Importing this package imports every
module in it, and each registers its kind: adding a kind is adding a module
(and its tests), nothing else.
"""

from __future__ import annotations

from typing import Dict, Tuple

import registries

from topologies.kinds.base import (COUNTS, LINK_CLASS_OF, REGISTRY, Count,  # noqa: F401
                                   FabricKind, Layout, register)


def discover() -> None:
    """Import every module of this package (its path may hold more than one
    folder); each registers its kind when first imported."""
    registries.discover(__name__, __path__, skip=("base",))


def kinds() -> Tuple[FabricKind, ...]:
    """Every kind, in its order."""
    return REGISTRY.all()


def names() -> Tuple[str, ...]:
    return REGISTRY.names()


def kind(name: str) -> FabricKind:
    """The kind called `name` (KeyError if none is; the schema has checked it)."""
    return REGISTRY[name]


def link_class(link_kind: str) -> str:
    """The link class (`links:`) whose rate and queue a link of this kind takes."""
    if link_kind in LINK_CLASS_OF:
        return LINK_CLASS_OF[link_kind]
    return next(k.wire_classes[link_kind] for k in kinds() if link_kind in k.wire_classes)


_wirings: list = [-1, {}]         # the registry's version, and clos_wirings() at it


def clos_wirings() -> Dict[str, FabricKind]:
    """The Clos model's wirings (sim/clos.py), each with the first kind, in the
    kinds' order, that is wired so."""
    if _wirings[0] != REGISTRY.version:
        found: Dict[str, FabricKind] = {}
        for k in kinds():
            if k.clos_wiring:
                found.setdefault(k.clos_wiring, k)
        _wirings[:] = [REGISTRY.version, found]
    return _wirings[1]


def counts() -> dict:
    """Every count of `fabric:`: the shared ones, then those of kinds of their own."""
    out = dict(COUNTS)
    for k in kinds():
        out.update((key, c) for key, c in k.counts.items() if key not in out)
    return out


discover()
