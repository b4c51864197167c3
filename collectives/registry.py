"""The names a user can ask for, in one place: collectives and their
algorithms (these derived from the algorithms that register themselves,
collectives/algorithms/). The experiment schema and the command-line flags
read these; the schedules module builds what they name. The engines that
replay them register themselves (traffic/engines/, `ENGINES`).
"""

from __future__ import annotations

from typing import Dict, Tuple

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce",
               "alltoall", "sendrecv")
# per size, NCCL's choice among what the end hosts can run (sim/nccl/endhosts.py)
AUTO = "auto"
ROOTED = ("broadcast", "reduce")
EQUAL_BLOCKS = ("allgather", "reducescatter", "alltoall")   # count is n equal blocks
REDUCING = ("allreduce", "reducescatter", "reduce")

# the algorithms register themselves (collectives/algorithms/): the names derived here
from collectives.algorithms import ALGORITHM_REGISTRY  # noqa: E402 - after what they read

ALGORITHMS: Dict[str, Tuple[str, ...]] = {
    c: tuple(a.name for a in ALGORITHM_REGISTRY.values() if c in a.collectives)
    for c in COLLECTIVES}
ALL_ALGORITHMS = tuple(sorted(ALGORITHM_REGISTRY.names()))
ALGORITHM_CHOICES = ALL_ALGORITHMS + (AUTO,)
BY_SERVER = tuple(a.name for a in ALGORITHM_REGISTRY.values() if a.by_server)
FOLDING = tuple(a.name for a in ALGORITHM_REGISTRY.values() if a.folds)


def _rings(structure: str) -> str:
    found = [a.name for a in ALGORITHM_REGISTRY.values() if a.rings == structure]
    assert len(found) == 1, f"one algorithm runs {structure} rings, not {found}"
    return found[0]


# the AllReduce's two structures in rings (sim/phases.py): one ring over every
# rank, and rings inside each server and across the servers by rail
FLAT_RING, SERVER_RINGS = _rings("flat"), _rings("by-server")
PHASED = (FLAT_RING, SERVER_RINGS)


def default_algorithm(collective: str) -> str:
    return ALGORITHMS[collective][0]
