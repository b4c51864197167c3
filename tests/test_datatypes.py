"""Data types and reduction ops (-d, -o): every reducing collective and
algorithm, run in-process on real buffers of each type, ends with what numpy
and ml_dtypes compute from the same inputs, element for element (#wrong 0),
whatever order the algorithm reduced in. The references never call the
module's own conversions: bfloat16 is ml_dtypes' (round to nearest, ties to
even), half is numpy's, integers wrap as Python's integers reduced modulo
2^bits; hypothesis compares the conversion and every op bit for bit."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from collectives import datatypes as D
from collectives import schedules as S
from collectives import registry as R
from harness.collectives import RankLayout, Values, as_floats, simulate
from collectives.registry import REDUCING

CASES = [(c, a) for c in REDUCING for a in R.ALGORITHMS[c]]
TYPES = ("float", "half", "bfloat16", "int8", "int32")
BF16 = ml_dtypes.bfloat16
UFUNC = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum,
         "max": np.maximum}
PROPERTY = settings(max_examples=400, deadline=None)     # no host-speed dependency


def ref_to_floats(dtype: str, stored: np.ndarray) -> np.ndarray:
    """Stored elements as float64, read by ml_dtypes (bfloat16) or numpy."""
    if dtype == "bfloat16":
        return np.asarray(stored, np.uint16).view(BF16).astype(np.float64)
    return np.asarray(stored).astype(np.float64)


def ref_store(dtype: str, f32: np.ndarray) -> np.ndarray:
    """float32 values rounded to the type's storage by ml_dtypes or numpy."""
    f32 = np.asarray(f32, np.float32)
    if dtype == "bfloat16":
        return f32.astype(BF16).view(np.uint16)
    return f32.astype({"float": np.float32, "half": np.float16}[dtype])


def numpy_reference(dtype: str, op: str, n: int, count: int) -> np.ndarray:
    """The op over every rank's input, computed without the module's
    arithmetic: floats in float64 (exact for these inputs) and rounded to
    the type once by ml_dtypes/numpy (avg: float32 division first, as
    documented), integers in their type (wrapping), avg truncated."""
    dt = D.datatype(dtype)
    data = D.Data(dtype, op, n)
    stacked = np.stack([data.input(r, 0, count) for r in range(n)])
    if dt.exact:
        out = UFUNC[op].reduce(ref_to_floats(dt.name, stacked), axis=0)
        if op == "avg":
            out = out.astype(np.float32) / np.float32(n)
        return ref_store(dt.name, out.astype(np.float32))
    out = UFUNC[op].reduce(stacked, axis=0, dtype=dt.storage)
    if op == "avg":
        out = np.array([math.trunc(Fraction(int(x), n)) for x in out], dtype=dt.storage)
    return out


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", D.OPS)
@pytest.mark.parametrize("collective,algorithm", CASES, ids=[f"{c}-{a}" for c, a in CASES])
def test_every_type_and_op_matches_numpy(dtype, op, collective, algorithm):
    for n in (2, 3, 5, 8):
        local = 2 if algorithm == "hierarchical" else 1
        if n % local:
            continue
        count = S.round_count(collective, n, 96)
        want = numpy_reference(dtype, op, n, count)
        ranks = simulate(collective, algorithm, n, count, RankLayout(0, 7, local), Values(dtype, op))
        assert [r.wrong() for r in ranks] == [0] * n, (n, [r.wrong() for r in ranks])
        assert sum(r.bad_chunk_elements for r in ranks) == 0
        for r in ranks:
            for offset, length, _who, _src in S.expected_regions(collective, n, count, r.rank):
                got = r.buf[offset:offset + length]
                assert got.dtype == np.dtype(D.datatype(dtype).storage)
                assert (got == want[offset:offset + length]).all(), (n, r.rank)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("op", D.OPS)
def test_inputs_vary_and_results_are_not_trivial(dtype, op):
    n = 8
    data = D.Data(dtype, op, n)
    dt = D.datatype(dtype)
    inputs = as_floats(dt, data.input(3, 0, 500))
    assert len(set(inputs)) >= 2
    assert not (inputs == as_floats(dt, data.input(4, 0, 500))).all()
    result = as_floats(dt, data.expected(range(n), 0, 500, final=True))
    assert len(set(result)) >= 2


def test_bfloat16_rounds_to_nearest_ties_to_even():
    """Ties go to the even neighbour, past-halfway up, and 3.0e38 to the
    nearest bfloat16 (0x7F62: 2^127 x (1 + 98/128)), exactly."""
    one = 1.0
    halfway_down = one + 2.0 ** -8            # halfway between 1 and 1 + 2^-7: to even, 1
    halfway_up = one + 3 * 2.0 ** -8          # halfway between 1 + 2^-7 and 1 + 2^-6: up
    above = one + 2.0 ** -8 + 2.0 ** -20      # past halfway: up
    got = D.bf16_to_f32(D.bf16_from_f32(np.array([one, halfway_down, halfway_up, above,
                                                   -halfway_up, 3.0e38], np.float32)))
    assert list(got[:5]) == [1.0, 1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, -(1 + 2.0 ** -6)]
    nearest = np.float32(3.0040553e38)
    assert nearest.view(np.uint32) & 0xFFFF == 0 and nearest.view(np.uint32) >> 16 == 0x7F62
    assert nearest == np.float32(2.0 ** 127 * (1 + 98 / 128))
    assert got[5] == nearest


