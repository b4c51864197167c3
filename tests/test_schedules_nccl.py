"""NCCL's channels on multi-GPU servers (collectives/schedules.py): the
rail-matched multi-channel ring (`rail-ring`) and the double binary tree
with a chain inside each server (`nccl-tree`).

Every rank ends with the right data (run in-process on real buffers, every
received piece checked); every hop between servers goes from GPU k to GPU k
(rail k); rail-ring's NICs all carry the same bytes both ways; NCCL's trees
are what its src/graph/trees.cc draws, and every server is a leaf in one of
the two."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectives import metrics as M
from collectives import schedules as S
from harness.collectives import RankLayout, Values, simulate
from sim import alphabeta

NEW = ("rail-ring", "nccl-tree")
FAST = settings(max_examples=60, deadline=None)


def nic_bytes(sched, local):
    """Elements each rank (its NIC) sends to and receives from other servers:
    {rank: [sent, received]}."""
    out = {r: [0, 0] for r in sched}
    for r, ops in sched.items():
        for op in ops:
            if op.kind in ("send", "recv") and op.peer // local != r // local:
                out[r][op.kind == "recv"] += op.length
    return out


@st.composite
def layouts(draw, max_servers=6, max_gpus=5):
    m = draw(st.integers(1, max_servers))
    local = draw(st.integers(1 if m > 1 else 2, max_gpus))
    return m, local


# --- right data ------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", NEW)
@pytest.mark.parametrize("m,local", [(2, 4), (2, 8), (3, 4), (3, 2), (5, 3), (4, 2), (1, 4),
                                     (1, 8), (7, 1), (2, 1), (6, 3)])
@pytest.mark.parametrize("count,piece", [(1000, 0), (1000, 64), (5, 0), (1, 0)])
def test_every_rank_ends_with_the_right_data(algorithm, m, local, count, piece):
    n = m * local
    ranks = simulate("allreduce", algorithm, n, count, RankLayout(piece_elements=piece, local=local))
    assert all(r.finished for r in ranks)
    assert [r.wrong() for r in ranks] == [0] * n
    assert sum(r.bad_chunk_elements for r in ranks) == 0


@pytest.mark.parametrize("algorithm", NEW)
@pytest.mark.parametrize("dtype,op", [("int8", "prod"), ("bfloat16", "sum"), ("half", "avg"),
                                      ("int32", "max")])
def test_every_type_and_op_reduces_right(algorithm, dtype, op):
    ranks = simulate("allreduce", algorithm, 8, 300, RankLayout(piece_elements=16, local=4),
                     Values(dtype, op))
    assert [r.wrong() for r in ranks] == [0] * 8
    assert sum(r.bad_chunk_elements for r in ranks) == 0


@FAST
@given(layouts(), st.sampled_from(NEW), st.integers(1, 200), st.integers(0, 40))
def test_any_layout_size_and_piece_is_right(layout, algorithm, count, piece):
    m, local = layout
    n = m * local
    ranks = simulate("allreduce", algorithm, n, count, RankLayout(piece_elements=piece, local=local))
    assert [r.wrong() for r in ranks] == [0] * n
    assert sum(r.bad_chunk_elements for r in ranks) == 0


def test_a_wrong_contributor_is_caught():
    """The check above can fail: a receive claiming one rank too few is seen."""
    sched = S.build("allreduce", "rail-ring", 8, 64, S.RankLayout(local=4))
    i = next(i for i, op in enumerate(sched[5])
             if op.kind == "recv" and op.reduce and len(op.contributors) > 1)
    op = sched[5][i]
    sched[5][i] = S.Op("recv", op.peer, op.offset, op.length, True,
                       op.contributors - {min(op.contributors)}, op.src_offset, round=op.round)
    from collectives.executor import RankExecutor
    from collectives.datatypes import Data
    xs = [RankExecutor(r, 8, sched[r], "allreduce", 64, 0, Data("float", "sum", 8))
          for r in range(8)]
    wire = []
    while not all(x.finished for x in xs):
        for x in xs:
            x.run(lambda peer, seq, data, src=x.rank: wire.append((peer, src, seq, data)))
        while wire:
            dst, src, seq, data = wire.pop(0)
            xs[dst].deliver(src, seq, data)
    assert xs[5].bad_chunk_elements > 0


# --- rails and NICs ----------------------------------------------------------------------

@FAST
@given(layouts(), st.sampled_from(NEW), st.integers(1, 500))
def test_every_hop_between_servers_is_rail_matched(layout, algorithm, count):
    m, local = layout
    sched = S.build("allreduce", algorithm, m * local, count, S.RankLayout(local=local))
    crossing = [(r, op.peer) for r, ops in sched.items() for op in ops
                if op.kind == "send" and op.peer // local != r // local]
    assert all(src % local == dst % local for src, dst in crossing), crossing
    assert bool(crossing) == (m > 1)


@FAST
@given(layouts(), st.integers(1, 20))
def test_rail_ring_every_nic_sends_and_receives_the_same_bytes(layout, blocks):
    """Over all channels, every NIC of every server sends and receives the
    same bytes: exactly, when every channel's ring blocks are equal; within
    rounding (a block differs by at most one element, 2(n-1) blocks) else."""
    m, local = layout
    n = m * local
    for count in (blocks * n * local, blocks * n * local + 1 + blocks % (n * local - 1 or 1)):
        nic = nic_bytes(S.build("allreduce", "rail-ring", n, count, S.RankLayout(local=local)), local)
        values = [v for way in nic.values() for v in way]
        if m == 1:
            assert values == [0] * len(values)
        elif count % (n * local) == 0:
            ring = m if S.rail_ring_leave_offsets(m, local) is None else n   # hierarchical: m
            assert set(values) == {2 * (ring - 1) * count // (ring * local)}
        else:
            assert max(values) - min(values) <= 2 * (n - 1), (m, local, count, nic)
            assert min(values) > 0


def test_rail_ring_nic_bytes_by_hand():
    """2 servers x 4 GPUs, 64 elements: 4 channels of 16, each a ring of 8
    ranks (blocks of 2) whose hop between servers carries 2 x 7 blocks = 28
    elements; each NIC carries one channel's hop each way. A flat ring
    sends 2 x 7/8 x 64 = 112 elements out of a server's one boundary GPU."""
    nic = nic_bytes(S.build("allreduce", "rail-ring", 8, 64, S.RankLayout(local=4)), 4)
    assert nic == {r: [28, 28] for r in range(8)}
    flat = nic_bytes(S.build("allreduce", "ring", 8, 64), 4)
    assert flat[3] == [112, 0] and flat[4] == [0, 112] and flat[0] == [0, 112]


