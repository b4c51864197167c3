"""Independent, hand-derived tests for collectives/schedules.py and collectives/datatypes.py.

Every expected schedule below was enumerated by hand from the algorithms'
descriptions (who sends which block to whom at which step, and what each
receive must hold); no expectation is computed with the modules' own
functions or constants. Data types are checked against ml_dtypes, numpy and
Python integers, never against the module's own conversions.
"""

import math

import ml_dtypes
import numpy as np
import pytest

from collectives import datatypes as D
from collectives import schedules as S
from harness.collectives import as_floats

BF16 = ml_dtypes.bfloat16


# --- notation ---------------------------------------------------------------------------
# An operation as a plain tuple with every field spelled out:
# (kind, peer, offset, length, reduce, contributors, src_offset, from_input, step)

def snd(peer, block, step, fi=False):
    off, ln = block
    return ("send", peer, off, ln, False, frozenset(), off, fi, step)


def rcv(peer, block, step, contrib, red=False, src=None):
    off, ln = block
    return ("recv", peer, off, ln, red, frozenset(contrib), off if src is None else src, False, step)


def cpy(rank, block):
    off, ln = block
    return ("copy", rank, off, ln, False, frozenset(), off, False, 0)


def flat(op):
    numbers = (op.peer, op.offset, op.length, op.src_offset, op.round)
    assert all(type(v) is int for v in numbers), numbers    # not 3.0 for 3
    return (op.kind, op.peer, op.offset, op.length, op.reduce, op.contributors,
            op.src_offset, op.from_input, op.round)


def table(sched):
    return {r: [flat(o) for o in ops] for r, ops in sched.items()}


# --- round_count and bounds -----------------------------------------------------------------

@pytest.mark.parametrize("collective,n,count,want", [
    ("allgather", 4, 10, 8), ("allgather", 4, 8, 8), ("allgather", 4, 3, 4),
    ("allgather", 4, 7, 4), ("reducescatter", 3, 11, 9), ("alltoall", 5, 14, 10),
    ("allreduce", 4, 10, 10), ("allreduce", 4, 0, 1), ("allreduce", 4, -5, 1),
    ("broadcast", 3, 1, 1), ("sendrecv", 3, 2, 2),
])
def test_round_count(collective, n, count, want):
    assert S.round_count(collective, n, count) == want


@pytest.mark.parametrize("count,parts,want", [
    (10, 4, [(0, 3), (3, 3), (6, 2), (8, 2)]),
    (8, 4, [(0, 2), (2, 2), (4, 2), (6, 2)]),
    (3, 4, [(0, 1), (1, 1), (2, 1), (3, 0)]),
    (7, 3, [(0, 3), (3, 2), (5, 2)]),
    (5, 1, [(0, 5)]),
])
def test_bounds(count, parts, want):
    assert S.bounds(count, parts) == want


# --- ring family -------------------------------------------------------------------------------

def test_ring_allreduce_3_ranks_by_hand():
    B0, B1, B2 = (0, 2), (2, 1), (3, 1)          # count 4 cut into 3: 2, 1, 1
    al = range(3)
    want = {
        0: [snd(1, B2, 0), rcv(2, B1, 0, {2}, True), snd(1, B1, 1), rcv(2, B0, 1, {2, 1}, True),
            snd(1, B0, 2), rcv(2, B2, 2, al), snd(1, B2, 3), rcv(2, B1, 3, al)],
        1: [snd(2, B0, 0), rcv(0, B2, 0, {0}, True), snd(2, B2, 1), rcv(0, B1, 1, {0, 2}, True),
            snd(2, B1, 2), rcv(0, B0, 2, al), snd(2, B0, 3), rcv(0, B2, 3, al)],
        2: [snd(0, B1, 0), rcv(1, B0, 0, {1}, True), snd(0, B0, 1), rcv(1, B2, 1, {1, 0}, True),
            snd(0, B2, 2), rcv(1, B1, 2, al), snd(0, B1, 3), rcv(1, B0, 3, al)],
    }
    assert table(S.build("allreduce", "ring", 3, 4)) == want
    assert table(S.ring_allreduce(3, 4)) == want


def test_ring_allreduce_4_ranks_transfers():
    # every rank sends one block of 2 to its successor at each of 2(n-1) = 6 steps
    got = S.transfers(S.build("allreduce", "ring", 4, 8))
    want = sorted((s, r, (r + 1) % 4, 2) for s in range(6) for r in range(4))
    assert got == want
    assert got[:4] == [(0, 0, 1, 2), (0, 1, 2, 2), (0, 2, 3, 2), (0, 3, 0, 2)]


def test_ring_allgather_4_ranks_by_hand():
    b = {k: (2 * k, 2) for k in range(4)}
    want = {
        0: [snd(1, b[0], 0), rcv(3, b[3], 0, {3}), snd(1, b[3], 1), rcv(3, b[2], 1, {2}),
            snd(1, b[2], 2), rcv(3, b[1], 2, {1})],
        1: [snd(2, b[1], 0), rcv(0, b[0], 0, {0}), snd(2, b[0], 1), rcv(0, b[3], 1, {3}),
            snd(2, b[3], 2), rcv(0, b[2], 2, {2})],
        2: [snd(3, b[2], 0), rcv(1, b[1], 0, {1}), snd(3, b[1], 1), rcv(1, b[0], 1, {0}),
            snd(3, b[0], 2), rcv(1, b[3], 2, {3})],
        3: [snd(0, b[3], 0), rcv(2, b[2], 0, {2}), snd(0, b[2], 1), rcv(2, b[1], 1, {1}),
            snd(0, b[1], 2), rcv(2, b[0], 2, {0})],
    }
    assert table(S.build("allgather", "ring", 4, 8)) == want


def test_ring_reducescatter_4_ranks_by_hand():
    b = {k: (2 * k, 2) for k in range(4)}
    want = {
        0: [snd(1, b[3], 0), rcv(3, b[2], 0, {3}, True), snd(1, b[2], 1),
            rcv(3, b[1], 1, {3, 2}, True), snd(1, b[1], 2), rcv(3, b[0], 2, {3, 2, 1}, True)],
        1: [snd(2, b[0], 0), rcv(0, b[3], 0, {0}, True), snd(2, b[3], 1),
            rcv(0, b[2], 1, {0, 3}, True), snd(2, b[2], 2), rcv(0, b[1], 2, {0, 3, 2}, True)],
        2: [snd(3, b[1], 0), rcv(1, b[0], 0, {1}, True), snd(3, b[0], 1),
            rcv(1, b[3], 1, {1, 0}, True), snd(3, b[3], 2), rcv(1, b[2], 2, {1, 0, 3}, True)],
        3: [snd(0, b[2], 0), rcv(2, b[1], 0, {2}, True), snd(0, b[1], 1),
            rcv(2, b[0], 1, {2, 1}, True), snd(0, b[0], 2), rcv(2, b[3], 2, {2, 1, 0}, True)],
    }
    assert table(S.build("reducescatter", "ring", 4, 8)) == want


# --- trees -----------------------------------------------------------------------------------

W = (0, 5)


def test_tree_allreduce_4_ranks_by_hand():
    al = range(4)
    want = {
        0: [rcv(1, W, 1, {1, 3}, True), rcv(2, W, 1, {2}, True), snd(1, W, 3), snd(2, W, 3)],
        1: [rcv(3, W, 0, {3}, True), snd(0, W, 1), rcv(0, W, 3, al), snd(3, W, 4)],
        2: [snd(0, W, 1), rcv(0, W, 3, al)],
        3: [snd(1, W, 0), rcv(1, W, 4, al)],
    }
    assert table(S.build("allreduce", "tree", 4, 5)) == want


