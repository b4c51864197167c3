"""One iteration of a recorded training job, whatever format recorded it.

Per rank: the compute spans it ran (measured durations, in start order) and
the communication operations it took part in (collectives and point-to-point
operations: kind, bytes, data type, process group, all-to-all splits, when
each ran), on one clock whose 0 is the rank's iteration start. The replay
(sim/trace_step.py) derives from these times which compute waited for which
operation and which operation a compute span released, as trace analyzers do.

Names follow the project's: an operation's `kind` is a collectives/registry
COLLECTIVES name ("allreduce", ..., "alltoall") or "send"/"recv"; `dtype` one
of collectives/datatypes' TYPE_NAMES; `bytes` the rank's input message, the
size nccl-tests counts a collective by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Tuple


class TraceError(ValueError):
    """A trace the replay cannot take: one sentence naming the file and the
    event (or the rank) at fault, and what was expected."""


@dataclass(frozen=True)
class Group:
    """A process group: its name in the trace and its global ranks, in the
    group's own order (a member's place in the collective is its index)."""
    name: str
    ranks: Tuple[int, ...]
    desc: str = ""                 # the trace's description of it, where it gives one


@dataclass(frozen=True)
class Compute:
    start_s: float                 # after the rank's iteration start
    dur_s: float
    name: str
    stream: str = ""               # the stream or thread it ran on


@dataclass(frozen=True)
class Comm:
    start_s: float                 # when it began running (after the iteration start)
    dur_s: float                   # as measured
    kind: str                      # a COLLECTIVES name, or "send" / "recv"
    bytes: int                     # as nccl-tests counts it: an all-gather's output, else the input
    dtype: str                     # a TYPE_NAMES name
    group: str                     # Group.name
    seq: int                       # its number among its group's operations on this rank
    root: int = 0                  # broadcast / reduce: the root's place in the group
    peer: int = -1                 # send / recv: the global rank at the other end
    in_splits: Tuple[int, ...] = ()    # all-to-all: elements to each member (empty: equal)
    out_splits: Tuple[int, ...] = ()   # all-to-all: elements from each member
    issued_s: float = -1.0         # when the host issued it, where the trace says (else -1)
    name: str = ""                 # the event's own name, for messages


@dataclass
class RankTrace:
    rank: int
    source: str                    # the file it was read from
    iteration_s: float             # the iteration as measured on this rank
    compute: List[Compute] = field(default_factory=list)
    comms: List[Comm] = field(default_factory=list)


@dataclass
class Trace:
    format: str                    # "kineto" or "execution-trace"
    source: str                    # the folder (or file) it was read from
    world: int                     # the job's world size
    groups: Dict[str, Group] = field(default_factory=dict)
    ranks: Dict[int, RankTrace] = field(default_factory=dict)
    iteration: str = ""            # which iteration was read ("ProfilerStep#3")

    @property
    def iteration_s(self) -> float:
        """The iteration as the trace measured it: the mean of its ranks'
        (each rank's iteration span starts and ends where that rank's step
        marker fell, a little apart from the others'; a step of a
        synchronous job is, over many, the same on every rank)."""
        return sum(r.iteration_s for r in self.ranks.values()) / len(self.ranks)

    @property
    def iteration_range_s(self) -> tuple:
        """(the shortest, the longest) of the ranks' measured iterations."""
        spans = [r.iteration_s for r in self.ranks.values()]
        return min(spans), max(spans)
