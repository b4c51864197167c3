"""A schedule replayed as flows, event by event.

Each rank runs its operations as the rank agents do (traffic/executor.py):
an operation starts once the earlier operations it depends on are done; a
send hands its piece to the connection towards its peer at once (the agents
copy what they send), a receive is done once its piece has arrived and its
own dependencies are done. A connection (one per peer and channel, as the
agents open them) moves its pieces one after another, in order; all
connections with data to move share the links max-min fairly
(fairness.py), recomputed whenever one starts or stops moving. A piece
arrives at the far end its path's latency after its last byte left.

What this leaves out, on purpose: TCP's ramp-up and loss recovery, queues
beyond fair sharing, and the time the host's CPUs take.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from traffic import schedules as S
from traffic.sim.fairness import max_min_rates
from traffic.sim.network import Network

TYPE_SIZE = 4
EPSILON = 1e-12


@dataclass
class Connection:
    path: Tuple[str, ...]                       # directed links (sending interfaces)
    latency_s: float
    pieces: deque = field(default_factory=deque)   # (wire bits left, dst rank, op index)
    rate: float = 0.0                           # bits per second


@dataclass
class Outcome:
    seconds: float
    link_bytes: Dict[str, float]                # wire bytes per sending interface
    busy: List[dict]                            # per rank, step and kind: first start, last end


class Replay:
    """One collective's schedule on `network`, between endpoints `ranks`."""

    def __init__(self, network: Network, ranks: Sequence[str], sched: S.Schedule,
                 channels: int = 1, wire_per_byte: float = 1.0, hop_latency_s: float = 0.0):
        self.net, self.ranks, self.sched = network, list(ranks), sched
        self.channels, self.wire_per_byte, self.hop_latency = channels, wire_per_byte, hop_latency_s
        self.capacity = {intf: link.rate_bps for intf, link in network.links.items()}
        self.deps = {r: S.dependencies(ops) for r, ops in sched.items()}
        self.dependents = {r: [[] for _ in ops] for r, ops in sched.items()}
        for r, deps in self.deps.items():
            for i, before in enumerate(deps):
                for j in before:
                    self.dependents[r][j].append(i)
        # the k-th send from a to b is the k-th receive at b from a
        self.recv_index: Dict[Tuple[int, int, int], int] = {}
        self.send_seq: Dict[Tuple[int, int], List[int]] = {}
        for r, ops in sched.items():
            seen: Dict[Tuple[str, int], int] = {}
            for i, op in enumerate(ops):
                if op.kind in ("send", "recv"):
                    k = seen[(op.kind, op.peer)] = seen.get((op.kind, op.peer), -1) + 1
                    if op.kind == "recv":
                        self.recv_index[(op.peer, r, k)] = i
                    else:
                        self.send_seq.setdefault((r, op.peer), []).append(i)

    def run(self) -> Outcome:
        state = _State(self)
        state.start()
        while state.step():
            pass
        return state.outcome()


