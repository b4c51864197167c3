"""Running a schedule on real buffers of any data type (collectives/datatypes.py).

`RankExecutor` runs one rank's operations in dependency order, whatever moves
the bytes: harness/collectives.py's in-process `simulate` (tests), or the rank agents'
sockets (programs/agent.py). A send hands a copy of its region to the
transport and is done; a receive completes when its data has arrived and its
dependencies are done, is checked against its contributors' inputs reduced
(the op), and is reduced or copied into the buffer. At the end the buffer is
checked against the collective's expected result: the #wrong of nccl-tests.

Inputs are a pure function of rank and element index, chosen so that every
reduction is exact in its type whatever order an algorithm reduces in
(collectives/datatypes.py), so any rank can compute what any part of any message
must hold.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable, Dict, List, Tuple

import numpy as np

from collectives import schedules
from collectives.datatypes import Data


class RankExecutor:
    def __init__(self, rank: int, n: int, ops: List[schedules.Op], collective: str, count: int,
                 root: int = 0, data: Data = None):
        self.rank, self.n, self.ops = rank, n, ops
        self.collective, self.count, self.root = collective, count, root
        self.data = data or Data("float", "sum", n)
        deps = schedules.dependencies(ops)
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
            self.initial = np.zeros(self.count, dtype=self.data.storage)
            for offset, length in schedules.initial_regions(self.collective, self.n, self.count,
                                                    self.rank, self.root):
                self.initial[offset:offset + length] = self.data.input(self.rank, offset, length)
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
                src = (self.data.input(self.rank, op.src_offset, op.length) if op.from_input
                       else self.buf[op.offset:op.offset + op.length].copy())
                send(op.peer, self.seq[i], src)
                self._complete(i)
            elif op.kind == "copy":
                self.buf[op.offset:op.offset + op.length] = self.data.input(
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
        want = self.data.expected(op.contributors, op.src_offset, op.length)
        self.bad_chunk_elements += int(np.count_nonzero(data != want))
        self.received_bytes += data.nbytes
        region = self.buf[op.offset:op.offset + op.length]
        if op.reduce:
            self.data.reduce(region, data)
        else:
            region[:] = data
        self._complete(i)

    def _complete(self, i: int) -> None:
        self.remaining -= 1
        if self.remaining == 0 and self.data.op == "avg":
            for offset, length, contributors, _src in schedules.expected_regions(
                    self.collective, self.n, self.count, self.rank, self.root):
                self.data.finish(self.buf[offset:offset + length], contributors)
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
            span = spans.setdefault((op.round, kind), [start, self.done[i]])
            span[0], span[1] = min(span[0], start), max(span[1], self.done[i])
        return [{"rank": self.rank, "step": step, "kind": kind,
                 "start": round(a - t0, 6), "end": round(b - t0, 6)}
                for (step, kind), (a, b) in sorted(spans.items())]

    def wrong(self) -> int:
        """Elements of the result that differ from what the collective must give."""
        bad = 0
        for offset, length, contributors, src in schedules.expected_regions(
                self.collective, self.n, self.count, self.rank, self.root):
            got = self.buf[offset:offset + length]
            want = self.data.expected(contributors, src, length, final=True)
            bad += int(np.count_nonzero(got != want))
        return bad