def test_tree_allreduce_5_ranks_by_hand():
    al = range(5)
    want = {
        0: [rcv(1, W, 1, {1, 3, 4}, True), rcv(2, W, 1, {2}, True), snd(1, W, 3), snd(2, W, 3)],
        1: [rcv(3, W, 0, {3}, True), rcv(4, W, 0, {4}, True), snd(0, W, 1), rcv(0, W, 3, al),
            snd(3, W, 4), snd(4, W, 4)],
        2: [snd(0, W, 1), rcv(0, W, 3, al)],
        3: [snd(1, W, 0), rcv(1, W, 4, al)],
        4: [snd(1, W, 0), rcv(1, W, 4, al)],
    }
    assert table(S.build("allreduce", "tree", 5, 5)) == want


def test_tree_allreduce_7_ranks_by_hand():
    al = range(7)
    leaf = lambda parent: [snd(parent, W, 0), rcv(parent, W, 4, al)]   # noqa: E731
    want = {
        0: [rcv(1, W, 1, {1, 3, 4}, True), rcv(2, W, 1, {2, 5, 6}, True), snd(1, W, 3),
            snd(2, W, 3)],
        1: [rcv(3, W, 0, {3}, True), rcv(4, W, 0, {4}, True), snd(0, W, 1), rcv(0, W, 3, al),
            snd(3, W, 4), snd(4, W, 4)],
        2: [rcv(5, W, 0, {5}, True), rcv(6, W, 0, {6}, True), snd(0, W, 1), rcv(0, W, 3, al),
            snd(5, W, 4), snd(6, W, 4)],
        3: leaf(1), 4: leaf(1), 5: leaf(2), 6: leaf(2),
    }
    assert table(S.build("allreduce", "tree", 7, 5)) == want


def test_tree_allreduce_8_ranks_has_height_3():
    sched = table(S.build("allreduce", "tree", 8, 5))
    # rank 7 hangs under 3 (depth 3): sends at step 0, hears back at step 3 + 3 = 6
    assert sched[7] == [snd(3, W, 0), rcv(3, W, 6, range(8))]
    assert sched[3] == [rcv(7, W, 0, {7}, True), snd(1, W, 1), rcv(1, W, 5, range(8)),
                        snd(7, W, 6)]
    assert sched[0][:2] == [rcv(1, W, 2, {1, 3, 4, 7}, True), rcv(2, W, 2, {2, 5, 6}, True)]
    assert sched[0][2:] == [snd(1, W, 4), snd(2, W, 4)]


# --- recursive halving-doubling --------------------------------------------------------------

def test_rhd_4_ranks_by_hand():
    # count 10 over p = 4 blocks: (0,3) (3,3) (6,2) (8,2)
    al = range(4)
    want = {
        0: [snd(2, (6, 4), 1), rcv(2, (0, 6), 1, {2}, True), snd(1, (3, 3), 2),
            rcv(1, (0, 3), 2, {1, 3}, True), snd(1, (0, 3), 3), rcv(1, (3, 3), 3, al),
            snd(2, (0, 6), 4), rcv(2, (6, 4), 4, al)],
        1: [snd(3, (6, 4), 1), rcv(3, (0, 6), 1, {3}, True), snd(0, (0, 3), 2),
            rcv(0, (3, 3), 2, {0, 2}, True), snd(0, (3, 3), 3), rcv(0, (0, 3), 3, al),
            snd(3, (0, 6), 4), rcv(3, (6, 4), 4, al)],
        2: [snd(0, (0, 6), 1), rcv(0, (6, 4), 1, {0}, True), snd(3, (8, 2), 2),
            rcv(3, (6, 2), 2, {3, 1}, True), snd(3, (6, 2), 3), rcv(3, (8, 2), 3, al),
            snd(0, (6, 4), 4), rcv(0, (0, 6), 4, al)],
        3: [snd(1, (0, 6), 1), rcv(1, (6, 4), 1, {1}, True), snd(2, (6, 2), 2),
            rcv(2, (8, 2), 2, {2, 0}, True), snd(2, (8, 2), 3), rcv(2, (6, 2), 3, al),
            snd(1, (6, 4), 4), rcv(1, (0, 6), 4, al)],
    }
    assert table(S.build("allreduce", "rhd", 4, 10)) == want


def test_rhd_6_ranks_by_hand():
    # p = 4, 2 extra: ranks 0 and 2 hand their buffers to 1 and 3, which act
    # as virtual ranks 0 and 1; ranks 4 and 5 are virtual ranks 2 and 3
    al, w = range(6), (0, 10)
    want = {
        0: [snd(1, w, 0), rcv(1, w, 5, al)],
        2: [snd(3, w, 0), rcv(3, w, 5, al)],
        1: [rcv(0, w, 0, {0}, True),
            snd(4, (6, 4), 1), rcv(4, (0, 6), 1, {4}, True),
            snd(3, (3, 3), 2), rcv(3, (0, 3), 2, {2, 3, 5}, True),
            snd(3, (0, 3), 3), rcv(3, (3, 3), 3, al),
            snd(4, (0, 6), 4), rcv(4, (6, 4), 4, al),
            snd(0, w, 5)],
        3: [rcv(2, w, 0, {2}, True),
            snd(5, (6, 4), 1), rcv(5, (0, 6), 1, {5}, True),
            snd(1, (0, 3), 2), rcv(1, (3, 3), 2, {0, 1, 4}, True),
            snd(1, (3, 3), 3), rcv(1, (0, 3), 3, al),
            snd(5, (0, 6), 4), rcv(5, (6, 4), 4, al),
            snd(2, w, 5)],
        4: [snd(1, (0, 6), 1), rcv(1, (6, 4), 1, {0, 1}, True),
            snd(5, (8, 2), 2), rcv(5, (6, 2), 2, {2, 3, 5}, True),
            snd(5, (6, 2), 3), rcv(5, (8, 2), 3, al),
            snd(1, (6, 4), 4), rcv(1, (0, 6), 4, al)],
        5: [snd(3, (0, 6), 1), rcv(3, (6, 4), 1, {2, 3}, True),
            snd(4, (6, 2), 2), rcv(4, (8, 2), 2, {0, 1, 4}, True),
            snd(4, (8, 2), 3), rcv(4, (6, 2), 3, al),
            snd(3, (6, 4), 4), rcv(3, (0, 6), 4, al)],
    }
    assert table(S.build("allreduce", "rhd", 6, 10)) == want


def test_rhd_5_and_8_ranks_step_numbers():
    five = table(S.build("allreduce", "rhd", 5, 8))
    assert five[0] == [snd(1, (0, 8), 0), rcv(1, (0, 8), 5, range(5))]
    assert five[1][0] == rcv(0, (0, 8), 0, {0}, True)
    assert five[1][-1] == snd(0, (0, 8), 5)
    eight = S.build("allreduce", "rhd", 8, 8)
    assert [o.round for o in eight[0]] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6]
    assert [o.peer for o in eight[0]] == [4, 4, 2, 2, 1, 1, 1, 1, 2, 2, 4, 4]
    assert [(o.offset, o.length) for o in eight[5]] == [
        (0, 4), (4, 4), (6, 2), (4, 2), (4, 1), (5, 1), (5, 1), (4, 1), (4, 2), (6, 2),
        (4, 4), (0, 4)]


