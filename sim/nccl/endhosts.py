"""NCCL's choice among what end hosts can run (``-a auto``): the lab's
schedules that stand for NCCL's algorithms, each priced by the lab's own
costs (sim/alphabeta.py: its measured latency a step, its links' rates),
the quickest per size, as NCCL's tuner takes the quickest of the pairs it
allows (tuner.py).

- **Ring**: ``rail-ring`` on servers of several GPUs (a ring channel per
  rail, every hop between servers rail-matched, as NCCL's graph search
  finds them), ``ring`` with one GPU a server; the ring AllGather and
  ReduceScatter;
- **Tree** (AllReduce): ``nccl-tree`` on servers of several GPUs (a chain
  in each server, the double binary tree across), ``tree`` otherwise;
- **PAT** (AllGather and ReduceScatter): ``pat``, only with one GPU a
  server, as NCCL connects PAT only there (init.cc: maxLocalRanks 1).

By these costs PAT moves the ring's bytes in ceil(log2 n) steps instead of
n - 1, so it is never dearer than the ring: where it is allowed it wins
every size but where the two cost the same (a lab of no latency), which
goes to Ring. NCCL's tuner charges PAT 0.75 of the ring's bandwidth (what
its GPU kernel achieves, not what the wire carries) and so goes back to
Ring at large sizes; the lab weighs what its hosts and links do.

NVLS and CollNet reduce in a switch, which end hosts cannot: they are
never chosen here, only priced by the NCCL model. The lab's connections
are TCP, which carries what NCCL's Simple protocol does; LL and LL128 are
GPU memory protocols with no counterpart on a host. NCCL runs Broadcast
and Reduce by Ring only (AllToAll by its point-to-point path), so they
keep their one schedule. `algo` narrows the choice as NCCL_ALGO does
(overrides.py: ``ring``, ``tree``, ``^tree``, ``pat``,
``ring;allgather:pat``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from collectives import registry
from collectives.algorithms import ALGORITHM_REGISTRY
from sim import alphabeta
from sim.nccl.overrides import enabled

# our schedule -> the NCCL algorithm it stands for (each algorithm says: collectives/algorithms/)
STANDS_FOR = {a.name: a.nccl for a in ALGORITHM_REGISTRY.values() if a.nccl}
PAT_COLLECTIVES = ("allgather", "reducescatter")


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
    standing = [a for a in ALGORITHM_REGISTRY.values() if a.nccl and collective in a.collectives]
    if collective == "allreduce":                # laid out by server where servers have GPUs
        several = local > 1 and servers >= 1
        out = [a.name for a in standing if a.by_server == several]
    elif collective in PAT_COLLECTIVES:          # NCCL's PAT: one GPU a node only
        out = [a.name for a in standing if local == 1 or a.nccl != "pat"]
    else:
        return [registry.default_algorithm(collective)]
    allowed = set(enabled(algo)[collective]["algorithms"])
    return [a for a in out if STANDS_FOR[a] in allowed]


def choose(collective: str, n: int, count: int, costs: alphabeta.Costs, local: int = 1,
           root: int = 0, algo: Optional[str] = None) -> HostChoice:
    """The quickest candidate by the lab's costs (ties to Ring, NCCL's
    order being Tree first is for its own constants; here Ring, the
    schedule NCCL runs most, is tried first). Ranks that are not whole
    servers of `local` GPUs are laid out one GPU a server for AllReduce;
    PAT still needs `local` 1."""
    whole = local if local > 1 and n % local == 0 else 1
    names = candidates(collective, whole if collective == "allreduce" else local,
                       n // whole, algo)
    if not names:
        known = " or ".join(sorted({STANDS_FOR[a] for a in candidates(collective, 1, n)}))
        raise ValueError(f"-a auto: NCCL_ALGO {algo!r} leaves no algorithm the end hosts can "
                         f"run for {collective} ({known})")
    table = tuple((a, alphabeta.predict(collective, a, n, count, costs, root,
                                        whole if a in registry.BY_SERVER else 1))
                  for a in names)
    best = min(table, key=lambda item: item[1])
    return HostChoice(best[0], STANDS_FOR.get(best[0], best[0]), best[1], table)
