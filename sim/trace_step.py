"""A recorded job's iteration (traces/trace_model.py) as a step program
(sim/step_program.py) every rank runs, and its times: as the trace measured
its operations, and as a fabric would run them.

From each rank's times, as trace analyzers read them:
- its compute spans, merged where streams overlap, each a task of its
  measured length;
- an operation is launched by the last compute task that ended before it
  was issued (or before it started, where the trace has no issue time), or
  at the start where none did;
- a compute task waits for the operations that finished in the idle gap
  right before it (it started only once they had); a gap nothing explains
  is the host's own time, kept with the task that follows it;
- the iteration ends with a last task that waits for whatever finished
  after the last compute, and the host time after that.

Operations of one process group run one after the other (`after`), as a
communicator runs them; a send and its receive are a Broadcast over the two
ranks. The k-th operation of every group of the same shape runs in one wave,
priced together so that groups sharing links share them.

`replicas` > 1 repeats the job over more data-parallel replicas: every group
that spans the whole job spans every replica (the same bytes a rank, more
ranks), the others stay inside their replica.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from collectives import registry, schedules
from collectives.metrics import bus_factor
from collectives.registry import EQUAL_BLOCKS
from sim.step_program import StepProgram, Walk, critical_path, merged_schedule, walk
from traces.trace_model import Comm, Trace

EPS = 1e-6                     # seconds: what the trace's microsecond clock can tell apart
MAX_REPLICAS = 4096
TRACE_KEYS = {"path": "a folder of per-rank trace files, or one file",
              "iteration": "which ProfilerStep#N to read (default: the last complete one)",
              "replicas": "data-parallel replicas of the job (default 1: the job as recorded)",
              "ranks_per_server": "ranks placed on each server (default: its GPUs)",
              "rank_map": "a YAML file {rank: server} placing each rank instead"}


def trace_spec(v, fail) -> dict:
    """experiment.step.trace: a path, or {path, iteration, replicas,
    ranks_per_server, rank_map}; `fail(message)` for anything else."""
    if isinstance(v, str):
        v = {"path": v}
    if not isinstance(v, dict) or not isinstance(v.get("path"), str) or not v["path"]:
        fail(f"expected a trace's path, or a mapping with a path ({', '.join(TRACE_KEYS)}), "
             f"got {v!r}")
    unknown = [k for k in v if k not in TRACE_KEYS]
    if unknown:
        fail(f"unknown key {unknown[0]!r}; expected {', '.join(TRACE_KEYS)}")
    limits = {"iteration": (0, 1 << 31), "replicas": (1, MAX_REPLICAS),
              "ranks_per_server": (1, 1024)}
    for key, (low, high) in limits.items():
        if key in v and (isinstance(v[key], bool) or not isinstance(v[key], int)
                         or not low <= v[key] <= high):
            fail(f"{key}: expected a whole number from {low} to {high}, got {v[key]!r}")
    if "rank_map" in v and (not isinstance(v["rank_map"], str) or not v["rank_map"]):
        fail(f"rank_map: expected a file's path, got {v['rank_map']!r}")
    return {"replicas": 1, **v}


trace_spec.json_schema = {"anyOf": [{"type": "string"}, {"type": "object", "required": ["path"]}]}


@dataclass
class TraceProgram(StepProgram):
    """The program, each collective's measured seconds beside it, and its
    labels: "allreduce on dp" per collective id."""
    measured: Dict[int, float] = field(default_factory=dict)
    label: Dict[int, str] = field(default_factory=dict)
    world: int = 0
    replicas: int = 1


def program_of(trace: Trace, replicas: int = 1, itemsize: int = 4) -> TraceProgram:
    """The step program of `trace`'s iteration (see the module)."""
    p = TraceProgram(world=trace.world * replicas, replicas=replicas)
    ids: Dict[tuple, int] = {}
    for copy in range(replicas):
        for rank, rt in sorted(trace.ranks.items()):
            me = rank + copy * trace.world
            keys = [_key(trace, c, rank, copy, replicas) for c in rt.comms]
            cids = [_collective(p, ids, trace, k, c, rank, copy, replicas, itemsize)
                    for k, c in zip(keys, rt.comms)]
            p.tasks[me], p.initial[me] = _rank_tasks(rt, cids)
    return p


def _world_spanning(trace: Trace, group: str) -> bool:
    return len(trace.groups[group].ranks) == trace.world


def _key(trace: Trace, c: Comm, rank: int, copy: int, replicas: int) -> tuple:
    """What names one operation alike on every rank taking part."""
    if c.kind in ("send", "recv"):      # numbered over the pair, both ways (seq)
        return ("p2p", copy, min(rank, c.peer), max(rank, c.peer), c.group, c.seq)
    shared = replicas > 1 and _world_spanning(trace, c.group)
    return ("group", -1 if shared else copy, c.group, c.seq)