class _State:
    """The replay's moving parts: time, what each rank waits for, connections."""

    def __init__(self, replay: Replay):
        self.r = replay
        self.now = 0.0
        self.waiting = {r: [len(d) for d in deps] for r, deps in replay.deps.items()}
        self.done = {r: [math.nan] * len(ops) for r, ops in replay.sched.items()}
        self.started = {r: [math.nan] * len(ops) for r, ops in replay.sched.items()}
        self.arrived: Dict[Tuple[int, int], float] = {}     # (rank, recv op) -> arrival
        self.events: List[Tuple[float, int, int, int]] = []  # (time, tie, rank, recv op)
        self.conns: Dict[Tuple[int, int, int], Connection] = {}
        self.active: Dict[Tuple[int, int, int], Connection] = {}
        self.link_bytes: Dict[str, float] = {}
        self.sends_made: Dict[Tuple[int, int], int] = {}
        self.tie = 0
        self.changed = False

    # --- operations ------------------------------------------------------------

    def start(self) -> None:
        for r, waits in self.waiting.items():
            for i, w in enumerate(waits):
                if w == 0:
                    self._ready(r, i)
        self._rates()

    def _ready(self, r: int, i: int) -> None:
        self.started[r][i] = self.now
        op = self.r.sched[r][i]
        if op.kind == "send":
            self._enqueue(r, i, op)
            self._complete(r, i)
        elif op.kind == "copy":
            self._complete(r, i)
        elif (r, i) in self.arrived:
            self._complete(r, i, max(self.now, self.arrived.pop((r, i))))

    def _complete(self, r: int, i: int, when: float = None) -> None:
        self.done[r][i] = self.now if when is None else when
        for j in self.r.dependents[r][i]:
            self.waiting[r][j] -= 1
            if self.waiting[r][j] == 0:
                self._ready(r, j)

    def _enqueue(self, r: int, i: int, op) -> None:
        k = self.sends_made[(r, op.peer)] = self.sends_made.get((r, op.peer), -1) + 1
        ch = k % self.r.channels
        key = (r, op.peer, ch)
        conn = self.conns.get(key)
        if conn is None:
            links = self.r.net.path(self.r.ranks[r], self.r.ranks[op.peer], flow=ch)
            latency = sum(l.delay_s for l in links) + self.r.hop_latency * len(links)
            conn = self.conns[key] = Connection(tuple(l.intf for l in links), latency)
        bits = op.length * TYPE_SIZE * self.r.wire_per_byte * 8
        recv = self.r.recv_index[(r, op.peer, k)]
        conn.pieces.append([bits, op.peer, recv])
        if key not in self.active:
            self.active[key] = conn
            self.changed = True

    # --- time ---------------------------------------------------------------------

    def step(self) -> bool:
        """Advance to the next piece leaving or arriving; False when all is done."""
        if self.changed:
            self._rates()
        finish = min((c.pieces[0][0] / c.rate for c in self.active.values() if c.rate > 0),
                     default=math.inf)
        arrive = self.events[0][0] - self.now if self.events else math.inf
        dt = min(finish, arrive)
        if dt == math.inf:
            return False
        self._advance(max(dt, 0.0))
        while self.events and self.events[0][0] <= self.now + EPSILON:
            _, _, rank, i = heapq.heappop(self.events)
            self._arrive(rank, i)
        return True

    def _advance(self, dt: float) -> None:
        self.now += dt
        for key, conn in list(self.active.items()):
            moved = conn.rate * dt
            for intf in conn.path:
                self.link_bytes[intf] = self.link_bytes.get(intf, 0.0) + moved / 8
            head = conn.pieces[0]
            head[0] -= moved
            while conn.pieces and conn.pieces[0][0] <= EPSILON * max(1.0, conn.rate):
                _, dst, recv = conn.pieces.popleft()
                self.tie += 1
                heapq.heappush(self.events, (self.now + conn.latency_s, self.tie, dst, recv))
            if not conn.pieces:
                del self.active[key]
                self.changed = True

    def _arrive(self, rank: int, i: int) -> None:
        if self.waiting[rank][i] == 0 and math.isnan(self.done[rank][i]):
            self._complete(rank, i)
        else:
            self.arrived[(rank, i)] = self.now

    def _rates(self) -> None:
        rates = max_min_rates({key: c.path for key, c in self.active.items()}, self.r.capacity)
        for key, conn in self.active.items():
            conn.rate = rates[key]
        self.changed = False

    def outcome(self) -> Outcome:
        ends = [t for times in self.done.values() for t in times if not math.isnan(t)]
        missing = sum(math.isnan(t) for times in self.done.values() for t in times)
        if missing:
            raise RuntimeError(f"the replay stalled with {missing} operations never done")
        busy: Dict[Tuple[int, int, str], List[float]] = {}
        for r, ops in self.r.sched.items():
            for i, op in enumerate(ops):
                kind = "reduce" if op.kind == "recv" and op.reduce else op.kind
                span = busy.setdefault((r, op.step, kind), [math.inf, -math.inf])
                span[0] = min(span[0], self.started[r][i])
                span[1] = max(span[1], self.done[r][i])
        return Outcome(max(ends, default=0.0), self.link_bytes,
                       [{"rank": r, "step": step, "kind": kind, "start": a, "end": b}
                        for (r, step, kind), (a, b) in sorted(busy.items())])
