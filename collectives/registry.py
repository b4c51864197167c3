"""The names a user can ask for, in one place: collectives, their algorithms,
and the engines that replay them. The experiment schema, the command-line
flags and the engine factory all read these; the schedules module builds what
they name.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class EngineInfo:
    """An engine by name: where its class lives and what it can promise."""
    module: str             # imported only when the engine is used
    cls: str
    help: str
    checks_data: bool       # every element received is checked (#wrong is a number)
    needs_lab: bool         # replays on a running lab (real packets)
    max_ranks: int = 0      # 0: no limit of its own


ENGINES: Dict[str, EngineInfo] = {
    "agents": EngineInfo("traffic.engines.agents", "RankAgents",
                         "rank processes with real, checked data (default)", True, True),
    "iperf3": EngineInfo("traffic.engines.iperf3", "Iperf3Replay",
                         "the same transfers as iperf3 flows", False, True),
    "scapy": EngineInfo("traffic.engines.scapy", "RoceAgents", "as RoCEv2 packets",
                        False, True, max_ranks=256),
    "sim": EngineInfo("traffic.engines.sim", "SimEngine",
                      "flow-level simulation on the fabric graph: no network, no root",
                      False, False),
}


def default_algorithm(collective: str) -> str:
    return ALGORITHMS[collective][0]