def test_float32_sum_inputs_are_those_of_before():
    """The default (float, sum) keeps the lab's original inputs, so earlier
    runs' data and figures stay comparable."""
    data = D.Data("float", "sum", 16)
    j = np.arange(200)
    assert (data.input(5, 0, 200) == ((3 * j + 35) % 1031 - 515).astype(np.float32)).all()


def test_a_wrong_element_is_counted_in_every_type():
    for dtype in TYPES:
        ranks = simulate("allreduce", "ring", 4, 16, values=Values(dtype, "max"))
        ranks[1].buf[3] = ranks[1].buf[2] if ranks[1].buf[3] != ranks[1].buf[2] else 0
        assert [r.wrong() for r in ranks] == [0, 1, 0, 0], dtype


def test_past_256_ranks_bfloat16_sums_stay_exact():
    n = 300
    data = D.Data("bfloat16", "sum", n)
    total = sum(as_floats(data.dt, data.input(r, 0, 64)) for r in range(n))
    assert (as_floats(data.dt, data.expected(range(n), 0, 64)) == total).all()
    assert total.max() <= 256


# --- the conversion and the ops against ml_dtypes and numpy, bit for bit ----------------

# float32 bits -> the bfloat16 bits round-to-nearest-even gives, worked by hand
CONVERSIONS = [
    (0x3F800000, 0x3F80),    # 1.0
    (0x3F807FFF, 0x3F80),    # under halfway: down
    (0x3F808000, 0x3F80),    # halfway, the lower neighbour even: down
    (0x3F808001, 0x3F81),    # past halfway: up
    (0x3F818000, 0x3F82),    # halfway, the lower neighbour odd: up to even
    (0x3F80FFFF, 0x3F81),    # just under the next: up (truncation would keep 0x3F80)
    (0xBF818000, 0xBF82),    # negative tie: magnitude to even
    (0xBF808000, 0xBF80),    # negative tie: magnitude to even, down
    (0x80000000, 0x8000),    # -0.0 keeps its sign
    (0x7F7F7FFF, 0x7F7F),    # under the largest bfloat16's halfway: stays finite
    (0x7F7F8000, 0x7F80),    # halfway above 0x7F7F (odd): to even, which is infinity
    (0x7F7FFFFF, 0x7F80),    # float32's largest overflows to infinity
    (0xFF7FFFFF, 0xFF80),    # ... and its negative to -infinity
    (0x7F800000, 0x7F80),    # infinity stays
    (0xFF800000, 0xFF80),
    (0x00000001, 0x0000),    # the smallest subnormal: to zero
    (0x00008000, 0x0000),    # subnormal tie, even neighbour 0: down
    (0x00018000, 0x0002),    # subnormal tie, odd neighbour 1: up to 2
    (0x00008001, 0x0001),    # past halfway: up
    (0x807FFFFF, 0x8080),    # the largest subnormal rounds up to the smallest normal
]
NANS = [0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0xFF800001, 0x7F80FFFF]


def _f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("f32_bits,bf16_bits", CONVERSIONS,
                         ids=[f"{a:08x}" for a, _ in CONVERSIONS])
def test_bfloat16_conversion_edge_cases_are_worked_by_hand(f32_bits, bf16_bits):
    """Each edge of round-to-nearest-even, as worked out by hand, and
    ml_dtypes agrees (the reference is right on the edges too)."""
    x = _f32([f32_bits])
    assert int(x.astype(BF16).view(np.uint16)[0]) == bf16_bits
    assert int(D.bf16_from_f32(x)[0]) == bf16_bits


@pytest.mark.parametrize("f32_bits", NANS, ids=[f"{a:08x}" for a in NANS])
def test_a_nan_stays_a_nan(f32_bits):
    """Every NaN, whatever its payload and sign, converts to a NaN (not
    to infinity, not to zero as a carry through the payload would)."""
    back = D.bf16_to_f32(D.bf16_from_f32(_f32([f32_bits])))
    assert np.isnan(back[0])
    assert np.signbit(back[0]) == bool(f32_bits >> 31)


def _same(got_bits: np.ndarray, want_bits: np.ndarray, as_float) -> None:
    """Bit for bit, except that any NaN matches any NaN."""
    got_nan, want_nan = np.isnan(as_float(got_bits)), np.isnan(as_float(want_bits))
    assert (got_nan == want_nan).all(), (got_bits[got_nan != want_nan],
                                         want_bits[got_nan != want_nan])
    mismatch = (got_bits != want_bits) & ~want_nan
    assert not mismatch.any(), (got_bits[mismatch], want_bits[mismatch])