# --- hierarchical ----------------------------------------------------------------------------

def test_hierarchical_2x2_by_hand():
    # count 5: node blocks (0,3) (3,2); rail 0 splits (0,3) into (0,2) (2,1),
    # rail 1 splits (3,2) into (3,1) (4,1)
    al = range(4)
    want = {
        0: [snd(1, (3, 2), 0), rcv(1, (0, 3), 0, {1}, True),
            snd(2, (2, 1), 1), rcv(2, (0, 2), 1, {2, 3}, True),
            snd(2, (0, 2), 2), rcv(2, (2, 1), 2, al),
            snd(1, (0, 3), 3), rcv(1, (3, 2), 3, al)],
        1: [snd(0, (0, 3), 0), rcv(0, (3, 2), 0, {0}, True),
            snd(3, (4, 1), 1), rcv(3, (3, 1), 1, {2, 3}, True),
            snd(3, (3, 1), 2), rcv(3, (4, 1), 2, al),
            snd(0, (3, 2), 3), rcv(0, (0, 3), 3, al)],
        2: [snd(3, (3, 2), 0), rcv(3, (0, 3), 0, {3}, True),
            snd(0, (0, 2), 1), rcv(0, (2, 1), 1, {0, 1}, True),
            snd(0, (2, 1), 2), rcv(0, (0, 2), 2, al),
            snd(3, (0, 3), 3), rcv(3, (3, 2), 3, al)],
        3: [snd(2, (0, 3), 0), rcv(2, (3, 2), 0, {2}, True),
            snd(1, (3, 1), 1), rcv(1, (4, 1), 1, {0, 1}, True),
            snd(1, (4, 1), 2), rcv(1, (3, 1), 2, al),
            snd(2, (3, 2), 3), rcv(2, (0, 3), 3, al)],
    }
    assert table(S.build("allreduce", "hierarchical", 4, 5, S.RankLayout(local=2))) == want


def test_hierarchical_2_nodes_of_3_rank_0_by_hand():
    al = range(6)
    got = table(S.build("allreduce", "hierarchical", 6, 6, S.RankLayout(local=3)))[0]
    assert got == [
        snd(1, (4, 2), 0), rcv(2, (2, 2), 0, {2}, True),
        snd(1, (2, 2), 1), rcv(2, (0, 2), 1, {1, 2}, True),
        snd(3, (1, 1), 2), rcv(3, (0, 1), 2, {3, 4, 5}, True),
        snd(3, (0, 1), 3), rcv(3, (1, 1), 3, al),
        snd(1, (0, 2), 4), rcv(2, (4, 2), 4, al),
        snd(1, (4, 2), 5), rcv(2, (2, 2), 5, al)]


def test_hierarchical_3_nodes_of_2_rank_0():
    sched = table(S.build("allreduce", "hierarchical", 6, 12, S.RankLayout(local=2)))
    al = range(6)
    # node blocks (0,6) (6,6); rail [0, 2, 4] splits (0,6) into (0,2) (2,2) (4,2)
    assert sched[0] == [
        snd(1, (6, 6), 0), rcv(1, (0, 6), 0, {1}, True),
        snd(2, (4, 2), 1), rcv(4, (2, 2), 1, {4, 5}, True),
        snd(2, (2, 2), 2), rcv(4, (0, 2), 2, {4, 5, 2, 3}, True),
        snd(2, (0, 2), 3), rcv(4, (4, 2), 3, al),
        snd(2, (4, 2), 4), rcv(4, (2, 2), 4, al),
        snd(1, (0, 6), 5), rcv(1, (6, 6), 5, al)]


def test_hierarchical_one_node_is_a_ring_inside_it():
    sched = table(S.build("allreduce", "hierarchical", 3, 3, S.RankLayout(local=3)))
    al = range(3)
    assert sched[0] == [
        snd(1, (2, 1), 0), rcv(2, (1, 1), 0, {2}, True),
        snd(1, (1, 1), 1), rcv(2, (0, 1), 1, {2, 1}, True),
        snd(1, (0, 1), 2), rcv(2, (2, 1), 2, al),
        snd(1, (2, 1), 3), rcv(2, (1, 1), 3, al)]


def test_hierarchical_one_gpu_per_server_is_a_ring_between_servers():
    sched = table(S.build("allreduce", "hierarchical", 3, 3, S.RankLayout(local=1)))
    al = range(3)
    assert sched[1] == [
        snd(2, (0, 1), 0), rcv(0, (2, 1), 0, {0}, True),
        snd(2, (2, 1), 1), rcv(0, (1, 1), 1, {0, 2}, True),
        snd(2, (1, 1), 2), rcv(0, (0, 1), 2, al),
        snd(2, (0, 1), 3), rcv(0, (2, 1), 3, al)]


@pytest.mark.parametrize("algorithm,step,n,local,want", [
    ("ring", 5, 8, 1, "ring"), ("tree", 0, 8, 4, "tree"),
    ("hierarchical", 3, 4, 1, "hierarchical"),
    ("hierarchical", 0, 8, 4, "intra-node reduce-scatter"),
    ("hierarchical", 2, 8, 4, "intra-node reduce-scatter"),
    ("hierarchical", 3, 8, 4, "inter-node allreduce"),
    ("hierarchical", 4, 8, 4, "inter-node allreduce"),
    ("hierarchical", 5, 8, 4, "intra-node allgather"),
    ("hierarchical", 2, 4, 4, "intra-node reduce-scatter"),
    ("hierarchical", 3, 4, 4, "intra-node allgather"),
    ("hierarchical", 1, 6, 2, "inter-node allreduce"),
    ("hierarchical", 4, 6, 2, "inter-node allreduce"),
    ("hierarchical", 5, 6, 2, "intra-node allgather"),
])
def test_phase(algorithm, step, n, local, want):
    assert S.phase(algorithm, step, n, local) == want


def test_phase_default_local_is_one():
    assert S.phase("hierarchical", 0, 4) == "hierarchical"


# --- chains, alltoall, sendrecv --------------------------------------------------------------

def test_chain_broadcast_by_hand():
    assert table(S.build("broadcast", "ring", 4, 5, S.RankLayout(root=1))) == {
        0: [rcv(3, W, 2, {1})],
        1: [snd(2, W, 0)],
        2: [rcv(1, W, 0, {1}), snd(3, W, 1)],
        3: [rcv(2, W, 1, {1}), snd(0, W, 2)],
    }
    assert table(S.build("broadcast", "ring", 3, 5, S.RankLayout(root=2))) == {
        0: [rcv(2, W, 0, {2}), snd(1, W, 1)],
        1: [rcv(0, W, 1, {2})],
        2: [snd(0, W, 0)],
    }
    assert table(S.build("broadcast", "ring", 3, 5)) == {
        0: [snd(1, W, 0)], 1: [rcv(0, W, 0, {0}), snd(2, W, 1)], 2: [rcv(1, W, 1, {0})]}


def test_chain_reduce_by_hand():
    assert table(S.build("reduce", "ring", 4, 5, S.RankLayout(root=1))) == {
        2: [snd(3, W, 0)],
        3: [rcv(2, W, 0, {2}, True), snd(0, W, 1)],
        0: [rcv(3, W, 1, {2, 3}, True), snd(1, W, 2)],
        1: [rcv(0, W, 2, {2, 3, 0}, True)],
    }
    assert table(S.build("reduce", "ring", 3, 5)) == {
        1: [snd(2, W, 0)], 2: [rcv(1, W, 0, {1}, True), snd(0, W, 1)],
        0: [rcv(2, W, 1, {1, 2}, True)]}


