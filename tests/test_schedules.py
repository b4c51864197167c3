"""Every collective schedule, run in-process on real float32 buffers for
2 to 16 ranks: every received piece holds exactly the sum it should, and
every rank ends with exactly the collective's result."""

import pytest

from collectives import metrics as M
from sim import alphabeta
from collectives import schedules as S
from collectives import registry as R
from collectives.executor import RankExecutor
from harness.collectives import RankLayout, expected_sum, simulate

CASES = [(c, a) for c, algs in R.ALGORITHMS.items() for a in algs]


@pytest.mark.parametrize("collective,algorithm", CASES, ids=[f"{c}-{a}" for c, a in CASES])
@pytest.mark.parametrize("piece", [0, 7], ids=["whole", "pieces-of-7"])
def test_every_rank_ends_with_the_right_data(collective, algorithm, piece):
    for n in range(2, 17):
        count = S.round_count(collective, n, 100)
        roots = (0, n - 1) if collective in R.ROOTED else (0,)
        for root in roots:
            ranks = simulate(collective, algorithm, n, count, RankLayout(root, piece))
            assert all(r.finished for r in ranks)
            assert [r.wrong() for r in ranks] == [0] * n, (n, root)
            assert sum(r.bad_chunk_elements for r in ranks) == 0, (n, root)


def test_allreduce_result_is_the_elementwise_sum():
    ranks = simulate("allreduce", "ring", 5, 23)
    want = sum(expected_sum((r,), 0, 23) for r in range(5))   # each rank's input
    for r in ranks:
        assert (r.buf == want).all()


def test_a_wrong_byte_is_counted():
    ranks = simulate("allgather", "ring", 4, 8)
    ranks[2].buf[1] += 1
    assert [r.wrong() for r in ranks] == [0, 0, 1, 0]


def test_forwarding_waits_for_the_receive_and_pieces_pipeline():
    sched = S.build("broadcast", "ring", 3, 30, S.RankLayout(root=0, piece_elements=10))
    middle = sched[1]
    assert [(o.kind, o.offset) for o in middle] == [
        ("recv", 0), ("recv", 10), ("recv", 20), ("send", 0), ("send", 10), ("send", 20)]
    deps = S.dependencies(middle)
    # each piece is forwarded as soon as it is in, not after the whole buffer
    assert deps[3:] == [[0], [1], [2]]


def test_ring_allreduce_moves_2_n_minus_1_over_n_of_the_buffer_per_rank():
    n, count = 4, 400
    sched = S.build("allreduce", "ring", n, count)
    for ops in sched.values():
        sent = sum(o.length for o in ops if o.kind == "send")
        assert sent == 2 * (n - 1) * count // n
    steps = {o.round for ops in sched.values() for o in ops}
    assert steps == set(range(2 * (n - 1)))


def test_rhd_handles_ranks_that_are_not_a_power_of_two():
    sched = S.build("allreduce", "rhd", 6, 60)
    # ranks 0 and 2 hand their data to 1 and 3, sit out, and get the result back
    assert [o.kind for o in sched[0]] == ["send", "recv"]
    assert sched[0][0].peer == 1 and sched[0][1].contributors == frozenset(range(6))


def test_alltoall_needs_equal_blocks():
    assert S.round_count("alltoall", 4, 10) == 8 and S.round_count("allreduce", 4, 10) == 10
    with pytest.raises(ValueError, match="multiple of 4"):
        S.build("alltoall", "pairwise", 4, 10)


def test_unknown_algorithm_is_refused():
    with pytest.raises(ValueError, match="no 'tree' algorithm for allgather; expected one of ring"):
        S.build("allgather", "tree", 4, 8)


def test_an_executor_can_run_again_from_scratch():
    ranks = simulate("reduce", "ring", 3, 9, RankLayout(root=2))
    x: RankExecutor = ranks[2]
    x.reset()
    assert not x.finished and x.wrong() > 0


@pytest.mark.parametrize("n,local", [(4, 2), (8, 4), (16, 4), (16, 8), (24, 8), (12, 3), (8, 8)])
@pytest.mark.parametrize("count,piece", [(1000, 0), (1000, 64), (5, 0)])
def test_hierarchical_allreduce_is_right_on_multi_gpu_servers(n, local, count, piece):
    ranks = simulate("allreduce", "hierarchical", n, count,
                     RankLayout(piece_elements=piece, local=local))
    assert [r.wrong() for r in ranks] == [0] * n
    assert sum(r.bad_chunk_elements for r in ranks) == 0


def test_hierarchical_allreduce_sends_across_servers_only_along_rails():
    n, local, count = 16, 4, 4000
    m = n // local
    sched = S.build("allreduce", "hierarchical", n, count, S.RankLayout(local=local))
    split = M.traffic_split(sched, lambda r: r // local)
    # per GPU: 2(m-1)/m of its block (count/local) leaves the server ...
    assert split["inter"] == n * 2 * (m - 1) * count // (m * local) * M.TYPE_SIZE
    # ... and (local-1)/local of the buffer, twice, stays inside
    assert split["intra"] == n * 2 * (local - 1) * count // local * M.TYPE_SIZE
    for r, ops in sched.items():
        for op in ops:
            if op.kind == "send" and op.peer // local != r // local:
                assert op.peer % local == r % local          # same rail
    # a flat ring crosses between servers at one GPU per server, which then
    # carries the whole 2(n-1)/n of the buffer; the hierarchical one spreads
    # a fifth of that over every GPU's NIC

    def busiest_inter(sched):
        return max(sum(op.length for op in ops if op.kind == "send" and op.peer // local != r // local)
                   for r, ops in sched.items())
    flat = S.build("allreduce", "ring", n, count)
    assert busiest_inter(flat) == 2 * (n - 1) * count // n
    assert busiest_inter(sched) == 2 * (m - 1) * count // (m * local)


def test_hierarchical_needs_whole_servers():
    with pytest.raises(ValueError, match="not a multiple of 4 GPUs per server"):
        S.build("allreduce", "hierarchical", 10, 100, S.RankLayout(local=4))


# levels of a binary tree over n ranks (floor(log2 n)), and the buffers the
# busiest rank sends or receives: n = 2, the one child sends S and receives S;
# n = 3 or 4, the root takes two children's sums and sends two results; from
# n = 5 an inner rank takes two sums and its parent's result (3S), and sends
# its own sum up and the result to two children (3S)
TREE = [(2, 1, 1), (3, 1, 2), (4, 2, 2), (5, 2, 3), (6, 2, 3), (7, 2, 3), (8, 3, 3),
        (9, 3, 3), (15, 3, 3), (16, 4, 3), (31, 4, 3), (33, 5, 3)]


@pytest.mark.parametrize("n,levels,buffers", TREE)
def test_a_tree_allreduce_costs_two_steps_a_level_and_three_buffers_at_an_inner_rank(
        n, levels, buffers):
    """A binary tree reduces up its levels, then broadcasts down them: 2
    floor(log2 n) dependent steps, not one more; by hand, not from the code."""
    count, alpha, beta = 1000, 1e-5, 1e-9
    assert alphabeta.predict("allreduce", "tree", n, count, alphabeta.Costs(alpha, 0.0)) == \
        pytest.approx(2 * levels * alpha, rel=1e-12)
    assert alphabeta.predict("allreduce", "tree", n, count, alphabeta.Costs(alpha, beta)) == \
        pytest.approx(2 * levels * alpha + buffers * count * 4 * beta, rel=1e-12)
    assert alphabeta.schedule_cost(S.build("allreduce", "tree", n, count), "tree") == {
        "steps": 2 * levels, "max_rank_elements": buffers * count}
