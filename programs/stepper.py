"""A training step on the rank agents (programs/agent.py): each
hosted rank runs the step's plan (sim/training_step.py) for real.

Compute stands for itself as time: a layer's forward or backward pass is a
timer of its length on the agent's event loop, which keeps moving the
network's data meanwhile, as a GPU runs NCCL's kernels beside its compute.
A collective is launched when the compute task that produces its data ends
(or at the step's start), runs in launch order with at most `in_flight`
running at once on this rank, and moves real data of the step's type,
checked piece by piece and at the end (#wrong), as a sweep's collectives do.
Messages carry their collective's id (the header's tag), so several share
the rank's connections; one that arrives before its collective started on
this rank waits in its executor.

    {"cmd": "step_setup", "collectives": [{"id", "collective", "algorithm",
     "count", "piece"}], "tasks": [{"seconds", "needs", "releases", "kind",
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
from typing import Dict, List

from collectives import schedules
from collectives.executor import RankExecutor


class RankStep:
    """One rank's step: its compute tasks in order and its collectives."""

    def __init__(self, rank, tasks: List[dict], executors: Dict[int, RankExecutor],
                 initial: List[int], in_flight: int):
        self.rank, self.tasks, self.executors = rank, tasks, executors
        self.initial, self.in_flight = initial, in_flight

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
        while self.queue and len(self.active) < self.in_flight:
            cid = self.queue.pop(0)
            self.active.add(cid)
            self.started[cid] = time.monotonic()
            self.run(cid)

    def run(self, cid: int) -> None:
        ex = self.executors[cid]
        ex.run(lambda peer, seq, data: self.rank.send(peer, seq, data, cid))
        if ex.finished and cid not in self.finish:
            self.finish[cid] = time.monotonic()
            self.active.discard(cid)
            self.admit()
            self.compute()                  # a forward pass may have waited for it
            self._check_done()

    def arrived(self, cid: int, src: int, seq: int, data) -> None:
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
    agent.py's Transport) says how the ranks move the data."""
    data = agents.prepare(transport)
    built: Dict[tuple, dict] = {}
    for c in collectives:
        key = (c["collective"], c["algorithm"], c["count"], c["piece"])
        if key not in built:
            built[key] = schedules.build(c["collective"], c["algorithm"], agents.n, c["count"],
                                         schedules.Layout(0, c["piece"], transport.local))
    ops_of = {r.rank: [op for sched in built.values() for op in sched[r.rank]]
              for r in agents.ranks}
    for r in agents.ranks:
        executors = {}
        for c in collectives:
            sched = built[(c["collective"], c["algorithm"], c["count"], c["piece"])]
            executors[c["id"]] = RankExecutor(r.rank, agents.n, sched[r.rank], c["collective"],
                                              c["count"], 0, data)
        r.executor = None
        r.step = RankStep(r, tasks, executors, initial, in_flight)
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