def test_pairwise_alltoall_by_hand():
    b = {k: (2 * k, 2) for k in range(3)}
    want = {
        0: [cpy(0, b[0]), snd(1, b[1], 0, True), rcv(2, b[2], 0, {2}, src=0),
            snd(2, b[2], 1, True), rcv(1, b[1], 1, {1}, src=0)],
        1: [cpy(1, b[1]), snd(2, b[2], 0, True), rcv(0, b[0], 0, {0}, src=2),
            snd(0, b[0], 1, True), rcv(2, b[2], 1, {2}, src=2)],
        2: [cpy(2, b[2]), snd(0, b[0], 0, True), rcv(1, b[1], 0, {1}, src=4),
            snd(1, b[1], 1, True), rcv(0, b[0], 1, {0}, src=4)],
    }
    assert table(S.build("alltoall", "pairwise", 3, 6)) == want


def test_ring_sendrecv_by_hand():
    w = (0, 4)
    assert table(S.build("sendrecv", "ring", 3, 4)) == {
        0: [snd(1, w, 0, True), rcv(2, w, 0, {2})],
        1: [snd(2, w, 0, True), rcv(0, w, 0, {0})],
        2: [snd(0, w, 0, True), rcv(1, w, 0, {1})],
    }


def test_transfers_lists_every_send_sorted():
    assert S.transfers(S.build("sendrecv", "ring", 3, 4)) == [
        (0, 0, 1, 4), (0, 1, 2, 4), (0, 2, 0, 4)]
    assert S.transfers(S.build("reduce", "ring", 3, 5, S.RankLayout(root=0))) == [
        (0, 1, 2, 5), (1, 2, 0, 5)]
    assert S.transfers(S.build("allreduce", "tree", 4, 5)) == [
        (0, 3, 1, 5), (1, 1, 0, 5), (1, 2, 0, 5), (3, 0, 1, 5), (3, 0, 2, 5), (4, 1, 3, 5)]


# --- build options ---------------------------------------------------------------------------

def test_without_data_receives_carry_no_contributors():
    for coll, alg, kw in [("allreduce", "ring", {}), ("allreduce", "hierarchical", {"local": 2}),
                          ("allreduce", "rhd", {}), ("broadcast", "ring", {"root": 1}),
                          ("alltoall", "pairwise", {})]:
        lean = S.build(coll, alg, 4, 8, S.RankLayout(**kw), data=False)
        full = S.build(coll, alg, 4, 8, S.RankLayout(**kw))
        recvs = [o for ops in lean.values() for o in ops if o.kind == "recv"]
        assert recvs and all(o.contributors == frozenset() for o in recvs)
        # everything else is the same, and the next build carries data again
        strip = lambda s: {r: [f[:5] + f[6:] for f in ops] for r, ops in table(s).items()}  # noqa
        assert strip(lean) == strip(full)
        assert any(o.contributors for ops in full.values() for o in ops)


def test_data_flag_is_restored_even_after_an_error():
    with pytest.raises(ValueError):
        S.build("allreduce", "ring", 4, 0, data=False)
    assert S.build("sendrecv", "ring", 2, 1)[0][1].contributors == frozenset({1})


def test_pieces_split_both_ends_alike():
    sched = table(S.build("allreduce", "tree", 2, 10, S.RankLayout(piece_elements=4)))
    al = range(2)
    assert sched[1] == [snd(0, (0, 4), 0), snd(0, (4, 4), 0), snd(0, (8, 2), 0),
                        rcv(0, (0, 4), 2, al), rcv(0, (4, 4), 2, al), rcv(0, (8, 2), 2, al)]
    assert sched[0] == [rcv(1, (0, 4), 0, {1}, True), rcv(1, (4, 4), 0, {1}, True),
                        rcv(1, (8, 2), 0, {1}, True),
                        snd(1, (0, 4), 2), snd(1, (4, 4), 2), snd(1, (8, 2), 2)]


def test_pieces_keep_the_source_offset_apart():
    sched = table(S.build("alltoall", "pairwise", 2, 8, S.RankLayout(piece_elements=3)))
    assert sched[0] == [
        cpy(0, (0, 3)), cpy(0, (3, 1)),
        snd(1, (4, 3), 0, True), snd(1, (7, 1), 0, True),
        rcv(1, (4, 3), 0, {1}, src=0), rcv(1, (7, 1), 0, {1}, src=3)]
    assert sched[1][-2:] == [rcv(0, (0, 3), 0, {0}, src=4), rcv(0, (3, 1), 0, {0}, src=7)]


def test_a_piece_as_long_as_the_op_or_longer_leaves_it_whole():
    w = (0, 4)
    for piece in (4, 5, 100):
        assert table(S.build("sendrecv", "ring", 2, 4, S.RankLayout(piece_elements=piece))) == {
            0: [snd(1, w, 0, True), rcv(1, w, 0, {1})], 1: [snd(0, w, 0, True), rcv(0, w, 0, {0})]}
    # piece 1: every element alone
    one = table(S.build("sendrecv", "ring", 2, 3, S.RankLayout(piece_elements=1)))[0]
    assert one == [snd(1, (0, 1), 0, True), snd(1, (1, 1), 0, True), snd(1, (2, 1), 0, True),
                   rcv(1, (0, 1), 0, {1}), rcv(1, (1, 1), 0, {1}), rcv(1, (2, 1), 0, {1})]


def test_build_accepts_numpy_integers():
    sched = S.build("sendrecv", "ring", np.int64(2), np.int32(3))
    got = [(o.kind, o.peer, o.offset, o.length, o.reduce, o.contributors, o.src_offset,
            o.from_input, o.round) for o in sched[1]]
    assert got == [snd(0, (0, 3), 0, True), rcv(0, (0, 3), 0, {0})]


# --- refused parameters: the exact sentence ---------------------------------------------------

@pytest.mark.parametrize("args,kw,message", [
    (("allsum", "ring", 4, 8), {},
     "unknown collective 'allsum'; expected one of allreduce, allgather, reducescatter, "
     "broadcast, reduce, alltoall, sendrecv"),
    (("allreduce", "ring2", 4, 8), {},
     "no 'ring2' algorithm for allreduce; expected one of ring, rhd, tree, hierarchical, "
     "rail-ring, nccl-tree"),
    (("broadcast", "tree", 4, 8), {}, "no 'tree' algorithm for broadcast; expected one of ring"),
    (("allreduce", "ring", 1, 8), {}, "a collective needs a whole number of at least 2 ranks, got 1"),
    (("allreduce", "ring", 2.0, 8), {},
     "a collective needs a whole number of at least 2 ranks, got 2.0"),
    (("allreduce", "ring", True, 8), {},
     "a collective needs a whole number of at least 2 ranks, got true"),
    (("allreduce", "ring", "4", 8), {},
     "a collective needs a whole number of at least 2 ranks, got '4'"),
    (("allreduce", "ring", 4, 0), {}, "count must be a whole number of at least 1 element, got 0"),
    (("allreduce", "ring", 4, 8.5), {},
     "count must be a whole number of at least 1 element, got 8.5"),
    (("allreduce", "hierarchical", 4, 8), {"local": 0},
     "GPUs per server must be a whole number of at least 1, got 0"),
    (("allreduce", "ring", 4, 8), {"piece_elements": -1},
     "piece size must be a whole number of elements (0: unsplit), got -1"),
    (("allreduce", "ring", 4, 8), {"piece_elements": False},
     "piece size must be a whole number of elements (0: unsplit), got false"),
    (("broadcast", "ring", 4, 8), {"root": -1}, "root must be a rank from 0 to 3, got -1"),
    (("broadcast", "ring", 4, 8), {"root": 4}, "root must be a rank from 0 to 3, got 4"),
    (("reduce", "ring", 3, 8), {"root": 1.0}, "root must be a rank from 0 to 2, got 1.0"),
    (("allgather", "ring", 4, 10), {},
     "allgather on 4 ranks needs a count that is a multiple of 4 (an equal block per rank), "
     "got 10"),
    (("reducescatter", "ring", 3, 4), {},
     "reducescatter on 3 ranks needs a count that is a multiple of 3 (an equal block per rank), "
     "got 4"),
    (("alltoall", "pairwise", 4, 2), {},
     "alltoall on 4 ranks needs a count that is a multiple of 4 (an equal block per rank), got 2"),
    (("allreduce", "hierarchical", 6, 12), {"local": 4},
     "hierarchical AllReduce needs whole servers: 6 ranks are not a multiple of 4 GPUs per server"),
    # the ranks are checked before the count
    (("allreduce", "ring", 1, 0), {}, "a collective needs a whole number of at least 2 ranks, got 1"),
])
def test_refused_parameters(args, kw, message):
    with pytest.raises(ValueError) as err:
        S.build(*args, S.RankLayout(**kw))
    assert str(err.value) == message
    with pytest.raises(ValueError) as again:
        S.check_params(*args, **kw)
    assert str(again.value) == message