def _bf16_floats(bits):
    return np.asarray(bits, np.uint16).view(BF16).astype(np.float32)


F32_BITS = st.lists(st.integers(0, 2 ** 32 - 1), min_size=1, max_size=64)
BF16_PAIRS = st.lists(st.tuples(st.integers(0, 2 ** 16 - 1), st.integers(0, 2 ** 16 - 1)),
                      min_size=1, max_size=64)


@PROPERTY
@given(F32_BITS)
@example([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7F8000, 0x00018000, 0x7F800001,
          0xFFFFFFFF])
def test_bfloat16_conversion_is_ml_dtypes_bit_for_bit(bits):
    """For any float32 bits, the module's conversion is ml_dtypes' exactly
    (a NaN is a NaN in both)."""
    x = _f32(bits)
    with np.errstate(all="ignore"):
        want = x.astype(BF16).view(np.uint16)
    _same(D.bf16_from_f32(x), want, _bf16_floats)
    finite = np.isfinite(x)
    assert (D.bf16_to_f32(want)[finite] == want.view(BF16).astype(np.float32)[finite]).all()


@PROPERTY
@given(st.sampled_from(("sum", "prod", "min", "max")), BF16_PAIRS)
def test_every_bfloat16_op_is_float32_arithmetic_rounded_by_ml_dtypes(op, pairs):
    """region (op) data for any two bfloat16s: float32 arithmetic, rounded
    back to bfloat16 by ml_dtypes."""
    a, b = (np.array(col, np.uint16) for col in zip(*pairs))
    with np.errstate(all="ignore"):
        want = UFUNC[op](_bf16_floats(a), _bf16_floats(b)).astype(BF16).view(np.uint16)
        region = a.copy()
        D.reduce_into(D.datatype("bfloat16"), op, region, b)
    _same(region, want, _bf16_floats)


@PROPERTY
@given(st.lists(st.integers(0, 2 ** 16 - 1), min_size=1, max_size=64), st.integers(1, 1024))
def test_a_bfloat16_avg_divides_once_and_rounds_as_ml_dtypes(bits, n):
    a = np.array(bits, np.uint16)
    with np.errstate(all="ignore"):
        want = (_bf16_floats(a) / np.float32(n)).astype(BF16).view(np.uint16)
        got = D.finish(D.datatype("bfloat16"), "avg", n, a.copy())
    _same(got, want, _bf16_floats)


@PROPERTY
@given(st.sampled_from(("sum", "prod", "min", "max")),
       st.lists(st.tuples(st.integers(0, 2 ** 16 - 1), st.integers(0, 2 ** 16 - 1)),
                min_size=1, max_size=64), st.integers(1, 1024))
def test_every_half_op_is_float32_arithmetic_rounded_by_numpy(op, pairs, n):
    """half: float32 arithmetic rounded to float16 by numpy; avg divides the
    sum by n once."""
    a, b = (np.array(col, np.uint16).view(np.float16) for col in zip(*pairs))
    dt = D.datatype("half")
    with np.errstate(all="ignore"):
        want = UFUNC[op](a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
        region = a.copy()
        D.reduce_into(dt, op, region, b)
        avg_want = (a.astype(np.float32) / np.float32(n)).astype(np.float16)
        avg_got = D.finish(dt, "avg", n, a.copy())
    as_float = lambda x: np.asarray(x).view(np.float16)    # noqa: E731
    _same(region.view(np.uint16), want.view(np.uint16), as_float)
    _same(avg_got.view(np.uint16), avg_want.view(np.uint16), as_float)


def _wrap(x: int, bits: int) -> int:
    return (x + (1 << bits - 1)) % (1 << bits) - (1 << bits - 1)


@PROPERTY
@given(st.sampled_from((("int8", 8), ("int32", 32))), st.sampled_from(("sum", "prod", "min", "max")),
       st.data())
def test_every_integer_op_wraps_as_twos_complement(type_bits, op, data):
    """int8/int32: Python's exact integers reduced modulo 2^bits; avg
    truncates the exact quotient toward zero."""
    name, bits = type_bits
    lo, hi = -(1 << bits - 1), (1 << bits - 1) - 1
    pairs = data.draw(st.lists(st.tuples(st.integers(lo, hi), st.integers(lo, hi)),
                               min_size=1, max_size=64))
    n = data.draw(st.integers(1, 1024))
    exact = {"sum": lambda x, y: x + y, "prod": lambda x, y: x * y, "min": min, "max": max}[op]
    a, b = (np.array(col, name) for col in zip(*pairs))
    region = a.copy()
    D.reduce_into(D.datatype(name), op, region, b)
    assert region.tolist() == [_wrap(exact(x, y), bits) for x, y in pairs]
    got = D.finish(D.datatype(name), "avg", n, a.copy())
    assert got.tolist() == [math.trunc(Fraction(x, n)) for x, _ in pairs]