def test_rail_ring_orders_by_hand():
    """The alternating walk: server 0 enters at GPU c and walks up to c - 1,
    leaves over rail c - 1, server 1 walks down from c - 1 to c and leaves
    over rail c; with 3 servers the last two leave from c - 2 and c."""
    assert S.rail_ring_order(2, 4, 0) == [0, 1, 2, 3, 7, 6, 5, 4]
    assert S.rail_ring_order(2, 4, 1) == [1, 2, 3, 0, 4, 7, 6, 5]
    assert S.rail_ring_order(4, 2, 1) == [1, 0, 2, 3, 5, 4, 6, 7]
    assert S.rail_ring_order(3, 4, 0) == [0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 9, 8]
    assert S.rail_ring_order(1, 4, 2) == [2, 3, 0, 1]
    assert S.rail_ring_leave_offsets(3, 2) is None


@given(layouts(max_servers=9, max_gpus=8))
def test_rail_ring_orders_are_rings_through_every_rank(layout):
    """Each channel visits every rank once, a server's GPUs in a row, and
    closes: the hop from the last rank back to the first is rail-matched
    too. Channel c enters server 0 at GPU c, so channels use distinct NICs."""
    m, local = layout
    offsets = S.rail_ring_leave_offsets(m, local)
    if offsets is None:
        assert m % 2 and local == 2
        return
    for c in range(local):
        order = S.rail_ring_order(m, local, c)
        assert sorted(order) == list(range(m * local))
        assert [r // local for r in order] == sorted(r // local for r in order)
        for a, b in zip(order, order[1:] + order[:1]):
            assert a // local == b // local or a % local == b % local, (c, order)
        assert order[0] == c


def test_rail_ring_on_one_server_is_a_ring_per_channel_over_nvlink():
    sched = S.build("allreduce", "rail-ring", 4, 400, S.RankLayout(local=4))
    for r, ops in sched.items():
        assert {op.peer for op in ops if op.kind == "send"} == {(r + 1) % 4}
        assert {op.peer for op in ops if op.kind == "recv"} == {(r - 1) % 4}
    # 4 channels of 100 elements, each a ring of 4 (blocks of 25): a rank
    # sends 2 x 3 blocks per channel, and every channel's blocks
    sent = Counter(op.offset // 100 for op in sched[0] if op.kind == "send")
    assert sent == {c: 6 for c in range(4)}
    assert sum(op.length for op in sched[0] if op.kind == "send") == 4 * 6 * 25


def test_rail_ring_of_one_gpu_per_server_is_the_ring():
    assert S.transfers(S.build("allreduce", "rail-ring", 5, 50)) == \
        S.transfers(S.build("allreduce", "ring", 5, 50))


def test_rail_ring_of_an_odd_count_of_2_gpu_servers_is_hierarchical():
    lay = S.RankLayout(local=2)
    assert S.build("allreduce", "rail-ring", 6, 60, lay) == \
        S.build("allreduce", "hierarchical", 6, 60, lay)
    assert S.build("allreduce", "rail-ring", 8, 60, lay) != \
        S.build("allreduce", "hierarchical", 8, 60, lay)


def test_rail_ring_costs_a_ring_per_channel():
    """2(n-1) dependent steps, as a ring; each rank moves 2(n-1)/n of the
    buffer, its channels' shares together."""
    sched = S.build("allreduce", "rail-ring", 8, 64, S.RankLayout(local=4))
    assert alphabeta.schedule_cost(sched, "rail-ring") == {"steps": 14, "max_rank_elements": 112}


def test_both_need_whole_servers():
    for algorithm in NEW:
        with pytest.raises(ValueError, match=f"{algorithm} AllReduce needs whole servers: 10 "
                                             "ranks are not a multiple of 4 GPUs per server"):
            S.build("allreduce", algorithm, 10, 100, S.RankLayout(local=4))


# --- NCCL's double binary tree -------------------------------------------------------------

def test_btree_is_nccls_drawing_of_14_nodes():
    """trees.cc's picture: 0-8; 8 over 4 and 12; 4 over 2, 6; 12 over 10, 13;
    2 over 1, 3; 6 over 5, 7; 10 over 9, 11."""
    assert S.btree_parents(14) == [None, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12]


def test_double_tree_is_nccls_mirror_of_12_and_shift_of_13():
    """trees.cc's pictures: the mirror of 12 nodes is rooted at 11, over 3,
    over 1 and 7; the shift of 13 is rooted at 1, over 9, over 5 and 0."""
    _, mirror = S.double_binary_tree(12)
    assert mirror == [1, 3, 1, 11, 5, 7, 5, 3, 9, 7, 9, None]
    _, shift = S.double_binary_tree(13)
    assert shift == [9, None, 3, 5, 3, 9, 7, 5, 7, 1, 11, 0, 11]


def children(parents):
    out = {s: [] for s in range(len(parents))}
    for s, p in enumerate(parents):
        if p is not None:
            out[p].append(s)
    return out


@given(st.integers(1, 300))
def test_double_tree_leaves_and_interiors(m):
    """Both are binary trees over all m nodes with one root; tree 0 is in
    order (a node's left subtree below it, its right above). For an even m
    every node is a leaf in exactly one tree; for an odd m every node but
    node 0 (the first tree's root) is."""
    trees = S.double_binary_tree(m)
    for parents in trees:
        assert parents.count(None) == 1
        kids = children(parents)
        assert all(len(k) <= 2 for k in kids.values())
        for s in range(m):                          # every node reaches the root
            seen, node = set(), s
            while parents[node] is not None:
                assert node not in seen
                seen.add(node)
                node = parents[node]
    kids = children(trees[0])
    for s in range(m):
        assert sum(k < s for k in kids[s]) <= 1 and sum(k > s for k in kids[s]) <= 1

    def in_order(s):
        return ([x for k in kids[s] if k < s for x in in_order(k)] + [s] +
                [x for k in kids[s] if k > s for x in in_order(k)])
    assert in_order(trees[0].index(None)) == list(range(m))
    leaves = [{s for s, k in children(p).items() if not k} for p in trees]
    if m == 1:
        return
    assert not leaves[0] & leaves[1]
    want = set(range(m)) if m % 2 == 0 else set(range(1, m))
    assert leaves[0] | leaves[1] == want


@pytest.mark.parametrize("m,local,height", [(2, 4, 1), (1, 4, 0), (4, 2, 2), (5, 1, 3),
                                            (8, 1, 3), (3, 3, 2)])
def test_nccl_tree_steps(m, local, height):
    """Up the chain (local - 1), up and down the deeper tree (its height),
    down the chain: the dependent steps, by hand."""
    sched = S.build("allreduce", "nccl-tree", m * local, 240, S.RankLayout(local=local))
    assert alphabeta.schedule_cost(sched, "nccl-tree")["steps"] == 2 * (local - 1) + 2 * height


def test_nccl_tree_2x4_by_hand():
    """2 servers x 4 GPUs, 16 elements: 8 channels of 2. Channel 2j + t runs
    tree t on rail j: tree 0 has server 0 at its root, tree 1 server 1. Each
    NIC sends one channel's share up and one down: 4 elements each way;
    GPU 0 chains 0 <- 1 <- 2 <- 3 in channels 0 and 1."""
    sched = S.build("allreduce", "nccl-tree", 8, 16, S.RankLayout(local=4))
    assert nic_bytes(sched, 4) == {r: [4, 4] for r in range(8)}
    sends = [(op.peer, op.offset, op.round) for op in sched[4] if op.kind == "send"]
    # server 1's head on rail 0: channel 0 (tree 0) sends its sum up to rank 0
    # after the chain (3 steps); channel 1 (tree 1): it is the root, sends down
    assert (0, 0, 3) in sends and (0, 2, 4) in sends
    assert (5, 0, 5) in sends and (5, 2, 5) in sends
    up = [op for op in sched[0] if op.kind == "recv" and op.peer == 4]
    assert [(op.offset, op.reduce, sorted(op.contributors)) for op in up] == [
        (0, True, [4, 5, 6, 7]), (2, False, list(range(8)))]


@pytest.mark.parametrize("m", [2, 3, 4, 5, 8])
def test_nccl_tree_every_nic_of_a_server_carries_the_same_bytes(m):
    """Each rail carries both trees, so a server's NICs are alike (servers
    differ: an interior node of a tree moves more than its leaves)."""
    local = 4
    nic = nic_bytes(S.build("allreduce", "nccl-tree", m * local, 64 * local,
                            S.RankLayout(local=local)), local)
    for s in range(m):
        assert len({tuple(nic[s * local + g]) for g in range(local)}) == 1, (s, nic)
    assert all(nic[r][0] > 0 for r in nic)


def test_nccl_tree_of_one_gpu_per_server_is_two_trees_over_the_ranks():
    sched = S.build("allreduce", "nccl-tree", 6, 60)
    first, second = S.double_binary_tree(6)
    edges = {frozenset((r, op.peer)) for r, ops in sched.items() for op in ops}
    assert edges == {frozenset((s, p)) for tree in (first, second)
                     for s, p in enumerate(tree) if p is not None}


def test_merged_channels_send_before_they_receive_at_each_step():
    for algorithm in NEW:
        sched = S.build("allreduce", algorithm, 8, 64, S.RankLayout(local=4))
        for ops in sched.values():
            keys = [(op.round, op.kind != "send") for op in ops]
            assert [k[0] for k in keys] == sorted(k[0] for k in keys)


def test_traffic_split_of_rail_ring_keeps_a_servers_share_inside():
    """Rail-ring moves most of its bytes over NVLink: per channel a ring of
    n hops has m between servers."""
    n, local, count = 8, 4, 6400
    split = M.traffic_split(S.build("allreduce", "rail-ring", n, count, S.RankLayout(local=local)),
                            lambda r: r // local)
    hop = 2 * (n - 1) * count // (n * local) * M.TYPE_SIZE      # a channel's hop, in bytes
    assert split["inter"] == 2 * local * hop
    assert split["intra"] == (n - 2) * local * hop


@pytest.mark.parametrize("algorithm,m,local,want", [
    ("rail-ring", 2, 4, ["reduce-scatter"] * 7 + ["all-gather"] * 7),
    ("rail-ring", 3, 2, ["intra-node reduce-scatter"] + ["inter-node allreduce"] * 4 +
     ["intra-node allgather"]),
    ("nccl-tree", 2, 4, ["intra-node reduce"] * 3 + ["inter-node reduce", "inter-node broadcast"]
     + ["intra-node broadcast"] * 3),
    ("nccl-tree", 4, 1, ["inter-node reduce"] * 2 + ["inter-node broadcast"] * 2)])
def test_phases_of_every_step(algorithm, m, local, want):
    """Each step of the schedule has the phase its timeline shows."""
    sched = S.build("allreduce", algorithm, m * local, 240, S.RankLayout(local=local))
    steps = sorted({op.round for ops in sched.values() for op in ops})
    assert [S.phase(algorithm, step, m * local, local) for step in steps] == want
