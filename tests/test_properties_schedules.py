"""Every collective schedule (collectives/schedules.py) run symbolically: each
element of a buffer holds the multiset of (rank, input element) it sums, a
send carries a snapshot, the k-th send from a to b lands in the k-th
receive at b from a. For any collective, algorithm, rank count (2 to 9,
powers of two or not), element count, piece size and root, every rank
ends with exactly what the collective delivers, each contribution counted
once; every receive holds what it says it holds; both ends of a transfer
agree on its length and step; nothing is left unsent or unreceived.

And a reduction's result does not depend on its order: the project's
reduce ops (collectives/datatypes.py) over the inputs it chooses give the same
bits in any order and grouping."""

from collections import Counter, deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from collectives import datatypes as D
from collectives import schedules as S
from collectives import registry as R
from harness.collectives import as_floats

FAST = settings(max_examples=200, deadline=None)
CASES = [(c, a) for c, algs in R.ALGORITHMS.items() for a in algs]
EQUAL = ("allgather", "reducescatter", "alltoall")      # n equal blocks


# --- the symbolic run --------------------------------------------------------------

def one(rank, element):
    return Counter({(rank, element): 1})


def sums(ranks, element):
    return Counter({(r, element): 1 for r in ranks})


def start(collective, n, count, root):
    """Each rank's working buffer before the collective (nccl-tests' in-place
    layout): the whole input for the reducing collectives, the root's for
    Broadcast, the rank's own block for AllGather, nothing otherwise."""
    block = count // n
    bufs = {r: [Counter() for _ in range(count)] for r in range(n)}
    for r in range(n):
        if collective in ("allreduce", "reducescatter", "reduce") or (
                collective == "broadcast" and r == root):
            bufs[r] = [one(r, x) for x in range(count)]
        elif collective == "allgather":
            for x in range(r * block, (r + 1) * block):
                bufs[r][x] = one(r, x)
    return bufs


def run(sched, bufs):
    """Play the schedule, every rank in its own order, a receive waiting for
    its message; returns the buffers. Fails on a deadlock, a receive whose
    data is not what it says, or a mismatched transfer."""
    n = len(bufs)
    pc = {r: 0 for r in range(n)}
    wires = {}
    moved = True
    while moved:
        moved = False
        for r in range(n):
            ops = sched[r]
            while pc[r] < len(ops):
                op = ops[pc[r]]
                if op.kind == "send":
                    assert op.peer != r and 0 <= op.peer < n, op
                    span = range(op.src_offset, op.src_offset + op.length)
                    data = [one(r, x) if op.from_input else Counter(bufs[r][x]) for x in span]
                    wires.setdefault((r, op.peer), deque()).append((op.round, data))
                elif op.kind == "recv":
                    wire = wires.get((op.peer, r))
                    if not wire:
                        break                                  # wait for it
                    step, data = wire.popleft()
                    assert len(data) == op.length and step == op.round, (r, op, step, len(data))
                    for t, got in enumerate(data):
                        assert got == sums(op.contributors, op.src_offset + t), (r, op, t, got)
                        x = op.offset + t
                        bufs[r][x] = bufs[r][x] + got if op.reduce else Counter(got)
                else:
                    assert op.kind == "copy" and op.peer == r, op
                    for t in range(op.length):
                        bufs[r][op.offset + t] = one(r, op.src_offset + t)
                pc[r] += 1
                moved = True
    stuck = {r: sched[r][pc[r]] for r in range(n) if pc[r] < len(sched[r])}
    assert not stuck, f"deadlock: {stuck}"
    assert not any(wires.values()), "sent but never received"
    return bufs


