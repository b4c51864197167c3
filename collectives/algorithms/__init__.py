"""The collectives' algorithms, each a class registered in `ALGORITHM_REGISTRY`
(the one registry pattern, registries/): one module of this package per
algorithm, saying its name, its place in the lists (the first algorithm of a
collective is its default), the collectives it runs and how it builds each
one's schedule from the helpers of collectives/schedules.py. A new algorithm
is one new module and its tests: the names collectives/registry.py derives
(ALGORITHMS, BY_SERVER), the flags, the experiment section, the schedules'
`build`, the engines and the simulator follow.

    @register
    class Ring(Algorithm):
        name, order = "ring", 1
        collectives = ("allreduce", "allgather", ...)

        def build(self, collective, n, count, root, local): ...
"""

from __future__ import annotations

from typing import Optional, Tuple

from registries import Registry, discover


class Algorithm:
    """One algorithm (see the package)."""
    name: str = ""
    order: int = 0
    collectives: Tuple[str, ...] = ()
    by_server: bool = False     # laid out by the GPUs per server: needs whole servers
    nccl: Optional[str] = None  # the NCCL algorithm it stands for under -a auto (sim/nccl/)
    # its AllReduce as rings the step shortcut prices phase by phase (sim/phases.py):
    # "flat" one ring over every rank, "by-server" rings inside each server and one
    # across the servers per rail; "" not rings
    rings: str = ""
    folds: bool = False         # folds extra ranks in and out round a power of two

    def build(self, collective: str, n: int, count: int, root: int, local: int):
        """The schedule (collectives/schedules.py `Schedule`) of `collective`
        on `n` ranks of `count` elements from `root`, `local` GPUs a server."""
        raise NotImplementedError

    def operations(self, collective: str, n: int) -> int:
        """About how many operations (sends and receives) its schedule of
        `collective` has on `n` ranks: by default a message to every peer
        (twice for AllReduce), as a ring's."""
        per_peer = 4 if collective == "allreduce" else 2
        return per_peer * n * (n - 1) + n

    def phase(self, step: int, n: int, local: int) -> str:
        """Which part of the algorithm a step belongs to (a timeline's
        label): by default the algorithm's name."""
        return self.name


ALGORITHM_REGISTRY = Registry("algorithm", "algorithms", key=lambda a: a.order)
register = ALGORITHM_REGISTRY.register

discover(__name__, __path__)