def _members(trace: Trace, c: Comm, rank: int, copy: int, replicas: int) -> List[int]:
    w = trace.world
    if c.kind in ("send", "recv"):
        src, dst = (rank, c.peer) if c.kind == "send" else (c.peer, rank)
        return [src + copy * w, dst + copy * w]
    ranks = trace.groups[c.group].ranks
    if replicas > 1 and _world_spanning(trace, c.group):
        return [r + k * w for k in range(replicas) for r in ranks]
    return [r + copy * w for r in ranks]


def _collective(p: TraceProgram, ids: Dict[tuple, int], trace: Trace, key: tuple, c: Comm,
                rank: int, copy: int, replicas: int, itemsize: int) -> int:
    """The id of the operation `key` names, made the first time a rank
    names it; its measured seconds the least any member measured (the last
    to arrive waited least)."""
    if key in ids:
        cid = ids[key]
        p.measured[cid] = min(p.measured[cid], c.dur_s)
        return cid
    cid = ids[key] = len(p.collectives)
    group = trace.groups.get(c.group)
    kind = "send/recv" if c.kind in ("send", "recv") else c.kind
    named = group.desc if group and group.desc not in ("", "undefined") else c.group
    p.label[cid] = f"{kind} on {named}"
    members = _members(trace, c, rank, copy, replicas)
    p2p = c.kind in ("send", "recv")
    collective = "broadcast" if p2p else c.kind
    elements = max(1, c.bytes // itemsize)  # an all-gather's bytes are already its output
    count = schedules.round_count(collective, len(members), elements) \
        if collective in EQUAL_BLOCKS else elements
    p.collectives.append({
        "id": cid, "name": f"{cid} {p.label[cid]}", "collective": collective, "members": members,
        "algorithm": registry.default_algorithm(collective), "root": 0 if p2p else c.root,
        "count": count, "bytes": count * itemsize, "kind": c.kind,
        "wave": (c.kind, c.bytes, len(members), c.seq) if not p2p else ("p2p", c.bytes, c.seq),
        "after": _previous(ids, key)})
    p.measured[cid] = c.dur_s
    return cid


def _previous(ids: Dict[tuple, int], key: tuple) -> Optional[int]:
    """The operation before this one on the same communicator (its seq - 1)."""
    return ids.get(key[:-1] + (key[-1] - 1,))


def compute_seconds(rt) -> float:
    """A rank's measured compute: its spans, merged where streams overlap."""
    return sum(end - start for start, end, _ in _busy(rt))


def _busy(rt) -> List[Tuple[float, float, str]]:
    """The rank's compute spans merged where they overlap: (start, end, name)."""
    out: List[list] = []
    for s in sorted(rt.compute, key=lambda s: s.start_s):
        end = s.start_s + s.dur_s
        if out and s.start_s <= out[-1][1] + EPS:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([s.start_s, end, s.name])
    return [tuple(x) for x in out]


def _released_at(c: Comm) -> float:
    """When an operation's data was ready to send: a GPU's NCCL kernel when it
    started (its stream ran it after the compute before it; the host that
    launched it ran ahead), any other operation when the host issued it."""
    if c.name.lower().startswith("nccl") or c.issued_s < 0:
        return c.start_s
    return c.issued_s


def _rank_tasks(rt, cids: List[int]) -> Tuple[List[dict], List[int]]:
    """One rank's tasks and the operations it launches at the start: its
    compute spans, and the host's own time as tasks of their own where it
    issued an operation in an idle stretch (see the module)."""
    busy = _busy(rt)
    starts, ends = [b[0] for b in busy], [b[1] for b in busy]
    issued: Dict[int, List[Tuple[float, int]]] = {}     # after span j (-1: the start)
    needed_by: Dict[int, List[Tuple[int, float]]] = {}  # before span k (len: the end)
    for c, cid in zip(rt.comms, cids):
        at = _released_at(c)
        j = _last_before(ends, at + EPS)
        issued.setdefault(j, []).append((at, cid))
        end = c.start_s + c.dur_s
        k = max(_last_before(starts, end - EPS) + 1, j + 1)   # never before its release
        needed_by.setdefault(k, []).append((cid, end))
    tasks: List[dict] = []
    initial: List[int] = []
    pos = 0.0                                  # how far the rank's time is accounted for
    for i in range(len(busy) + 1):
        last = i == len(busy)
        start, end, name = busy[i] if not last else (rt.iteration_s, rt.iteration_s, "host")
        pos = _issue(tasks, initial, sorted(issued.get(i - 1, ())), pos, start, i)
        waits = [(cid, e) for cid, e in needed_by.get(i, ()) if e > (ends[i - 1] if i else 0.0)
                 - EPS]
        woke = max([e for _, e in waits] + [pos])
        tasks.append({"seconds": (end - start) + max(0.0, start - woke),
                      "needs": [cid for cid, _ in waits], "releases": [],
                      "kind": "host" if last else "compute", "layer": i, "name": name})
        pos = max(pos, end)
    return tasks, initial


def _issue(tasks: List[dict], initial: List[int], points: List[Tuple[float, int]],
           pos: float, idle_until: float, layer: int) -> float:
    """The operations issued after the last task (`points`: (time, id)): one
    issued in the idle stretch from `pos` to `idle_until` is launched by a
    host task lasting until then; the others (issued while the next span
    ran) by the last task, or at the start. The time now accounted for."""
    for at, cid in points:
        if pos + EPS < at <= idle_until + EPS:
            tasks.append({"seconds": at - pos, "needs": [], "releases": [cid], "kind": "host",
                          "layer": layer, "name": "issue"})
            pos = at
        else:
            (tasks[-1]["releases"] if tasks else initial).append(cid)
    return pos


def _last_before(ends: List[float], t: float) -> int:
    """The index of the last of the sorted `ends` at or before `t` (-1: none)."""
    return bisect.bisect_right(ends, t) - 1


@dataclass
class TraceTimes:
    """The program walked with given collective times, and what it shows."""
    walk: Walk
    step_s: float
    compute_s: float                       # the last rank's tasks: compute and host time
    exposed_by_kind: Dict[str, float]      # label -> seconds, on the rank that ended last
    critical: Dict[str, float]             # "compute" or a label -> seconds on the path
    critical_rank: int


def times(p: TraceProgram, seconds) -> TraceTimes:
    """The program walked with `seconds(collective)` per collective."""
    w = walk(p, seconds)
    last = max(w.clock, key=lambda r: w.clock[r])
    exposed: Dict[str, float] = {}
    for x in w.waited:
        if x["rank"] == last:
            label = p.label[x["id"]]
            exposed[label] = exposed.get(label, 0.0) + x["seconds"]
    critical: Dict[str, float] = {}
    for seg in critical_path(p, w):
        label = "compute" if seg["what"] == "compute" else p.label[seg["id"]]
        critical[label] = critical.get(label, 0.0) + seg["seconds"]
    return TraceTimes(w, w.step_s, w.compute[last], exposed, critical, last)


def measured_times(p: TraceProgram) -> TraceTimes:
    """The program with each operation as long as the trace measured it: the
    iteration the trace itself shows, read through the program."""
    return times(p, lambda c: p.measured[c["id"]])


def fabric_seconds(p: TraceProgram, simulator, piece: int = 0,
                   channels: int = 1) -> Dict[int, float]:
    """Each collective's seconds on a fabric (`simulator`: sim/simulator.py's,
    over the program's ranks). A wave's collectives over disjoint ranks are
    replayed together, once per distinct shape, cut in pieces of `piece`
    elements (0: whole); each takes until its own members are done."""
    by_wave: Dict[tuple, List[dict]] = {}
    for c in p.collectives:
        by_wave.setdefault(c["wave"], []).append(c)
    shapes: Dict[tuple, List[float]] = {}
    out: Dict[int, float] = {}
    for cs in by_wave.values():
        for part in _disjoint(cs):
            shape = tuple((c["collective"], c["count"], tuple(c["members"]), c["root"])
                          for c in part)
            if shape not in shapes:
                sched = merged_schedule(part)
                outcome = simulator.replay(schedules.chunked(sched, piece) if piece else sched,
                                           channels).run()
                done: Dict[int, float] = {}
                for span in outcome.spans_one_by_one():
                    done[span["rank"]] = max(done.get(span["rank"], 0.0), span["end"])
                shapes[shape] = [max(done.get(m, 0.0) for m in c["members"]) for c in part]
            for c, seconds in zip(part, shapes[shape]):
                out[c["id"]] = seconds
    return out


def _disjoint(cs: List[dict]) -> List[List[dict]]:
    """A wave's collectives in parts whose members no two share: those that
    share a rank did not run at once on it."""
    parts: List[tuple] = []                  # (its ranks, its collectives)
    for c in cs:
        home = next((q for q in parts if q[0].isdisjoint(c["members"])), None)
        if home is None:
            home = (set(), [])
            parts.append(home)
        home[0].update(c["members"])
        home[1].append(c)
    return [q[1] for q in parts]


def nic_seconds(p: TraceProgram, nic_bps: float) -> float:
    """About how long an iteration takes at a NIC rate: the busiest rank's
    compute, and its operations' bus bytes (nccl-tests' factor) one after
    the other at `nic_bps`."""
    by_rank: Dict[int, float] = {r: sum(t["seconds"] for t in ts) for r, ts in p.tasks.items()}
    for c in p.collectives:
        wire = bus_factor(c["collective"], len(c["members"])) * c["bytes"] * 8 / nic_bps
        for r in c["members"]:
            by_rank[r] += wire
    return max(by_rank.values())
