"""Data types and reduction ops (-d, -o): every reducing collective and
algorithm, run in-process on real buffers of each type, ends with what numpy
computes from the same inputs, element for element (#wrong 0), whatever
order the algorithm reduced in; bfloat16 rounds to nearest, ties to even."""

import numpy as np
import pytest

from traffic import datatypes as D
from traffic import schedules as S
from traffic.executor import simulate
from traffic.registry import REDUCING

CASES = [(c, a) for c in REDUCING for a in S.ALGORITHMS[c]]
TYPES = ("float", "half", "bfloat16", "int8", "int32")


def numpy_reference(dtype: str, op: str, n: int, count: int) -> np.ndarray:
    """The op over every rank's input, computed by numpy on its own: floats
    in float64 (exact for these inputs), integers in their type (wrapping)."""
    dt = D.datatype(dtype)
    data = D.Data(dtype, op, n)
    stacked = np.stack([data.input(r, 0, count) for r in range(n)])
    if dt.exact:
        values = D.as_floats(dt, stacked)
        ufunc = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum,
                 "max": np.maximum}[op]
        out = ufunc.reduce(values, axis=0)
        if op == "avg":
            out = (out.astype(np.float32) / np.float32(n))
        return D.from_arith(dt, out.astype(np.float32))
    ufunc = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum,
             "max": np.maximum}[op]
    out = ufunc.reduce(stacked, axis=0, dtype=dt.storage)
    if op == "avg":
        out = np.trunc(out.astype(np.float64) / n).astype(dt.storage)
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
        ranks = simulate(collective, algorithm, n, count, 0, 7, local, dtype, op)
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
    inputs = D.as_floats(dt, data.input(3, 0, 500))
    assert len(set(inputs)) >= 2
    assert not (inputs == D.as_floats(dt, data.input(4, 0, 500))).all()
    result = D.as_floats(dt, data.expected(range(n), 0, 500, final=True))
    assert len(set(result)) >= 2


def test_bfloat16_rounds_to_nearest_ties_to_even():
    one = 1.0
    halfway_down = one + 2.0 ** -8            # halfway between 1 and 1 + 2^-7: to even, 1
    halfway_up = one + 3 * 2.0 ** -8          # halfway between 1 + 2^-7 and 1 + 2^-6: up
    above = one + 2.0 ** -8 + 2.0 ** -20      # past halfway: up
    got = D.bf16_to_f32(D.bf16_from_f32(np.array([one, halfway_down, halfway_up, above,
                                                   -halfway_up, 3.0e38], np.float32)))
    assert list(got[:5]) == [1.0, 1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, -(1 + 2.0 ** -6)]
    assert got[5] == np.float32(2.9999521e38) or np.isclose(got[5], 3.0e38, rtol=1e-2)


def test_float32_sum_inputs_are_those_of_before():
    """The default (float, sum) keeps the lab's original inputs, so earlier
    runs' data and figures stay comparable."""
    data = D.Data("float", "sum", 16)
    j = np.arange(200)
    assert (data.input(5, 0, 200) == ((3 * j + 35) % 1031 - 515).astype(np.float32)).all()


def test_a_wrong_element_is_counted_in_every_type():
    for dtype in TYPES:
        ranks = simulate("allreduce", "ring", 4, 16, dtype=dtype, op="max")
        ranks[1].buf[3] = ranks[1].buf[2] if ranks[1].buf[3] != ranks[1].buf[2] else 0
        assert [r.wrong() for r in ranks] == [0, 1, 0, 0], dtype


def test_past_256_ranks_bfloat16_sums_stay_exact():
    n = 300
    data = D.Data("bfloat16", "sum", n)
    total = sum(D.as_floats(data.dt, data.input(r, 0, 64)) for r in range(n))
    assert (D.as_floats(data.dt, data.expected(range(n), 0, 64)) == total).all()
    assert total.max() <= 256