def test_smallest_accepted_parameters():
    S.check_params("allreduce", "ring", 2, 1)
    S.check_params("broadcast", "ring", 2, 1, root=1, piece_elements=0, local=1)
    S.check_params("allreduce", "hierarchical", 4, 1, local=4)
    S.check_params("allgather", "ring", 3, 3)
    S.check_params("allreduce", "ring", 5, 7)      # not an equal-block collective
    S.check_params("allreduce", "ring", 5, 7, local=2)   # local only matters for hierarchical
    # builds even with empty blocks: count 1 over 4 GPUs is (0,1) (1,0) (1,0) (1,0)
    assert flat(S.hierarchical_allreduce(4, 1, 4)[0][0]) == snd(1, (1, 0), 0)
    with pytest.raises(ValueError) as err:
        S.hierarchical_allreduce(6, 6, 4)
    assert "6 ranks are not a multiple of 4 GPUs per server" in str(err.value)


# --- what buffers start and end with ---------------------------------------------------------

def test_initial_regions():
    for c in ("allreduce", "reducescatter", "reduce"):
        assert S.initial_regions(c, 4, 10, 2) == [(0, 10)]
    assert S.initial_regions("broadcast", 4, 10, 2, root=2) == [(0, 10)]
    assert S.initial_regions("broadcast", 4, 10, 1, root=2) == []
    assert S.initial_regions("broadcast", 4, 10, 0) == [(0, 10)]
    assert S.initial_regions("allgather", 4, 10, 2) == [(6, 2)]
    assert S.initial_regions("allgather", 4, 10, 0) == [(0, 3)]
    assert S.initial_regions("alltoall", 4, 8, 1) == []
    assert S.initial_regions("sendrecv", 4, 8, 1) == []


def test_expected_regions():
    al = frozenset(range(4))
    assert S.expected_regions("allreduce", 4, 10, 3) == [(0, 10, al, 0)]
    assert S.expected_regions("reducescatter", 4, 10, 1) == [(3, 3, al, 3)]
    assert S.expected_regions("allgather", 4, 10, 0) == [
        (0, 3, frozenset({0}), 0), (3, 3, frozenset({1}), 3), (6, 2, frozenset({2}), 6),
        (8, 2, frozenset({3}), 8)]
    assert S.expected_regions("broadcast", 4, 10, 0, root=2) == [(0, 10, frozenset({2}), 0)]
    assert S.expected_regions("broadcast", 4, 10, 1) == [(0, 10, frozenset({0}), 0)]
    assert S.expected_regions("reduce", 4, 10, 2, root=2) == [(0, 10, al, 0)]
    assert S.expected_regions("reduce", 4, 10, 1, root=2) == []
    assert S.expected_regions("reduce", 4, 10, 0) == [(0, 10, al, 0)]
    assert S.expected_regions("alltoall", 4, 10, 2) == [
        (0, 3, frozenset({0}), 6), (3, 3, frozenset({1}), 6), (6, 2, frozenset({2}), 6),
        (8, 2, frozenset({3}), 6)]
    assert S.expected_regions("sendrecv", 4, 10, 0) == [(0, 10, frozenset({3}), 0)]
    assert S.expected_regions("sendrecv", 4, 10, 2) == [(0, 10, frozenset({1}), 0)]
    with pytest.raises(ValueError) as err:
        S.expected_regions("gossip", 4, 10, 0)
    assert str(err.value) == "unknown collective 'gossip'"


# --- dependencies ----------------------------------------------------------------------------

def _op(kind, off, ln, reduce=False, from_input=False):
    return S.Op(kind, 9, off, ln, reduce=reduce, from_input=from_input)


def test_dependencies_by_hand():
    ops = [
        _op("recv", 0, 4, reduce=True),    # 0 reads and writes [0,4)
        _op("send", 0, 2),                 # 1 reads [0,2): after 0
        _op("send", 2, 2, from_input=True),  # 2 reads the input: waits for nothing
        _op("recv", 2, 4),                 # 3 writes [2,6): after 0's write of [2,4)
        _op("copy", 0, 2),                 # 4 writes [0,2): after 0 (write), 1 (read)
        _op("send", 0, 6),                 # 5 reads [0,6): last writes 4 and 3
        _op("recv", 4, 2, reduce=True),    # 6 rw [4,6): last write 3, read by 5
        _op("recv", 0, 2),                 # 7 writes [0,2): last write 4, read by 5
        _op("send", 0, 2),                 # 8 reads [0,2): only 7
        _op("send", 1, 4, from_input=True),  # 9 the input again: nothing
        _op("recv", 0, 6, reduce=True),    # 10 rw [0,6): writes 7, 6; reads 8, 5 (on [2,4))
    ]
    assert S.dependencies(ops) == [[], [0], [], [0], [0, 1], [3, 4], [3, 5], [4, 5], [7], [],
                                   [3, 5, 6, 7, 8]]


def test_dependencies_of_reads_alone_are_empty():
    ops = [_op("send", 0, 4), _op("send", 2, 4), _op("send", 0, 6)]
    assert S.dependencies(ops) == [[], [], []]


def test_dependencies_copy_does_not_read_the_buffer():
    # a copy writes only: a later write waits for it, but it does not count as a
    # read a later write must wait for beyond the write itself
    ops = [_op("recv", 0, 4), _op("copy", 0, 4), _op("recv", 0, 4)]
    assert S.dependencies(ops) == [[], [0], [1]]
    # a plain (copying) receive does not read either
    ops = [_op("recv", 0, 4), _op("recv", 0, 4), _op("recv", 0, 4, reduce=True)]
    assert S.dependencies(ops) == [[], [0], [1]]


def test_dependencies_with_offsets_not_at_zero():
    ops = [_op("recv", 5, 3), _op("send", 6, 1), _op("recv", 8, 2), _op("send", 3, 2),
           _op("send", 7, 2)]
    assert S.dependencies(ops) == [[], [0], [], [], [0, 2]]


