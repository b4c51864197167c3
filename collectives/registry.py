"""The names a user can ask for, in one place: collectives and their
algorithms. The experiment schema and the command-line flags read these;
the schedules module builds what they name. The engines that replay them
register themselves (traffic/engines/, `ENGINES`).
"""

from __future__ import annotations

from typing import Dict, Tuple

COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce",
               "alltoall", "sendrecv")
ALGORITHMS: Dict[str, Tuple[str, ...]] = {
    "allreduce": ("ring", "rhd", "tree", "hierarchical", "rail-ring", "nccl-tree"),
    "allgather": ("ring", "pat"),
    "reducescatter": ("ring", "pat"),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "alltoall": ("pairwise",),
    "sendrecv": ("ring",),
}
ALL_ALGORITHMS = tuple(sorted({a for names in ALGORITHMS.values() for a in names}))
# per size, NCCL's choice among what the end hosts can run (sim/nccl/endhosts.py)
AUTO = "auto"
ALGORITHM_CHOICES = ALL_ALGORITHMS + (AUTO,)
BY_SERVER = ("hierarchical", "rail-ring", "nccl-tree")   # laid out by the GPUs per server
ROOTED = ("broadcast", "reduce")
EQUAL_BLOCKS = ("allgather", "reducescatter", "alltoall")   # count is n equal blocks
REDUCING = ("allreduce", "reducescatter", "reduce")


def default_algorithm(collective: str) -> str:
    return ALGORITHMS[collective][0]
