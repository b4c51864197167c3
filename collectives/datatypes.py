"""Data types and reduction ops as nccl-tests has them (`-d`, `-o`): the
inputs each rank contributes, the reduction a receiver applies, and what
every element must hold afterwards.

Types: float (float32), half (float16), bfloat16, int8 and int32. Ops: sum,
prod, min, max and avg. numpy has no bfloat16, so one is stored as the top
16 bits of a float32: float32 -> bfloat16 rounds to nearest, ties to even
(as PyTorch's conversion does), and bfloat16 arithmetic is float32
arithmetic rounded back, as a GPU reduces it.

A reduction's result must not depend on the order the algorithm adds in
(a ring adds in a different order than a tree), so the inputs are chosen to
keep every partial result exact in its type:

- integers wrap (two's complement), and wrapping addition and multiplication
  are associative: any inputs will do;
- float sums add integers small enough that no partial sum leaves the range
  where every integer is exact (2^24 float, 2^11 half, 2^8 bfloat16): at most
  `limit // n` in magnitude, or, past `limit` ranks, 1 on a sparse pattern;
- float products multiply +-1 and at most 8 factors of +-2 per element;
- min and max never round.

avg is the exact sum divided by the rank count at the end, once: in
float32 rounded to the type for floats, truncated toward zero for integers
(NCCL's SumPostDiv for integers; for floats NCCL premultiplies by 1/n,
whose rounding depends on the order, so this lab divides once instead).
Inputs are a pure function of rank and element index with period PERIOD,
so any rank can compute what any message must hold.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import FrozenSet, Tuple

import numpy as np

PERIOD = 1031     # input element i of rank r derives from (3i + 7r) mod 1031: a prime
                  # above the rank limit, so no two ranks send the same data
TILED_MAX_BYTES = 1 << 22   # longer regions (whole buffers, at the end) are built afresh


@dataclass(frozen=True)
class DataType:
    name: str                 # nccl-tests' name, as its "type" column prints it
    storage: str              # the numpy dtype the bytes are kept in
    size: int                 # bytes per element
    exact: int                # floats: every integer up to this is exact; 0 for integers


DATATYPES = {
    "float": DataType("float", "float32", 4, 1 << 24),
    "half": DataType("half", "float16", 2, 1 << 11),
    "bfloat16": DataType("bfloat16", "uint16", 2, 1 << 8),
    "int8": DataType("int8", "int8", 1, 0),
    "int32": DataType("int32", "int32", 4, 0),
}
ALIASES = {"float32": "float", "float16": "half", "bf16": "bfloat16", "fp32": "float",
           "fp16": "half"}
TYPE_NAMES = tuple(DATATYPES) + tuple(ALIASES)     # what -d and experiment.datatype take
OPS = ("sum", "prod", "min", "max", "avg")
PROD_TWOS = 8                                      # factors of 2 in a float product, at most


def datatype(name: str) -> DataType:
    return DATATYPES[ALIASES.get(name, name)]


# --- bfloat16 ------------------------------------------------------------------------

def bf16_from_f32(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits, rounded to nearest, ties to even. A NaN stays
    a NaN (quiet, its sign kept): rounding its payload would carry into the
    exponent (0x7F800001 became infinity, 0xFFFFFFFF zero)."""
    f32 = np.ascontiguousarray(x, dtype=np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    rounded = np.where(np.isnan(f32), (bits >> 16) | 0x0040, rounded)
    return rounded.astype(np.uint16)


def bf16_to_f32(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_arith(dt: DataType, x: np.ndarray) -> np.ndarray:
    """Values in the type arithmetic is done in: float32 for the 16-bit floats."""
    if dt.name == "bfloat16":
        return bf16_to_f32(x)
    return x.astype(np.float32) if dt.name == "half" else x


def from_arith(dt: DataType, x: np.ndarray) -> np.ndarray:
    if dt.name == "bfloat16":
        return bf16_from_f32(x)
    return np.asarray(x).astype(dt.storage)


# --- inputs and expected results ------------------------------------------------------

def _base(rank: int) -> np.ndarray:
    return (3 * np.arange(PERIOD, dtype=np.int64) + 7 * rank) % PERIOD


def rank_values(dt: DataType, op: str, n: int, rank: int) -> np.ndarray:
    """One period of rank's input as exact integers (int64) before storing."""
    base, j = _base(rank), np.arange(PERIOD, dtype=np.int64)
    if dt.exact and op in ("sum", "avg"):
        m = dt.exact // n
        if m >= PERIOD // 2:
            return base - PERIOD // 2
        if m:
            return base % (2 * m + 1) - m
        sparse = -(-n // dt.exact)            # past `exact` ranks: 1 on every sparse-th
        return ((j + rank) % sparse == 0).astype(np.int64)
    if dt.exact and op == "prod":
        every = max(1, -(-n // PROD_TWOS))
        sign = np.where(base % 3 == 0, -1, 1)
        return sign * np.where((j + rank) % every == 0, 2, 1)
    if op == "prod":                          # integers: odd, so products never vanish
        return 2 * (base % 64) - 63
    return base - PERIOD // 2


def store(dt: DataType, values: np.ndarray) -> np.ndarray:
    """Integers as stored: wrapped for integer types, rounded for floats."""
    if dt.exact:
        return from_arith(dt, values.astype(np.float32))
    return values.astype(dt.storage)        # wraps modulo 2^bits


def reduce_into(dt: DataType, op: str, region: np.ndarray, data: np.ndarray) -> None:
    """region = region (op) data, in place, in the type's arithmetic."""
    if dt.name == "float" and op in ("sum", "avg"):
        region += data                                  # the common case, kept cheap
        return
    fn = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum,
          "max": np.maximum}[op]
    if dt.exact == 0:
        with np.errstate(over="ignore"):
            fn(region, data, out=region)                 # wraps
        return
    region[:] = from_arith(dt, fn(to_arith(dt, region), to_arith(dt, data)))


def finish(dt: DataType, op: str, n: int, region: np.ndarray) -> np.ndarray:
    """What a fully reduced region becomes at the end: avg divides by n."""
    if op != "avg":
        return region
    if dt.exact == 0:
        wide = region.astype(np.int64)
        return (np.sign(wide) * (np.abs(wide) // n)).astype(dt.storage)   # toward zero
    return from_arith(dt, to_arith(dt, region).astype(np.float32) / np.float32(n))


@functools.lru_cache(maxsize=4096)
def pattern(name: str, op: str, n: int, contributors: FrozenSet[int]) -> np.ndarray:
    """One period of the contributors' inputs reduced (op), as stored."""
    dt = DATATYPES[name]
    ranks = sorted(contributors)
    out = store(dt, rank_values(dt, op, n, ranks[0])).copy()
    for r in ranks[1:]:
        reduce_into(dt, op, out, store(dt, rank_values(dt, op, n, r)))
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=512)
def _tiled(name: str, op: str, n: int, contributors: FrozenSet[int], periods: int,
           final: bool) -> np.ndarray:
    one = pattern(name, op, n, contributors)
    if final:
        one = finish(DATATYPES[name], op, n, one)
    tiled = np.tile(one, periods)
    tiled.flags.writeable = False               # shared by every caller: read-only
    return tiled


class Data:
    """The data of one collective: its type and op over n ranks."""

    def __init__(self, dtype: str = "float", op: str = "sum", n: int = 2):
        self.dt, self.op, self.n = datatype(dtype), op, n
        self.storage = np.dtype(self.dt.storage)

    @property
    def key(self) -> Tuple[str, str, int]:
        return self.dt.name, self.op, self.n

    def expected(self, contributors, offset: int, length: int, final: bool = False):
        """The contributors' inputs reduced over [offset, offset + length),
        read-only (`final`: after `finish`): a view into the pattern tiled
        (a power-of-two number of periods, cached), as cheap for 16
        contributors as for one and without a copy."""
        contributors = frozenset(contributors)
        final = final and self.op == "avg" and len(contributors) == self.n
        start = offset % PERIOD
        periods = 1 << (-(-(start + length) // PERIOD) - 1).bit_length()
        if periods * PERIOD * self.dt.size > TILED_MAX_BYTES:
            one = pattern(*self.key, contributors)
            one = finish(self.dt, self.op, self.n, one) if final else one
            return np.resize(np.roll(one, -start), length)
        return _tiled(*self.key, contributors, periods, final)[start:start + length]

    def input(self, rank: int, offset: int, length: int) -> np.ndarray:
        return self.expected((rank,), offset, length)

    def reduce(self, region: np.ndarray, data: np.ndarray) -> None:
        reduce_into(self.dt, self.op, region, data)

    def finish(self, region: np.ndarray, contributors) -> None:
        """A region the collective has fully reduced takes its final value."""
        if self.op == "avg" and len(contributors) == self.n:
            region[:] = finish(self.dt, self.op, self.n, region)
