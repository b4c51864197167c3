"""read_trace: a recorded job (a folder of per-rank files, or one file) read
into a Trace, whole or not at all.

Each file's format is told from its content: a Kineto trace has
"traceEvents", an execution trace "nodes" and "schema". Where execution
traces are present each is read with the Kineto trace of the same process
(same pid) and the Trace's format is "execution-trace"; otherwise the Kineto
traces are read alone. The iteration is ProfilerStep#N, by default the
latest one every file holds.

Refused, in one sentence naming the file and the event: a file that is not
complete JSON or neither format; an iteration not in every file; a rank
missing, or twice; a process group whose ranks are given nowhere, or given
differently by two ranks; an operation whose kind, data type or size
disagrees between the ranks for the same (group, seq), all-to-all splits one
rank sends that its peer does not receive, a send without its recv; a trace
with no communication.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Union

from traces import execution, kineto
from traces.placing import P2P, RankRead
from traces.trace_model import Comm, Group, Trace, TraceError


@dataclass
class File:
    path: Path
    format: str                     # "kineto" or "execution-trace"
    pid: object
    steps: List[int]
    data: dict = field(default_factory=dict, repr=False)


def trace_files(path: Path) -> List[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceError(f"{path}: no such file or folder.")
    files = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
    if not files:
        raise TraceError(f"{path}: no trace files (.json, .json.gz) in the folder.")
    return files


def sniff(path: Path) -> File:
    """The file's format, process and iterations, read once (and refused
    here when it is not complete JSON)."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, EOFError, ValueError) as e:
        raise TraceError(f"{path.name}: not complete JSON ({type(e).__name__}: "
                         f"{str(e)[:100]}).") from None
    if isinstance(data, dict) and "nodes" in data and "schema" in data:
        names = [str(n.get("name", "")) for n in data["nodes"]]
        return File(path, "execution-trace", data.get("pid"), step_numbers(names), data)
    if isinstance(data, dict) and "traceEvents" in data:
        events = data["traceEvents"]
        pid = next((e.get("pid") for e in events if e.get("ph") == "X"
                    and e.get("cat") in ("cpu_op", "user_annotation")), None)
        return File(path, "kineto", pid, step_numbers(e.get("name", "") for e in events))
    raise TraceError(f"{path.name}: neither a Kineto trace (traceEvents) nor an execution "
                     "trace (nodes, schema).")


def step_numbers(names) -> List[int]:
    return sorted({int(m.group(1)) for n in names if (m := kineto.STEP.match(str(n)))})


def choose(files: List[File], iteration: Optional[Union[int, str]]) -> int:
    if iteration is not None:
        n = int(re.sub(r"^ProfilerStep#", "", str(iteration)))
        for f in files:
            if n not in f.steps:
                raise TraceError(f"{f.path.name}: iteration ProfilerStep#{n} is not in the "
                                 f"file (it has {', '.join(f'#{k}' for k in f.steps) or 'none'}).")
        return n
    common = set.intersection(*(set(f.steps) for f in files))
    if not common:
        worst = min(files, key=lambda f: len(f.steps))
        raise TraceError(f"{worst.path.name}: no ProfilerStep#N iteration that every file holds "
                         f"(this one has {', '.join(f'#{k}' for k in worst.steps) or 'none'}).")
    return max(common)


def read_ranks(files: List[File], n: int) -> List[RankRead]:
    ets = [f for f in files if f.format == "execution-trace"]
    kinetos = [f for f in files if f.format == "kineto"]
    if not ets:
        return [kineto.read_rank(f.path, n) for f in kinetos]
    by_pid = {f.pid: f for f in kinetos}
    reads = []
    for et in ets:
        partner = by_pid.pop(et.pid, None)
        reads.append(execution.read_rank(et.data, et.path, partner and partner.path, n))
    if by_pid:
        lone = sorted(by_pid.values(), key=lambda f: f.path.name)[0]
        raise TraceError(f"{lone.path.name}: a Kineto trace with no execution trace of the "
                         "same process beside it, among execution traces.")
    return reads


