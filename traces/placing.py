"""One rank's communication operations, read but not yet placed: their
process group settled, numbered within it (seq), made Comm records.

Where record_param_comms names the group (NCCL traces), that is the group. A
gloo trace of PyTorch 2.13 names none: the c10d operator holds the group as
an object the profiler does not write. Its group is then, in this order:
  1. the one of the rank's groups (distributedInfo.pg_config) the shapes fit,
     where exactly one does: an all-gather's output over its input, a
     reduce-scatter's input over its output, an all-to-all's split count give
     the group's size; a send's or recv's peer place must be in the group and
     not the rank itself; a root must be in it;
  2. the group of the other operations whose gloo work ran on the same worker
     thread (gloo gives each group threads of its own), where those agree;
  3. the default group (every rank), where it is among the groups that fit:
     torch.distributed and DDP use it when given none. An assumption (a
     tensor-parallel all-reduce on a thread no placed operation shares would
     be taken for the default group's), stated in docs/traces.md.
Otherwise the reader refuses, naming the operation and the groups that fit.

seq numbers a group's collectives on the rank in the order they were issued;
a send or recv is numbered among the rank's point-to-point operations with the
same peer in the same group (the order both ends match them in).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from traces.trace_model import Comm, Group, RankTrace, TraceError

P2P = ("send", "recv")


@dataclass
class Pending:
    start: float
    dur: float
    kind: str
    elems: int                     # elements as nccl-tests counts the operation
    size: int                      # bytes per element
    dtype: str
    group: str                     # "" until placed
    where: str                     # "file: event at t ms", for messages
    name: str
    in_splits: Tuple[int, ...] = ()
    out_splits: Tuple[int, ...] = ()
    peer_place: int = -1           # send/recv: the peer's place in the group
    root: int = 0
    issued: float = -1.0
    group_size: int = 0            # what the shapes say of the group's size (0: nothing)
    thread: int = -1               # the gloo worker thread its work ran on (-1: none)


@dataclass
class RankRead:
    rank: int
    world: int
    source: str                    # the file's name, for messages
    groups: Dict[str, Group]
    trace: RankTrace
    pending: List[Pending]
    steps: List[int]               # the ProfilerStep numbers the file holds
    iteration: str
    comms: List[Comm] = field(default_factory=list)


def fits(p: Pending, g: Group, rank: int) -> bool:
    if rank not in g.ranks or (p.group_size and p.group_size != len(g.ranks)):
        return False
    if p.kind in P2P:
        return 0 <= p.peer_place < len(g.ranks) and g.ranks[p.peer_place] != rank
    return 0 <= p.root < len(g.ranks)


def default_group(groups: Dict[str, Group], world: int) -> str:
    everyone = [g.name for g in groups.values() if len(g.ranks) == world]
    named = [n for n in everyone if groups[n].desc == "default_pg" or n == "0"]
    return (named or everyone or [""])[0]


def place(read: RankRead) -> None:
    """Give each pending operation its group (the rules above)."""
    open_ = [p for p in read.pending if not p.group]
    if open_ and not read.groups:
        raise TraceError(f"{open_[0].where}: its process group is unknown: the trace gives no "
                         "process group's ranks (distributedInfo.pg_config).")
    candidates = {id(p): [g for g in read.groups.values() if fits(p, g, read.rank)]
                  for p in open_}
    for p in open_:
        if len(candidates[id(p)]) == 1:
            p.group = candidates[id(p)][0].name
    by_thread: Dict[int, set] = {}
    for p in read.pending:
        if p.group and p.thread >= 0:
            by_thread.setdefault(p.thread, set()).add(p.group)
    everyone = default_group(read.groups, read.world)
    for p in open_:
        if p.group:
            continue
        names = [g.name for g in candidates[id(p)]]
        shared = by_thread.get(p.thread, set()) if p.thread >= 0 else set()
        if len(shared) == 1 and next(iter(shared)) in names:
            p.group = next(iter(shared))
        elif everyone in names and not shared:
            p.group = everyone
        else:
            fit = ", ".join(f"{g.name} {list(g.ranks)}" for g in candidates[id(p)]) or "none"
            raise TraceError(f"{p.where}: the trace does not say which process group it ran "
                             f"in, and the rank's groups that fit it are: {fit}.")


def settle(read: RankRead) -> None:
    """Place, number and record the rank's operations (read.comms)."""
    place(read)
    counts: Counter = Counter()
    for p in sorted(read.pending, key=lambda p: p.issued if p.issued >= 0 else p.start):
        group = read.groups.get(p.group)
        if group is None:
            raise TraceError(f"{p.where}: its process group {p.group!r} is unknown "
                             "(its ranks are given nowhere in the trace).")
        if read.rank not in group.ranks:
            raise TraceError(f"{p.where}: rank {read.rank} is not in its process group "
                             f"{p.group} {list(group.ranks)}.")
        peer = -1
        if p.kind in P2P:
            if not 0 <= p.peer_place < len(group.ranks):
                raise TraceError(f"{p.where}: its peer (place {p.peer_place}) is not in "
                                 f"process group {p.group} {list(group.ranks)}.")
            peer = group.ranks[p.peer_place]
        key = (p.group, peer) if p.kind in P2P else (p.group,)
        read.comms.append(Comm(
            start_s=p.start, dur_s=p.dur, kind=p.kind, bytes=p.elems * p.size, dtype=p.dtype,
            group=p.group, seq=counts[key], root=p.root, peer=peer,
            in_splits=p.in_splits, out_splits=p.out_splits, issued_s=p.issued, name=p.name))
        counts[key] += 1
    read.comms.sort(key=lambda c: c.start_s)
    read.trace.comms = list(read.comms)