def test_pipelined_broadcast_forwards_each_piece_when_it_is_in():
    ops = S.build("broadcast", "ring", 3, 9, S.RankLayout(piece_elements=3))[1]
    assert S.dependencies(ops) == [[], [], [], [0], [1], [2]]
    ops = S.build("reduce", "ring", 3, 6, S.RankLayout(piece_elements=3))[2]   # recv (reduce) then send
    assert S.dependencies(ops) == [[], [], [0], [1]]


# === datatypes ================================================================================

PERIOD = 1031
EXACT = {"float": 2 ** 24, "half": 2 ** 11, "bfloat16": 2 ** 8}


def ref_inputs(name, op, n, rank):
    """One period of a rank's input, from the module docstring, in Python ints."""
    out = []
    for i in range(PERIOD):
        b = (3 * i + 7 * rank) % PERIOD
        exact = EXACT.get(name, 0)
        if exact and op in ("sum", "avg"):
            m = exact // n
            if m >= 515:
                v = b - 515
            elif m > 0:
                v = b % (2 * m + 1) - m
            else:
                v = 1 if (i + rank) % math.ceil(n / exact) == 0 else 0
        elif exact and op == "prod":
            every = max(1, math.ceil(n / 8))
            v = (-1 if b % 3 == 0 else 1) * (2 if (i + rank) % every == 0 else 1)
        elif op == "prod":
            v = 2 * (b % 64) - 63
        else:
            v = b - 515
        out.append(v)
    return out


def wrap(v, bits):
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def ref_store(name, values):
    """Python numbers as the type stores them (ml_dtypes / numpy / wrapping)."""
    if name == "bfloat16":
        return np.asarray(values, np.float64).astype(np.float32).astype(BF16).view(np.uint16)
    if name == "half":
        return np.asarray(values, np.float64).astype(np.float16)
    if name == "float":
        return np.asarray(values, np.float64).astype(np.float32)
    bits = {"int8": 8, "int32": 32}[name]
    return np.asarray([wrap(int(v), bits) for v in values], {8: np.int8, 32: np.int32}[bits])


def ref_reduced(name, op, n, contributors):
    """The contributors' inputs reduced in exact Python arithmetic (exact for
    these inputs), as Python numbers; integers wrapped at the end."""
    cols = [ref_inputs(name, op, n, r) for r in sorted(contributors)]
    out = []
    for vals in zip(*cols):
        if name in ("int8", "int32"):
            bits = 8 if name == "int8" else 32
            vals = [wrap(v, bits) for v in vals]
        if op in ("sum", "avg"):
            v = sum(vals)
        elif op == "prod":
            v = math.prod(vals)
        elif op == "min":
            v = min(vals)
        else:
            v = max(vals)
        out.append(v)
    return out


def ref_avg(name, n, stored):
    """The final avg of stored sums: float32 division rounded to the type,
    integers truncated toward zero."""
    if name in ("int8", "int32"):
        return np.asarray([int(v) // n if v >= 0 else -((-int(v)) // n) for v in stored],
                          stored.dtype)
    f32 = (np.asarray(stored).view(BF16) if name == "bfloat16" else np.asarray(stored)) \
        .astype(np.float32) / np.float32(n)
    if name == "bfloat16":
        return f32.astype(BF16).view(np.uint16)
    return f32.astype({"float": np.float32, "half": np.float16}[name])


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name,storage,size,exact", [
    ("float", "float32", 4, 1 << 24), ("half", "float16", 2, 2048),
    ("bfloat16", "uint16", 2, 256), ("int8", "int8", 1, 0), ("int32", "int32", 4, 0)])
def test_datatype_fields(name, storage, size, exact):
    dt = D.datatype(name)
    assert (dt.name, dt.storage, dt.size, dt.exact) == (name, storage, size, exact)


@pytest.mark.parametrize("alias,name", [
    ("float32", "float"), ("fp32", "float"), ("float16", "half"), ("fp16", "half"),
    ("bf16", "bfloat16")])
def test_datatype_aliases(alias, name):
    assert D.datatype(alias).name == name


def test_names_and_ops():
    assert set(D.TYPE_NAMES) == {"float", "half", "bfloat16", "int8", "int32", "float32",
                                 "float16", "bf16", "fp32", "fp16"}
    assert D.OPS == ("sum", "prod", "min", "max", "avg")
    with pytest.raises(KeyError):
        D.datatype("double")


# --- bfloat16 conversions --------------------------------------------------------------------

def test_bf16_from_f32_matches_ml_dtypes():
    rng = np.random.default_rng(7)
    bits = np.concatenate([
        rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32),
        np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x7F7FFFFF, 0xFF7FFFFF,
                  0x00008000, 0x00018000, 0x80008000, 0x7F800000, 0xFF800000, 0,
                  0x80000000, 0x3F7FFFFF, 0x4049_0FDB], np.uint32)])
    f32 = bits.view(np.float32)
    ok = ~np.isnan(f32)
    same(D.bf16_from_f32(f32[ok]), f32[ok].astype(BF16).view(np.uint16))


def test_bf16_ties_to_even_by_hand():
    bits = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x7F7FFFFF], np.uint32)
    got = D.bf16_from_f32(bits.view(np.float32))
    same(got, np.array([0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x7F80], np.uint16))


def test_bf16_from_f32_accepts_lists_and_float64():
    same(D.bf16_from_f32([1.0, -2.0, 3.140625]), np.array([0x3F80, 0xC000, 0x4049], np.uint16))
    same(D.bf16_from_f32(np.array([257.0])), np.array([0x4380], np.uint16))


def test_bf16_nan_stays_a_quiet_nan_with_its_sign():
    bits = np.array([0x7F800001, 0xFFFFFFFF, 0x7FC00000, 0xFFC00000, 0x7FA00000, 0xFF800001],
                    np.uint32)
    got = D.bf16_from_f32(bits.view(np.float32))
    same(got, np.array([0x7FC0, 0xFFFF, 0x7FC0, 0xFFC0, 0x7FE0, 0xFFC0], np.uint16))
    assert np.isnan(got.view(BF16).astype(np.float32)).all()


def test_bf16_to_f32_matches_ml_dtypes():
    bits = np.arange(0, 1 << 16, dtype=np.uint32).astype(np.uint16)
    got = D.bf16_to_f32(bits)
    want = bits.view(BF16).astype(np.float32)
    assert got.dtype == np.float32
    same(got.view(np.uint32), want.view(np.uint32))
    same(D.bf16_to_f32([0x3F80, 0xC000]), np.array([1.0, -2.0], np.float32))


def test_to_and_from_arith():
    bf, half, fl, i8 = (D.datatype(x) for x in ("bfloat16", "half", "float", "int8"))
    got = D.to_arith(bf, np.array([0x3F80, 0x4049], np.uint16))
    same(got, np.array([1.0, 3.140625], np.float32))
    got = D.to_arith(half, np.array([1.5, -2.0], np.float16))
    same(got, np.array([1.5, -2.0], np.float32))
    x = np.array([1.25], np.float32)
    same(D.to_arith(fl, x), x)
    same(D.to_arith(i8, np.array([-3], np.int8)), np.array([-3], np.int8))
    same(D.from_arith(bf, np.array([1.0, 3.14159], np.float32)),
         np.array([1.0, 3.14159], np.float32).astype(BF16).view(np.uint16))
    same(D.from_arith(half, np.array([1.0009765625, 70000.0], np.float32)),
         np.array([1.0009765625, np.inf], np.float16))
    same(D.from_arith(D.datatype("int32"), [3, -4]), np.array([3, -4], np.int32))


