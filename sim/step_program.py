"""A step as a program every rank runs: its compute tasks in order, and the
collectives those tasks launch and wait for, each over its group of ranks.
The hybrid TP/PP/DP step (sim/hybrid_step.py) and a recorded job's
iteration (sim/trace_step.py) are both written this way; the rank agents run
one with real data (programs/stepper.py) and `walk` times one given how long
each collective takes.

    collectives: [{"id", "collective", "algorithm", "members" (global ranks),
                   "root" (a place in members), "count", "bytes", "wave",
                   "after" (optional: the id that must finish first on the same
                   stream, as a communicator's operations run one at a time)}]
    tasks:       {rank: [{"seconds", "needs" (ids it waits for), "releases"
                          (ids it launches when done), "kind", "layer"}]}
    initial:     {rank: [ids launched at the step's start]}

A collective starts once its last member launched it and the one `after` it
finished, and takes `seconds(collective)`; a task starts when the one before
it on its rank ended and every collective it needs finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from collectives import schedules


class ProgramError(ValueError):
    """A program no rank can finish: one sentence."""


@dataclass
class StepProgram:
    collectives: List[dict] = field(default_factory=list)
    tasks: Dict[int, List[dict]] = field(default_factory=dict)
    initial: Dict[int, List[int]] = field(default_factory=dict)


@dataclass
class Walk:
    """The program as timed: when each collective was launched by its last
    member, started and finished; each rank's compute spans and the end of
    its last task; which need held each task back (`waited`)."""
    launch: Dict[int, float] = field(default_factory=dict)
    launches: Dict[int, Dict[int, float]] = field(default_factory=dict)   # per member
    start: Dict[int, float] = field(default_factory=dict)
    finish: Dict[int, float] = field(default_factory=dict)
    released_by: Dict[int, tuple] = field(default_factory=dict)   # (rank, task; -1: at start)
    clock: Dict[int, float] = field(default_factory=dict)
    compute: Dict[int, float] = field(default_factory=dict)
    spans: List[dict] = field(default_factory=list)
    waited: List[dict] = field(default_factory=list)   # {rank, task, id, seconds}

    @property
    def step_s(self) -> float:
        return max(list(self.finish.values()) + list(self.clock.values()) + [0.0])


def walk(program: StepProgram, seconds: Callable[[dict], float]) -> Walk:
    """The program timed in one pass over its events (each task and each
    collective once), however many ranks and events it has."""
    by_id = {c["id"]: c for c in program.collectives}
    w = Walk(clock={r: 0.0 for r in program.tasks}, compute={r: 0.0 for r in program.tasks})
    waiting_launch = {cid: len(c["members"]) for cid, c in by_id.items()}
    blocked: Dict[int, List[int]] = {}        # collective id -> ranks waiting for it
    behind: Dict[int, List[int]] = {}         # collective id -> ids `after` it
    k = {r: 0 for r in program.tasks}
    ready: List[int] = list(program.tasks)

    def finish(first: int) -> None:
        todo = [first]                        # and whatever waited `after` it, in turn
        while todo:
            cid = todo.pop()
            c = by_id[cid]
            w.start[cid] = max(w.launch[cid], w.finish.get(c.get("after"), 0.0))
            w.finish[cid] = w.start[cid] + seconds(c)
            ready.extend(blocked.pop(cid, ()))
            todo.extend(behind.pop(cid, ()))

    def launched(cid: int, rank: int, at: float, task: int = -1) -> None:
        if cid not in by_id:
            raise ProgramError(f"rank {rank} launches collective {cid}, which is not in the "
                               "program")
        w.launches.setdefault(cid, {})[rank] = at
        if at >= w.launch.get(cid, -1.0):
            w.launch[cid], w.released_by[cid] = at, (rank, task)
        waiting_launch[cid] -= 1
        if waiting_launch[cid] == 0:
            before = by_id[cid].get("after")
            if before is None or before in w.finish:
                finish(cid)
            else:
                behind.setdefault(before, []).append(cid)

    for r, cids in program.initial.items():
        for cid in cids:
            launched(cid, r, 0.0)
    while ready:
        r = ready.pop()
        _run_rank(program.tasks[r], r, k, w, blocked, launched)
    _check_finished(program, k, w)
    w.spans.sort(key=lambda s: (s["rank"], s["start"]))
    return w


def _run_rank(tasks: List[dict], r: int, k: Dict[int, int], w: Walk,
              blocked: Dict[int, List[int]], launched: Callable) -> None:
    """Rank `r`'s tasks from where it stopped, until one needs a collective
    not yet finished (then it waits in `blocked`) or none is left."""
    while k[r] < len(tasks):
        task = tasks[k[r]]
        missing = next((n for n in task["needs"] if n not in w.finish), None)
        if missing is not None:
            blocked.setdefault(missing, []).append(r)
            return
        start = w.clock[r]
        held: Optional[int] = None
        for n in task["needs"]:
            if w.finish[n] > start:
                start, held = w.finish[n], n
        if held is not None:
            w.waited.append({"rank": r, "task": k[r], "id": held, "seconds": start - w.clock[r]})
        w.clock[r] = start + task["seconds"]
        w.compute[r] += task["seconds"]
        if task["seconds"] > 0:
            w.spans.append({"rank": r, "kind": task["kind"], "layer": task["layer"],
                            "start": start, "end": w.clock[r]})
        for cid in task["releases"]:
            launched(cid, r, w.clock[r], k[r])
        k[r] += 1


def _check_finished(program: StepProgram, k: Dict[int, int], w: Walk) -> None:
    stuck = [r for r, tasks in program.tasks.items() if k[r] < len(tasks)]
    if stuck:
        r = stuck[0]
        need = next(n for n in program.tasks[r][k[r]]["needs"] if n not in w.finish)
        raise ProgramError(f"the program deadlocks: rank {r}'s task {k[r]} waits for "
                           f"collective {need}, which never finishes")
    never = [c["id"] for c in program.collectives if c["id"] not in w.finish]
    if never:
        raise ProgramError(f"the program deadlocks: collective {never[0]} is never launched "
                           "by all its members")


def critical_path(program: StepProgram, w: Walk) -> List[dict]:
    """What the step's end waited for, back to its start: compute tasks
    ({"what": "compute", "rank", "task", "seconds"}) and collectives
    ({"what": "comm", "id", "seconds"}), last first. From the last thing to
    end, a task goes back to the collective that held it or else to the task
    before it on its rank; a collective to the one `after` it where that
    finished last, or else to the task whose release started it."""
    by_id = {c["id"]: c for c in program.collectives}
    held = {(x["rank"], x["task"]): x["id"] for x in w.waited}
    last_rank = max(w.clock, key=lambda r: w.clock[r]) if w.clock else None
    last_cid = max(w.finish, key=lambda c: w.finish[c]) if w.finish else None
    at: Optional[tuple] = None
    if last_rank is not None and (last_cid is None or w.clock[last_rank] >= w.finish[last_cid]):
        at = ("task", last_rank, len(program.tasks[last_rank]) - 1)
    elif last_cid is not None:
        at = ("comm", last_cid)
    path: List[dict] = []
    while at is not None and len(path) <= len(w.finish) + sum(map(len, program.tasks.values())):
        if at[0] == "task":
            _, r, k = at
            if k < 0:
                break
            path.append({"what": "compute", "rank": r, "task": k,
                         "seconds": program.tasks[r][k]["seconds"]})
            at = ("comm", held[(r, k)]) if (r, k) in held else ("task", r, k - 1)
        else:
            cid = at[1]
            path.append({"what": "comm", "id": cid, "seconds": w.finish[cid] - w.start[cid]})
            before = by_id[cid].get("after")
            if before is not None and w.finish[before] > w.launch[cid]:
                at = ("comm", before)
            else:
                r, k = w.released_by[cid]
                at = ("task", r, k)
    return path


def merged_schedule(collectives: List[dict]) -> schedules.Schedule:
    """Collectives that run at once as one schedule over the global ranks (no
    data): what the simulator replays to price them together."""
    out: schedules.Schedule = {}
    for c in collectives:
        members = c["members"]
        sched = schedules.build(c["collective"], c["algorithm"], len(members), c["count"],
                                schedules.RankLayout(c["root"]), data=False)
        for local, ops in sched.items():
            out.setdefault(members[local], []).extend(
                schedules.Op(op.kind, members[op.peer], op.offset, op.length, op.reduce,
                             op.contributors, op.src_offset, op.from_input, op.round)
                for op in ops)
    return out