def read_trace(path: Union[str, Path], iteration: Optional[Union[int, str]] = None) -> Trace:
    """The job's iteration `iteration` (N or "ProfilerStep#N"; default: the
    latest every file holds), read from `path`."""
    path = Path(path)
    files = [sniff(p) for p in trace_files(path)]
    n = choose(files, iteration)
    reads = read_ranks(files, n)
    fmt = "execution-trace" if any(f.format == "execution-trace" for f in files) else "kineto"
    trace = Trace(fmt, str(path), world_of(reads), iteration=f"ProfilerStep#{n}")
    for r in reads:
        if r.rank in trace.ranks:
            raise TraceError(f"{r.source}: rank {r.rank} again (also {trace.ranks[r.rank].source}).")
        trace.ranks[r.rank] = r.trace
    missing = sorted(set(range(trace.world)) - set(trace.ranks))
    if missing:
        raise TraceError(f"{path.name}: rank {missing[0]} of {trace.world} is missing "
                         f"(the files hold ranks {sorted(trace.ranks)}).")
    trace.groups = merged_groups(reads)
    check_agreement(reads, trace.groups)
    if not any(r.comms for r in reads):
        raise TraceError(f"{path.name}: no communication in ProfilerStep#{n}: nothing to replay.")
    return trace


def world_of(reads: List[RankRead]) -> int:
    worlds = {r.world for r in reads if r.world}
    if len(worlds) > 1:
        odd = next(r for r in reads if r.world != reads[0].world)
        raise TraceError(f"{odd.source}: world size {odd.world}, where "
                         f"{reads[0].source} says {reads[0].world}.")
    return worlds.pop() if worlds else len(reads)


def merged_groups(reads: List[RankRead]) -> Dict[str, Group]:
    groups: Dict[str, Group] = {}
    said: Dict[str, str] = {}
    for r in reads:
        for g in r.groups.values():
            if g.name in groups and groups[g.name].ranks != g.ranks:
                raise TraceError(f"{r.source}: process group {g.name} has ranks {list(g.ranks)}, "
                                 f"where {said[g.name]} gives {list(groups[g.name].ranks)}.")
            if g.name not in groups or not groups[g.name].desc:
                groups[g.name], said[g.name] = g, r.source
    return groups


def describe(c: Comm) -> str:
    return f"{c.name} ({c.kind} #{c.seq} in group {c.group}, at {c.start_s * 1e3:.3f} ms)"


def check_agreement(reads: List[RankRead], groups: Dict[str, Group]) -> None:
    """Every member of a group holds the same collectives at the same seq,
    and every send its recv."""
    by_rank = {r.rank: r for r in reads}
    index = {(r.rank, c.group, c.seq, c.peer if c.kind in P2P else -1): c
             for r in reads for c in r.comms}
    for r in reads:
        for c in r.comms:
            if c.kind in P2P:
                check_pair(r, c, by_rank, index)
                continue
            for place, member in enumerate(groups[c.group].ranks):
                other = index.get((member, c.group, c.seq, -1))
                check_same(r, c, by_rank[member], other, place, groups[c.group])


def check_same(r: RankRead, c: Comm, m: RankRead, other: Optional[Comm], place: int,
               group: Group) -> None:
    where = f"{r.source}: {describe(c)}"
    if other is None:
        raise TraceError(f"{where}: rank {m.rank} of the group has no operation #{c.seq} in it.")
    if (other.kind, other.dtype, other.bytes) != (c.kind, c.dtype, c.bytes) and c.kind != "alltoall":
        raise TraceError(f"{where}: {c.bytes} bytes of {c.dtype} {c.kind}, where {m.source} has "
                         f"{other.bytes} bytes of {other.dtype} {other.kind}.")
    if c.kind == "alltoall":
        mine = group.ranks.index(r.rank)
        if not (c.in_splits and other.out_splits):
            sent, got = c.bytes, other.bytes          # equal blocks: the same size on both
        else:
            sent, got = c.in_splits[place], other.out_splits[mine]
        if other.kind != c.kind or other.dtype != c.dtype or sent != got:
            raise TraceError(f"{where}: sends {sent} elements to rank {m.rank}, which receives "
                             f"{got} from it ({m.source}: {describe(other)}).")


def check_pair(r: RankRead, c: Comm, by_rank: Dict[int, RankRead], index) -> None:
    where = f"{r.source}: {describe(c)}"
    if c.peer not in by_rank:
        return                        # the missing rank is reported as such
    other = index.get((c.peer, c.group, c.seq, r.rank))
    want = "recv" if c.kind == "send" else "send"
    if other is None or other.kind != want or other.bytes != c.bytes:
        found = describe(other) if other else "nothing"
        raise TraceError(f"{where}: rank {c.peer} should hold the matching {want} of "
                         f"{c.bytes} bytes, and holds {found} ({by_rank[c.peer].source}).")


@lru_cache(maxsize=4)
def read_once(path: str, iteration: Optional[Union[int, str]] = None) -> Trace:
    """`read_trace`, once per path and iteration in a process (a run checks
    the trace before it starts, then replays it)."""
    return read_trace(path, iteration)