def test_as_floats():
    same(as_floats(D.datatype("bfloat16"), [0x3F80, 0x4049]), np.array([1.0, 3.140625]))
    same(as_floats(D.datatype("half"), [0.5, 65504]), np.array([0.5, 65504.0]))
    same(as_floats(D.datatype("int8"), [-128, 127]), np.array([-128.0, 127.0]))
    same(as_floats(D.datatype("float"), [0.1]), np.array([np.float32(0.1)], np.float64))


# --- inputs --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,op,n", [
    ("float", "sum", 4), ("float", "avg", 1000), ("half", "sum", 3), ("half", "sum", 4),
    ("half", "avg", 8), ("half", "sum", 2048), ("half", "sum", 2049), ("bfloat16", "sum", 4),
    ("bfloat16", "sum", 86), ("bfloat16", "sum", 256), ("bfloat16", "sum", 300),
    ("bfloat16", "sum", 600), ("float", "prod", 4), ("half", "prod", 8), ("half", "prod", 9),
    ("bfloat16", "prod", 17), ("half", "prod", 20), ("int8", "prod", 4), ("int32", "prod", 64),
    ("int32", "sum", 4), ("int8", "avg", 3), ("float", "min", 4), ("half", "max", 4),
    ("bfloat16", "min", 512), ("int8", "max", 2),
])
def test_rank_values_follow_the_documented_rule(name, op, n):
    for rank in (0, 1, n - 1):
        got = D.rank_values(D.datatype(name), op, n, rank)
        assert got.dtype == np.int64 and got.shape == (PERIOD,)
        assert got.tolist() == ref_inputs(name, op, n, rank), rank


def test_rank_values_spot_values_by_hand():
    half, fl, bf = D.datatype("half"), D.datatype("float"), D.datatype("bfloat16")
    # float sums: (3i + 7r) mod 1031, centred by 515
    assert D.rank_values(fl, "sum", 2, 1)[:3].tolist() == [-508, -505, -502]
    assert D.rank_values(fl, "sum", 2, 0)[[0, 171, 172]].tolist() == [-515, -2, 1]
    # half over 4 ranks: |x| <= 2048 // 4 = 512 (mod 1025)
    assert D.rank_values(half, "sum", 4, 1)[[0, 339, 340, 341]].tolist() == [-505, 512, -510, -507]
    # bfloat16 over 300 ranks: a 1 on every second element
    assert D.rank_values(bf, "sum", 300, 1)[:4].tolist() == [0, 1, 0, 1]
    # float product over 9 ranks: a factor 2 on every second element, sign - when 3 | base
    assert D.rank_values(fl, "prod", 9, 0)[:4].tolist() == [-2, -1, -2, -1]
    assert D.rank_values(fl, "prod", 9, 1)[:4].tolist() == [1, 2, 1, 2]
    # int products: odd, 2 (base mod 64) - 63
    assert D.rank_values(D.datatype("int8"), "prod", 4, 0)[:3].tolist() == [-63, -57, -51]


def test_store():
    same(D.store(D.datatype("int8"), np.array([200, -129, 127, 256], np.int64)),
         np.array([-56, 127, 127, 0], np.int8))
    same(D.store(D.datatype("int32"), np.array([1 << 31, -5], np.int64)),
         np.array([-(1 << 31), -5], np.int32))
    same(D.store(D.datatype("bfloat16"), np.array([257, -3, 1 << 20], np.int64)),
         np.array([257, -3, 1 << 20], np.float32).astype(BF16).view(np.uint16))
    same(D.store(D.datatype("half"), np.array([2049, -7], np.int64)),
         np.array([2048, -7], np.float16))
    same(D.store(D.datatype("float"), np.array([16777217], np.int64)),
         np.array([16777216], np.float32))


# --- reductions ---------------------------------------------------------------------------------

A = [3, -5, 100, 7, -120, 0]
B = [-4, 6, 100, 7, -20, 9]


def _py(op, x, y):
    return {"sum": x + y, "avg": x + y, "prod": x * y, "min": min(x, y), "max": max(x, y)}[op]


@pytest.mark.parametrize("op", ["sum", "avg", "prod", "min", "max"])
@pytest.mark.parametrize("name", ["float", "half", "bfloat16", "int8", "int32"])
def test_reduce_into_matches_references(name, op):
    dt = D.datatype(name)
    if name in ("int8", "int32"):
        bits = 8 if name == "int8" else 32
        storage = np.int8 if bits == 8 else np.int32
        region, data = np.array(A, storage), np.array(B, storage)
        want = np.array([wrap(_py(op, x, y), bits) for x, y in zip(A, B)], storage)
    else:
        region, data = ref_store(name, [x + 0.25 for x in A]), ref_store(name, B)
        ra = (region.view(BF16) if name == "bfloat16" else region).astype(np.float32)
        rb = (data.view(BF16) if name == "bfloat16" else data).astype(np.float32)
        f32 = {"sum": np.add, "avg": np.add, "prod": np.multiply, "min": np.minimum,
               "max": np.maximum}[op](ra, rb)
        want = f32.astype(BF16).view(np.uint16) if name == "bfloat16" else \
            f32.astype({"float": np.float32, "half": np.float16}[name])
    keep = region
    assert D.reduce_into(dt, op, region, data) is None
    assert region is keep                            # in place
    same(region, want)


def test_reduce_into_rounds_16_bit_floats_once_per_step():
    # 256 + 1 is 257 in float32, which bfloat16 rounds to 256 (tie to even)
    bf = D.datatype("bfloat16")
    region = np.array([256.0, 1.0], np.float32).astype(BF16).view(np.uint16).copy()
    D.reduce_into(bf, "sum", region, np.array([1.0, 255.0], np.float32).astype(BF16)
                  .view(np.uint16))
    same(region, np.array([256.0, 256.0], np.float32).astype(BF16).view(np.uint16))
    half = D.datatype("half")
    region = np.array([65504.0], np.float16)
    D.reduce_into(half, "sum", region, np.array([65504.0], np.float16))
    assert np.isinf(region[0]) and region.dtype == np.float16


def test_reduce_into_int8_wraps_without_warning():
    region = np.array([127, -128], np.int8)
    with np.errstate(over="raise"):
        D.reduce_into(D.datatype("int8"), "sum", region, np.array([1, -1], np.int8))
    same(region, np.array([-128, 127], np.int8))


# --- finish (avg) -----------------------------------------------------------------------------

def test_finish_divides_avg_once():
    i8 = np.array([-7, 7, -128, 5, 127, -1], np.int8)
    same(D.finish(D.datatype("int8"), "avg", 2, i8), np.array([-3, 3, -64, 2, 63, 0], np.int8))
    i32 = np.array([2 ** 31 - 1, -2 ** 31, -10, 10], np.int32)
    same(D.finish(D.datatype("int32"), "avg", 3, i32),
         np.array([715827882, -715827882, -3, 3], np.int32))
    h = np.array([7, -7, 1, 1000], np.float16)
    same(D.finish(D.datatype("half"), "avg", 3, h),
         (h.astype(np.float32) / np.float32(3)).astype(np.float16))
    f = np.array([1.0, 2.0, -7.0], np.float32)
    same(D.finish(D.datatype("float"), "avg", 3, f), f / np.float32(3))
    b = np.array([1.0, 3.0, -7.0], np.float32).astype(BF16).view(np.uint16)
    same(D.finish(D.datatype("bfloat16"), "avg", 3, b),
         (np.array([1.0, 3.0, -7.0], np.float32) / np.float32(3)).astype(BF16).view(np.uint16))


