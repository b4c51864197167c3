"""A training step on the rank agents (programs/agent.py): each
hosted rank runs the step's plan (sim/training_step.py) for real.

Compute stands for itself as time: a layer's forward or backward pass is a
timer of its length on the agent's event loop, which keeps moving the
network's data meanwhile, as a GPU runs NCCL's kernels beside its compute.
A collective is launched when the compute task that produces its data ends
(or at the step's start), runs in launch order with at most `in_flight`
running at once on this rank (and after the collective its `after` names,
its communicator's previous operation, where it names one), and moves real data of the step's type,
checked piece by piece and at the end (#wrong), as a sweep's collectives do.
Messages carry their collective's id (the header's tag), so several share
the rank's connections; one that arrives before its collective started on
this rank waits in its executor.

    {"cmd": "step_setup", "collectives": [{"id", "collective", "algorithm",
     "count", "piece", optional "members", "root", "after"}], "tasks": [{"seconds", "needs", "releases", "kind",
     "layer"}], "initial", "in_flight", "channels", ...}
        -> {"event": "setup_done", "rank", "connections"}
    {"cmd": "step", "iter", "at"}
        -> {"event": "step_done", "rank", "iter", "t0", "t1", "compute":
            [{kind, layer, start, end}], "collectives": [{id, launch, start,
            finish, wrong, bad_chunk_elements, bytes_received}], "pieces",
            "reordered", "scale_up_bytes"}     (times in seconds after t0)
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Dict, List

from collectives import schedules
from collectives.datatypes import Data
from collectives.executor import RankExecutor


class RankStep:
    """One rank's step: its compute tasks in order and its collectives."""

    def __init__(self, rank, tasks: List[dict], executors: Dict[int, RankExecutor],
                 initial: List[int], in_flight: int, members: Dict[int, List[int]] = None,
                 after: Dict[int, int] = None):
        self.rank, self.tasks, self.executors = rank, tasks, executors
        self.initial, self.in_flight = initial, in_flight
        # a collective over a group: its ranks (the executor's peers are their
        # places in it), and where each global rank sits in it
        self.members = members or {}
        self.place = {cid: {g: i for i, g in enumerate(m)} for cid, m in self.members.items()}
        self.after = after or {}           # collective id -> the one that runs before it

    def reset(self) -> None:
        """Every collective's buffers as a step starts: before the common
        start, so copying them is not counted in the step."""
        for ex in self.executors.values():
            ex.reset()

    def start(self) -> None:
        now = self.t0 = time.monotonic()
        self.launch, self.started, self.finish = {}, {}, {}
        self.queue, self.active, self.spans = [], set(), []
        self.k, self.computing, self.t1 = 0, False, None
        for cid in self.initial:
            self.release(cid, now)
        self.compute()

    # --- collectives -------------------------------------------------------------------

    def release(self, cid: int, now: float) -> None:
        self.launch[cid] = now
        self.queue.append(cid)
        self.admit()

    def admit(self) -> None:
        """Start queued collectives in launch order, at most `in_flight` at
        once, each only once the one `after` it (its communicator's previous
        operation) finished on this rank."""
        k = 0
        while k < len(self.queue) and len(self.active) < self.in_flight:
            before = self.after.get(self.queue[k])
            if before is not None and before not in self.finish:
                k += 1
                continue
            cid = self.queue.pop(k)
            self.active.add(cid)
            self.started[cid] = time.monotonic()
            self.run(cid)

    def run(self, cid: int) -> None:
        ex, members = self.executors[cid], self.members.get(cid)
        if members is None:
            ex.run(lambda peer, seq, data: self.rank.send(peer, seq, data, cid))
        else:
            ex.run(lambda peer, seq, data: self.rank.send(members[peer], seq, data, cid))
        if ex.finished and cid not in self.finish:
            self.finish[cid] = time.monotonic()
            self.active.discard(cid)
            self.admit()
            self.compute()                  # a forward pass may have waited for it
            self._check_done()

    def arrived(self, cid: int, src: int, seq: int, data) -> None:
        if cid in self.place:
            src = self.place[cid][src]
        self.executors[cid].deliver(src, seq, data)
        if cid in self.active:
            self.run(cid)

    # --- compute -----------------------------------------------------------------------

    def compute(self) -> None:
        if self.computing or self.k >= len(self.tasks):
            return
        task = self.tasks[self.k]
        if not all(n in self.finish for n in task["needs"]):
            return
        self.computing, start = True, time.monotonic()
        self.rank.loop.at(start + task["seconds"], lambda: self.computed(task, start))

    def computed(self, task: dict, start: float) -> None:
        now = time.monotonic()
        self.spans.append({"kind": task["kind"], "layer": task["layer"], "start": start,
                           "end": now})
        self.computing, self.k = False, self.k + 1
        for cid in task["releases"]:
            self.release(cid, now)
        self.compute()
        self._check_done()

    def _check_done(self) -> None:
        if (self.t1 is None and self.k == len(self.tasks)
                and len(self.finish) == len(self.executors)):
            self.t1 = time.monotonic()

    @property
    def done(self) -> bool:
        return self.t1 is not None

    def reply(self, iteration: int) -> dict:
        t0, r = self.t0, self.rank
        out = []
        for cid, ex in sorted(self.executors.items()):
            out.append({"id": cid, "launch": self.launch[cid] - t0,
                        "start": self.started[cid] - t0, "finish": self.finish[cid] - t0,
                        "wrong": ex.wrong(), "bad_chunk_elements": ex.bad_chunk_elements,
                        "bytes_received": ex.received_bytes})
        return {"event": "step_done", "rank": r.rank, "iter": iteration, "t0": t0,
                "t1": self.t1, "compute": [{**s, "start": s["start"] - t0,
                                            "end": s["end"] - t0} for s in self.spans],
                "collectives": out, "pieces": r.pieces, "reordered": r.reordered,
                "scale_up_bytes": r.scale_up_bytes}


