"""Running a schedule on real float32 buffers.

`RankExecutor` runs one rank's operations in dependency order, whatever moves
the bytes: the in-process `simulate` below (tests), or the rank agents'
sockets (traffic/programs/agent.py). A send hands a copy of its region to the
transport and is done; a receive completes when its data has arrived and its
dependencies are done, is checked against the sum of its contributors' inputs,
and is added or copied into the buffer. At the end the buffer is checked
against the collective's expected result: the #wrong of nccl-tests.

Inputs are integers below 516 in magnitude (exact in float32 for any sum this lab can build),
a pure function of rank and element index, so any rank can compute what any
part of any message must hold.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from typing import Callable, Dict, FrozenSet, List, Tuple

import numpy as np

from traffic import schedules as S


PERIOD = 1031     # input element i of rank r is ((3i + 7r) mod 1031) - 515: a prime
                  # above the rank limit, so no two ranks send the same data, and sums
                  # of up to 512 ranks stay exact in float32


@functools.lru_cache(maxsize=4096)
def _pattern(contributors: FrozenSet[int]) -> np.ndarray:
    """One period of the sum of the contributors' inputs."""
    j = np.arange(PERIOD)
    return sum(((3 * j + 7 * r) % PERIOD) - PERIOD // 2 for r in contributors).astype(np.float32)


TILED_MAX_BYTES = 1 << 22   # longer regions (whole buffers, at the end) are built afresh


@functools.lru_cache(maxsize=512)
def _tiled(contributors: FrozenSet[int], periods: int) -> np.ndarray:
    tiled = np.tile(_pattern(contributors), periods)
    tiled.flags.writeable = False               # shared by every caller: read-only
    return tiled


def expected_sum(contributors, offset: int, length: int) -> np.ndarray:
    """The sum of the contributors' inputs over [offset, offset + length),
    read-only: the pattern repeats every PERIOD elements, so this is a view
    into the pattern tiled (a power-of-two number of periods, cached), as
    cheap for 16 contributors as for one and without a copy: the agents
    check every piece and send their inputs from here."""
    start = offset % PERIOD
    periods = 1 << (-(-(start + length) // PERIOD) - 1).bit_length()
    if periods * PERIOD * 4 > TILED_MAX_BYTES:
        return np.resize(np.roll(_pattern(frozenset(contributors)), -start), length)
    return _tiled(frozenset(contributors), periods)[start:start + length]


def input_data(rank: int, offset: int, length: int) -> np.ndarray:
    return expected_sum((rank,), offset, length)


class RankExecutor:
    def __init__(self, rank: int, n: int, ops: List[S.Op], collective: str, count: int,
                 root: int = 0):
        self.rank, self.n, self.ops = rank, n, ops
        self.collective, self.count, self.root = collective, count, root
        deps = S.dependencies(ops)
        self.blockers = [len(d) for d in deps]
        self.dependents: List[List[int]] = [[] for _ in ops]
        for i, ds in enumerate(deps):
            for d in ds:
                self.dependents[d].append(i)
        self.seq, self.initial = [], None
        counters: Dict[Tuple[str, int], int] = {}
        for op in ops:
            key = (op.kind, op.peer)
            self.seq.append(counters.get(key, 0))
            counters[key] = counters.get(key, 0) + 1
        self.reset()

    def reset(self) -> None:
        """A fresh iteration: the buffer as the collective starts, nothing done."""
        if self.initial is None:                 # made once, copied per iteration
            self.initial = np.zeros(self.count, dtype=np.float32)
            for offset, length in S.initial_regions(self.collective, self.n, self.count,
                                                    self.rank, self.root):
                self.initial[offset:offset + length] = input_data(self.rank, offset, length)
        self.buf = self.initial.copy()
        self.waiting = list(self.blockers)
        self.ready = deque(i for i, w in enumerate(self.waiting) if w == 0)
        now = time.monotonic()
        self.started = [now if w == 0 else 0.0 for w in self.waiting]   # ready (or posted)
        self.done = [0.0] * len(self.ops)
        self.posted: Dict[Tuple[int, int], int] = {}     # (peer, seq) -> recv op index
        self.arrived: Dict[Tuple[int, int], np.ndarray] = {}
        self.remaining = len(self.ops)
        self.bad_chunk_elements = 0
        self.received_bytes = 0

    @property
    def finished(self) -> bool:
        return self.remaining == 0

    def run(self, send: Callable[[int, int, np.ndarray], None]) -> None:
        """Do everything that can be done now; `send(peer, seq, data)` ships data."""
        while self.ready:
            i = self.ready.popleft()
            op = self.ops[i]
            if op.kind == "send":
                src = (input_data(self.rank, op.src_offset, op.length) if op.from_input
                       else self.buf[op.offset:op.offset + op.length].copy())
                send(op.peer, self.seq[i], src)
                self._complete(i)
            elif op.kind == "copy":
                self.buf[op.offset:op.offset + op.length] = input_data(
                    self.rank, op.src_offset, op.length)
                self._complete(i)
            else:
                key = (op.peer, self.seq[i])
                if key in self.arrived:
                    self._apply(i, self.arrived.pop(key))
                else:
                    self.posted[key] = i

    def deliver(self, peer: int, seq: int, data: np.ndarray) -> None:
        """Data for the seq-th receive from `peer` has arrived."""
        i = self.posted.pop((peer, seq), None)
        if i is None:
            self.arrived[(peer, seq)] = data
        else:
            self._apply(i, data)

    def _apply(self, i: int, data: np.ndarray) -> None:
        op = self.ops[i]
        if data.shape != (op.length,):
            raise RuntimeError(f"rank {self.rank}: message {self.seq[i]} from {op.peer} has "
                               f"{data.shape[0]} elements, expected {op.length}")
        want = expected_sum(op.contributors, op.src_offset, op.length)
        self.bad_chunk_elements += int(np.count_nonzero(data != want))
        self.received_bytes += data.nbytes
        region = self.buf[op.offset:op.offset + op.length]
        if op.reduce:
            region += data
        else:
            region[:] = data
        self._complete(i)

    def _complete(self, i: int) -> None:
        self.remaining -= 1
        now = self.done[i] = time.monotonic()
        for j in self.dependents[i]:
            self.waiting[j] -= 1
            if self.waiting[j] == 0:
                self.ready.append(j)
                self.started[j] = now

    def timeline(self, t0: float) -> List[dict]:
        """The iteration per step and kind of operation, in seconds after t0.
        A receive is busy from when it could start (posted, and the previous
        piece from the same peer in: one TCP stream delivers in order) to when
        its data was in; a send from ready to handed over."""
        spans: Dict[Tuple[int, str], List[float]] = {}
        stream: Dict[Tuple[str, int], float] = {}
        for i in sorted(range(len(self.ops)), key=lambda i: self.done[i]):
            op = self.ops[i]
            kind = "reduce" if op.kind == "recv" and op.reduce else op.kind
            start = max(self.started[i], stream.get((op.kind, op.peer), 0.0))
            stream[(op.kind, op.peer)] = self.done[i]
            span = spans.setdefault((op.step, kind), [start, self.done[i]])
            span[0], span[1] = min(span[0], start), max(span[1], self.done[i])
        return [{"rank": self.rank, "step": step, "kind": kind,
                 "start": round(a - t0, 6), "end": round(b - t0, 6)}
                for (step, kind), (a, b) in sorted(spans.items())]

    def wrong(self) -> int:
        """Elements of the result that differ from what the collective must give."""
        bad = 0
        for offset, length, contributors, src in S.expected_regions(
                self.collective, self.n, self.count, self.rank, self.root):
            got = self.buf[offset:offset + length]
            bad += int(np.count_nonzero(got != expected_sum(contributors, src, length)))
        return bad


def simulate(collective: str, algorithm: str, n: int, count: int, root: int = 0,
             piece_elements: int = 0, local: int = 1) -> List[RankExecutor]:
    """Run a schedule in-process, messages delivered in order of sending."""
    sched = S.build(collective, algorithm, n, count, root, piece_elements, local)
    ranks = [RankExecutor(r, n, sched[r], collective, count, root) for r in range(n)]
    wire: deque = deque()
    while not all(x.finished for x in ranks):
        for x in ranks:
            x.run(lambda peer, seq, data, src=x.rank: wire.append((peer, src, seq, data)))
        if not wire:
            stuck = [x.rank for x in ranks if not x.finished]
            raise RuntimeError(f"{collective}/{algorithm} n={n}: ranks {stuck} wait forever")
        while wire:
            dst, src, seq, data = wire.popleft()
            ranks[dst].deliver(src, seq, data)
    return ranks