def delivered(collective, n, count, root, rank):
    """What the collective must leave in `rank`'s buffer: {element: sum},
    written from its definition (elements not named are unspecified)."""
    block = count // n
    everyone = range(n)
    if collective == "allreduce":
        return {x: sums(everyone, x) for x in range(count)}
    if collective == "reducescatter":
        return {x: sums(everyone, x) for x in range(rank * block, (rank + 1) * block)}
    if collective == "allgather":
        return {x: one(x // block, x) for x in range(count)}
    if collective == "broadcast":
        return {x: one(root, x) for x in range(count)}
    if collective == "reduce":
        return {x: sums(everyone, x) for x in range(count)} if rank == root else {}
    if collective == "alltoall":          # block i of rank j's buffer: block j of rank i
        return {i * block + t: one(i, rank * block + t) for i in range(n) for t in range(block)}
    if collective == "sendrecv":
        return {x: one((rank - 1) % n, x) for x in range(count)}
    raise AssertionError(collective)


@st.composite
def collectives(draw):
    collective, algorithm = draw(st.sampled_from(CASES))
    n = draw(st.integers(2, 9))
    local = 1
    if algorithm in R.BY_SERVER:                 # hierarchical, rail-ring, nccl-tree
        local = draw(st.sampled_from([g for g in range(1, n + 1) if n % g == 0]))
    if collective in EQUAL:
        count = n * draw(st.integers(1, 4))
    else:
        count = draw(st.integers(1, 24))
    piece = draw(st.integers(0, count))
    root = draw(st.integers(0, n - 1)) if collective in R.ROOTED else 0
    return collective, algorithm, n, count, piece, root, local


@FAST
@given(collectives())
def test_every_rank_ends_with_exactly_what_the_collective_delivers(case):
    collective, algorithm, n, count, piece, root, local = case
    sched = S.build(collective, algorithm, n, count, S.RankLayout(root, piece, local))
    assert sorted(sched) == list(range(n))
    bufs = run(sched, start(collective, n, count, root))
    for r in range(n):
        for x, want in delivered(collective, n, count, root, r).items():
            assert bufs[r][x] == want, (case, r, x, bufs[r][x])


@FAST
@given(collectives())
def test_pieces_change_how_data_moves_not_how_much(case):
    """Splitting into pieces keeps every rank's bytes sent and received and
    the algorithm's steps; no piece is longer than asked."""
    collective, algorithm, n, count, piece, root, local = case
    whole = S.build(collective, algorithm, n, count, S.RankLayout(root, 0, local))
    split = S.build(collective, algorithm, n, count, S.RankLayout(root, piece, local))

    def moved(sched):
        return Counter(
            (r, op.kind, op.peer, op.round) for r, ops in sched.items() for op in ops
            for _ in range(op.length))
    assert moved(split) == moved(whole)
    if piece:
        assert all(op.length <= piece for ops in split.values() for op in ops)


# --- reduction order -----------------------------------------------------------------

REDUCE_OPS = ("sum", "min", "max", "prod")


@st.composite
def merge_orders(draw, n):
    """A random way to reduce n partial results into one: any order, any
    grouping (each merge takes two partials, reduces one into the other)."""
    live, merges = list(range(n)), []
    while len(live) > 1:
        i = draw(st.integers(0, len(live) - 1))
        a = live.pop(i)
        j = draw(st.integers(0, len(live) - 1))
        merges.append((live[j], a))                   # a reduced into live[j]
    return merges


def reduce_in(dt, op, inputs, merges):
    parts = [x.copy() for x in inputs]
    for into, src in merges:
        D.reduce_into(dt, op, parts[into], parts[src])
    survivor = {i for i in range(len(inputs))} - {src for _, src in merges}
    (last,) = survivor
    return parts[last]


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(REDUCE_OPS), st.integers(2, 9),
       st.lists(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=5, max_size=5),
                min_size=9, max_size=9), st.data())
def test_int32_reductions_give_the_same_bits_in_any_order(op, n, values, data):
    """Wrapping sum and product, min and max are associative and commutative
    in int32: any inputs, any order."""
    dt = D.datatype("int32")
    inputs = [np.array(v, dtype=np.int32) for v in values[:n]]
    got = reduce_in(dt, op, inputs, data.draw(merge_orders(n)))
    wide = np.array(values[:n], dtype=np.int64)
    if op == "sum":
        want = ((wide.sum(axis=0) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
    elif op == "prod":
        want = np.array([_wrap_prod(col) for col in wide.T], dtype=np.int32)
    else:
        want = (wide.min(axis=0) if op == "min" else wide.max(axis=0)).astype(np.int32)
    assert got.dtype == np.int32 and (got == want).all(), (op, got, want)


def _wrap_prod(column):
    out = 1
    for v in column:
        out = (out * int(v)) % 2 ** 32
    return out - 2 ** 32 if out >= 2 ** 31 else out


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(("float", "half", "bfloat16")), st.sampled_from(REDUCE_OPS),
       st.integers(2, 64), st.data())
def test_float_reductions_of_the_chosen_inputs_give_the_same_bits_in_any_order(
        dtype, op, n, data):
    """The float inputs are chosen so that every partial result is exact
    (small integers for sums, +-1 and a few 2s for products): then any
    order and grouping gives the exact result, bit for bit."""
    dt = D.datatype(dtype)
    inputs = [D.store(dt, D.rank_values(dt, op, n, r)) for r in range(n)]
    got = reduce_in(dt, op, inputs, data.draw(merge_orders(n)))
    exact = np.stack([as_floats(dt, x) for x in inputs])      # float64: exact here
    ufunc = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op]
    want = ufunc.reduce(exact, axis=0)
    assert (as_floats(dt, got) == want).all(), (dtype, op, n)