@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_finish_leaves_other_ops_alone(op):
    x = np.array([9, -9], np.int8)
    assert D.finish(D.datatype("int8"), op, 2, x) is x


# --- patterns and Data --------------------------------------------------------------------------

@pytest.mark.parametrize("name,op,n,contributors", [
    ("float", "sum", 3, {0, 1, 2}), ("half", "sum", 4, {0, 1, 2, 3}), ("half", "sum", 4, {2}),
    ("bfloat16", "sum", 4, {0, 1, 2, 3}), ("bfloat16", "sum", 300, {0, 1, 2, 7, 299}),
    ("int8", "sum", 4, {0, 1, 2, 3}), ("int32", "prod", 5, {0, 1, 2, 3, 4}),
    ("int8", "prod", 3, {1, 2}), ("float", "prod", 9, set(range(9))),
    ("half", "prod", 4, {0, 1, 2, 3}), ("bfloat16", "prod", 16, set(range(16))),
    ("float", "min", 3, {0, 1, 2}), ("half", "max", 3, {0, 2}), ("int32", "max", 4, {1, 3}),
    ("int8", "min", 4, {0, 1, 2, 3}), ("bfloat16", "max", 5, {4, 0}),
    ("int8", "avg", 3, {0, 1, 2}), ("half", "avg", 3, {0, 1, 2}),
])
def test_pattern_is_the_exact_reduction_as_stored(name, op, n, contributors):
    got = D.pattern(name, op, n, frozenset(contributors))
    same(got, ref_store(name, ref_reduced(name, op, n, contributors)))
    assert not got.flags.writeable


def test_data_defaults_and_key():
    d = D.Data()
    assert d.key == ("float", "sum", 2) and d.storage == np.dtype(np.float32)
    d = D.Data("bf16", "max", 5)
    assert d.key == ("bfloat16", "max", 5) and d.storage == np.dtype(np.uint16)
    assert d.dt.name == "bfloat16" and d.op == "max" and d.n == 5


@pytest.mark.parametrize("name,op,n,contributors,offset,length", [
    ("float", "sum", 4, (0, 1), 0, 10), ("float", "sum", 4, (0, 1, 2, 3), 1025, 20),
    ("half", "sum", 3, (2,), 1030, 3), ("int8", "prod", 4, (1, 3), 5000, 2100),
    ("bfloat16", "min", 4, (0, 1, 2), 3093, 1), ("int32", "sum", 2, (0, 1), 2062, 4124),
    ("float", "sum", 3, (0,), 7, 0),
])
def test_expected_slices_the_periodic_pattern(name, op, n, contributors, offset, length):
    data = D.Data(name, op, n)
    one = ref_store(name, ref_reduced(name, op, n, contributors))
    want = one[(offset + np.arange(length)) % PERIOD]
    got = data.expected(contributors, offset, length)
    same(got, want)
    assert not got.flags.writeable


def test_expected_of_a_long_region_is_built_afresh_and_still_right():
    data = D.Data("float", "sum", 2)
    one = ref_store("float", ref_reduced("float", "sum", 2, {0, 1}))
    length, offset = 1_100_000, 500
    want = one[(offset + np.arange(length)) % PERIOD]
    same(data.expected({0, 1}, offset, length), want)
    avg = D.Data("int32", "avg", 2)
    one = ref_avg("int32", 2, ref_store("int32", ref_reduced("int32", "avg", 2, {0, 1})))
    length = 1_060_000
    same(avg.expected([0, 1], 3, length, final=True), one[(3 + np.arange(length)) % PERIOD])
    # not all contributors: no division even when final
    part = ref_store("int32", ref_inputs("int32", "avg", 2, 1))
    same(avg.expected([1], 3, length, final=True), part[(3 + np.arange(length)) % PERIOD])


@pytest.mark.parametrize("name", ["float", "half", "bfloat16", "int8", "int32"])
def test_expected_final_avg_divides_by_the_rank_count(name):
    n = 3
    data = D.Data(name, "avg", n)
    sums = ref_store(name, ref_reduced(name, "avg", n, {0, 1, 2}))
    same(data.expected({0, 1, 2}, 1000, 40, final=True),
         ref_avg(name, n, sums)[(1000 + np.arange(40)) % PERIOD])
    same(data.expected({0, 1, 2}, 1000, 40), sums[(1000 + np.arange(40)) % PERIOD])
    partial = ref_store(name, ref_reduced(name, "avg", n, {0, 2}))
    same(data.expected({0, 2}, 0, 40, final=True), partial[:40])


def test_expected_final_only_matters_for_avg():
    data = D.Data("int8", "sum", 3)
    sums = ref_store("int8", ref_reduced("int8", "sum", 3, {0, 1, 2}))
    same(data.expected({0, 1, 2}, 0, 30, final=True), sums[:30])


def test_input_is_the_ranks_own_values():
    data = D.Data("half", "sum", 4)
    same(data.input(2, 1029, 5),
         ref_store("half", ref_inputs("half", "sum", 4, 2))[[1029, 1030, 0, 1, 2]])


def test_data_reduce_and_finish_in_place():
    data = D.Data("int8", "avg", 2)
    region = np.array([100, -7], np.int8)
    data.reduce(region, np.array([100, 0], np.int8))
    same(region, np.array([-56, -7], np.int8))
    data.finish(region, {0})                           # not everyone yet: unchanged
    same(region, np.array([-56, -7], np.int8))
    data.finish(region, {0, 1})
    same(region, np.array([-28, -3], np.int8))
    s = D.Data("int8", "sum", 2)
    region = np.array([100, -7], np.int8)
    s.finish(region, {0, 1})
    same(region, np.array([100, -7], np.int8))
    p = D.Data("half", "prod", 2)
    region = np.array([1.5, -2.0], np.float16)
    p.reduce(region, np.array([2.0, 3.0], np.float16))
    same(region, np.array([3.0, -6.0], np.float16))


# --- records are immutable (shared between ranks and caches) ---------------------------------

def test_ops_and_datatypes_are_frozen_and_ops_are_slotted():
    import dataclasses
    op = S.build("sendrecv", "ring", 2, 1)[0][0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.length = 5
    assert not hasattr(op, "__dict__")          # millions of ops at scale: no per-op dict
    with pytest.raises(dataclasses.FrozenInstanceError):
        D.datatype("half").size = 4


def test_chain_builders_default_to_root_0():
    assert table(S.chain_broadcast(3, 5)) == {
        0: [snd(1, W, 0)], 1: [rcv(0, W, 0, {0}), snd(2, W, 1)], 2: [rcv(1, W, 1, {0})]}
    assert table(S.chain_reduce(3, 5)) == {
        1: [snd(2, W, 0)], 2: [rcv(1, W, 0, {1}, True), snd(0, W, 1)],
        0: [rcv(2, W, 1, {1, 2}, True)]}


def test_hierarchical_defaults_to_one_gpu_per_server():
    # without `local`, every rank is its own server: a ring between servers
    S.check_params("allreduce", "hierarchical", 3, 3)
    assert table(S.build("allreduce", "hierarchical", 3, 3)) == table(
        S.build("allreduce", "hierarchical", 3, 3, S.RankLayout(local=1)))
    assert table(S.build("allreduce", "hierarchical", 3, 3))[1][:2] == [
        snd(2, (0, 1), 0), rcv(0, (2, 1), 0, {0}, True)]
