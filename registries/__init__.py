"""The one registry every extension point of the project is: routing
policies (policies/), network technologies (networks/), fabric kinds
(topologies/kinds/), switch roles (topologies/roles.py), GPU generations
(topologies/gpus/) and server models (topologies/servers/).

A registry holds named objects, one per name, in its order; a class
decorated with its `register` is registered as one instance of itself, any
other object as it is. `discover` imports every module of a package, so a
variant is one new module (and its tests): each registers itself on import.

    ROLES = Registry("switch role", "switch roles")
    ROLES.register(Role("leaf", ...))
    ROLES["leaf"], ROLES.names(), "leaf" in ROLES

What is derived from a registry (--policy's choices, the JSON Schema's
enums, the docs' lists) asks it for its names; `version` counts changes, so
what caches a derivation knows when to derive again. The bottom layer:
nothing here imports another package of the project.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from typing import Callable, Dict, Iterable, Iterator, Optional, Tuple


class Registry(Mapping):
    """Named objects, by name, in order: `key(obj)` where one is given (ties
    in registration order), else registration order. `check(obj)` raises
    ValueError for an object the registry must refuse (beyond a name taken)."""

    def __init__(self, one: str, many: str, key: Optional[Callable] = None,
                 check: Optional[Callable] = None):
        self.one, self.many = one, many
        self._key, self._check = key, check
        self._by_name: Dict[str, object] = {}
        self._ordered: Optional[Tuple[object, ...]] = None
        self.version = 0

    def register(self, given):
        """Register `given` (a class: one instance of it) under its `name`;
        returns `given`, so that it serves as a class decorator."""
        self.add(given() if isinstance(given, type) else given)
        return given

    def add(self, obj) -> None:
        name = getattr(obj, "name", "")
        if not name:
            raise ValueError(f"a {self.one} needs a name, got {name!r}")
        if name in self._by_name:
            raise ValueError(f"two {self.many} are called {name!r}")
        if self._check is not None:
            self._check(obj)
        self._by_name[name] = obj
        self._changed()

    def remove(self, name: str) -> None:
        del self._by_name[name]
        self._changed()

    def _changed(self) -> None:
        self._ordered = None
        self.version += 1

    def all(self) -> Tuple[object, ...]:
        """Every object, in the registry's order."""
        if self._ordered is None:
            found = tuple(self._by_name.values())
            self._ordered = tuple(sorted(found, key=self._key)) if self._key else found
        return self._ordered

    def names(self) -> Tuple[str, ...]:
        """Every name, in the registry's order: what --help and the schema list."""
        return tuple(obj.name for obj in self.all())

    def find(self, name: str):
        """The object called `name`, or ValueError: one sentence naming those there are."""
        try:
            return self._by_name[name]
        except KeyError:
            raise ValueError(f"no {self.one} called {name!r}; there are: "
                             f"{', '.join(self.names())}") from None

    def __getitem__(self, name: str):
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Registry({self.many}: {', '.join(self.names())})"


def discover(package: str, path: Iterable[str], skip: Tuple[str, ...] = ()) -> None:
    """Import every module of `package` (its `__path__`, which may hold more
    than one folder) but those in `skip`; each registers what it defines."""
    for module in pkgutil.iter_modules(path):
        if module.name not in skip:
            importlib.import_module(f"{package}.{module.name}")


__all__ = ["Registry", "discover"]
