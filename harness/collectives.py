"""Collectives run in-process on real buffers, for checking schedules and
data types without any network: every rank's executor in this process,
messages handed over in the order they were sent; and a stored value read
back as a float."""

from collections import deque
from dataclasses import dataclass
from typing import List

import numpy as np

from collectives import schedules
from collectives.schedules import RankLayout
from collectives.datatypes import Data, DataType, to_arith
from collectives.executor import RankExecutor


@dataclass(frozen=True)
class Values:
    """What the buffers hold and how they combine: nccl-tests' type and op."""
    dtype: str = "float"
    op: str = "sum"


def simulate(collective: str, algorithm: str, n: int, count: int,
             layout: RankLayout = RankLayout(), values: Values = Values()) -> List[RankExecutor]:
    """Run a schedule in-process, messages delivered in order of sending."""
    sched = schedules.build(collective, algorithm, n, count, layout)
    data = Data(values.dtype, values.op, n)
    ranks = [RankExecutor(r, n, sched[r], collective, count, layout.root, data)
             for r in range(n)]
    wire: deque = deque()
    while not all(x.finished for x in ranks):
        for x in ranks:
            x.run(lambda peer, seq, data, src=x.rank: wire.append((peer, src, seq, data)))
        stuck = [x.rank for x in ranks if not x.finished]
        if not wire and stuck:           # (all may finish on messages that arrived early)
            raise RuntimeError(f"{collective}/{algorithm} n={n}: ranks {stuck} wait forever")
        while wire:
            dst, src, seq, data = wire.popleft()
            ranks[dst].deliver(src, seq, data)
    return ranks


def expected_sum(contributors, offset: int, length: int) -> np.ndarray:
    """The float32 sum of the contributors' inputs over [offset, offset +
    length), read-only (see Data.expected)."""
    return Data("float", "sum", 2).expected(contributors, offset, length)


def as_floats(dt: DataType, x: np.ndarray) -> np.ndarray:
    """Stored values as float64."""
    return to_arith(dt, np.asarray(x, dtype=dt.storage)).astype(np.float64)