def step_setup(agents, collectives, tasks, initial, in_flight, transport) -> list:
    """Schedules and executors of every collective of the step, for every
    hosted rank, and the connections they need; `transport` (programs/
    agent.py's Transport) says how the ranks move the data. A collective
    with `members` (global ranks) runs over that group alone, its schedule
    built for the group (`root`: a place in it); `tasks` and `initial` are
    either the same for every rank or per rank ({"rank": [...]})."""
    data = agents.prepare(transport)
    built: Dict[tuple, dict] = {}
    datas = {agents.n: data}
    ops_of: Dict[int, list] = {r.rank: [] for r in agents.ranks}
    mine: Dict[int, dict] = {r.rank: {} for r in agents.ranks}
    members_of: Dict[int, List[int]] = {}
    for c in collectives:
        members = c.get("members")
        k = len(members) if members else agents.n
        root = c.get("root", 0)
        key = (c["collective"], c["algorithm"], k, c["count"], c["piece"], root)
        if key not in built:
            built[key] = schedules.build(c["collective"], c["algorithm"], k, c["count"],
                                         schedules.RankLayout(root, c["piece"],
                                                          1 if members else transport.local))
        if members:
            members_of[c["id"]] = members
        if k not in datas:
            datas[k] = Data(transport.dtype, transport.op, k)
        for r in agents.ranks:
            if members and r.rank not in members:
                continue
            place = members.index(r.rank) if members else r.rank
            ops = built[key][place]
            ops_of[r.rank] += [replace(op, peer=members[op.peer]) for op in ops] if members \
                else ops
            mine[r.rank][c["id"]] = RankExecutor(place, k, ops, c["collective"], c["count"],
                                                 root, datas[k])
    for r in agents.ranks:
        own = tasks[str(r.rank)] if isinstance(tasks, dict) else tasks
        first = initial[str(r.rank)] if isinstance(initial, dict) else initial
        r.executor = None
        r.step = RankStep(r, own, mine[r.rank], first, in_flight,
                          {cid: m for cid, m in members_of.items() if cid in mine[r.rank]},
                          {c["id"]: c["after"] for c in collectives
                           if c.get("after") is not None and c["id"] in mine[r.rank]})
    return agents.wire(ops_of, transport)


def run_step(agents, iteration: int, start_at: float = 0.0) -> list:
    """One step on every hosted rank, from the common start the lab chose."""
    for r in agents.ranks:
        r.iteration = iteration
    if agents.scale_up is not None:
        agents.scale_up.reset()
    for r in agents.ranks:
        r.landings, r.pieces, r.scale_up_bytes = {}, 0, 0
        r.step.reset()
    time.sleep(max(0.0, start_at - time.monotonic()))
    for r in agents.ranks:
        r.step.start()
    while any(not r.step.done for r in agents.ranks) or agents.backlog:
        agents.poll()
    return [r.step.reply(iteration) for r in agents.ranks]
