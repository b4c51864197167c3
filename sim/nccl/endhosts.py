"""NCCL's choice among what end hosts can run (``-a auto``): the lab's
schedules that stand for NCCL's algorithms, each priced by the lab's own
costs (sim/alphabeta.py: its measured latency a step, its links' rates),
the quickest per size, as NCCL's tuner takes the quickest of the pairs it
allows (tuner.py).

- **Ring**: ``rail-ring`` on servers of several GPUs (a ring channel per
  rail, every hop between servers rail-matched, as NCCL's graph search
  finds them), ``ring`` with one GPU a server;
- **Tree**: ``nccl-tree`` on servers of several GPUs (a chain in each
  server, the double binary tree across), ``tree`` otherwise.

NVLS and CollNet reduce in a switch, which end hosts cannot: they are
never chosen here, only priced by the NCCL model. The lab's connections
are TCP, which carries what NCCL's Simple protocol does; LL and LL128 are
GPU memory protocols with no counterpart on a host. NCCL runs the other
collectives by Ring only (AllToAll by its point-to-point path), so they
keep their one schedule. `algo` narrows the choice as NCCL_ALGO does
(overrides.py: ``ring``, ``tree``, ``^tree``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from collectives import registry
from sim import alphabeta
from sim.nccl.overrides import enabled

STANDS_FOR = {"ring": "ring", "rail-ring": "ring", "tree": "tree", "nccl-tree": "tree"}


@dataclass(frozen=True)
class HostChoice:
    algorithm: str                       # the lab's schedule
    nccl: str                            # the NCCL algorithm it stands for
    predicted_s: float
    table: Tuple[Tuple[str, float], ...]  # (schedule, predicted seconds) of each candidate


def candidates(collective: str, local: int, servers: int,
               algo: Optional[str] = None) -> List[str]:
    """The lab's schedules that stand for the NCCL algorithms `algo`
    leaves enabled for `collective`, on `servers` servers of `local` GPUs."""
    if collective != "allreduce":
        return [registry.default_algorithm(collective)]
    allowed = set(enabled(algo)["allreduce"]["algorithms"])
    several = local > 1 and servers >= 1
    out = [("rail-ring" if several else "ring"), ("nccl-tree" if several else "tree")]
    return [a for a in out if STANDS_FOR[a] in allowed]


def choose(collective: str, n: int, count: int, costs: alphabeta.Costs, local: int = 1,
           root: int = 0, algo: Optional[str] = None) -> HostChoice:
    """The quickest candidate by the lab's costs (ties to Ring, NCCL's
    order being Tree first is for its own constants; here Ring, the
    schedule NCCL runs most, is tried first)."""
    local = local if local > 1 and n % local == 0 else 1
    names = candidates(collective, local, n // local, algo)
    if not names:
        raise ValueError(f"-a auto: NCCL_ALGO {algo!r} leaves no algorithm the end hosts can "
                         f"run for {collective} (ring or tree)")
    table = tuple((a, alphabeta.predict(collective, a, n, count, costs, root,
                                        local if a in registry.BY_SERVER else 1))
                  for a in names)
    best = min(table, key=lambda item: item[1])
    return HostChoice(best[0], STANDS_FOR.get(best[0], best[0]), best[1], table)
