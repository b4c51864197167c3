"""-a auto on end hosts (sim/nccl/endhosts.py): NCCL's Ring and Tree as the
lab's schedules, the quickest by the lab's own costs, NCCL_ALGO-style
narrowing."""

import pytest

from sim import alphabeta
from sim.nccl import endhosts

LAB = alphabeta.Costs(alpha=2e-3, beta=8 / 20e6, beta_intra=8 / 100e6)
ONE_GPU = alphabeta.Costs(alpha=2e-3, beta=8 / 20e6)


def test_servers_of_several_gpus_get_the_rail_ring_and_nccls_tree():
    assert endhosts.candidates("allreduce", 4, 2) == ["rail-ring", "nccl-tree"]
    assert endhosts.candidates("allreduce", 1, 4) == ["ring", "tree"]


def test_other_collectives_keep_their_one_schedule():
    assert endhosts.candidates("allgather", 4, 2) == ["ring"]
    assert endhosts.candidates("alltoall", 1, 4) == ["pairwise"]
    c = endhosts.choose("broadcast", 4, 1024, ONE_GPU)
    assert (c.algorithm, c.nccl) == ("ring", "ring")


def test_the_choice_is_the_quickest_by_the_lab_costs():
    # 4 servers of one GPU: a tree's 4 dependent steps beat a ring's 6 while latency rules;
    # the ring's 2(n-1)/n x S beats the tree's interior ranks' 2 x S once bytes rule
    chosen = {count: endhosts.choose("allreduce", 4, count, ONE_GPU) for count in (2, 1 << 20)}
    assert [c.algorithm for c in chosen.values()] == ["tree", "ring"]
    for count, c in chosen.items():
        assert c.predicted_s == min(t for _, t in c.table)
        for name, t in c.table:
            assert t == pytest.approx(alphabeta.predict("allreduce", name, 4, count, ONE_GPU))


def test_by_hand_ring_against_tree_on_four_servers():
    """Ring: 6 steps x 2 ms + 2 x 3/4 x S at 20 Mbit/s. Tree (binary, root 0):
    4 dependent steps; rank 0 receives the whole buffer from each of its two
    children and sends it back to each: 2 x S each way."""
    count = 1 << 16
    S = count * 4
    ring = 6 * 2e-3 + 2 * 3 / 4 * S * 8 / 20e6
    table = dict(endhosts.choose("allreduce", 4, count, ONE_GPU).table)
    assert table["ring"] == pytest.approx(ring)
    assert table["tree"] == pytest.approx(4 * 2e-3 + 2 * S * 8 / 20e6)


def test_algo_narrows_as_nccl_algo_does():
    assert endhosts.choose("allreduce", 8, 2, LAB, local=4, algo="ring").algorithm == "rail-ring"
    assert endhosts.choose("allreduce", 8, 2, LAB, local=4, algo="^ring").algorithm == "nccl-tree"
    with pytest.raises(ValueError, match="leaves no algorithm the end hosts can run"):
        endhosts.choose("allreduce", 8, 2, LAB, local=4, algo="nvls")


def test_a_rank_count_that_is_not_whole_servers_is_laid_out_one_gpu_a_server():
    assert endhosts.choose("allreduce", 6, 2, LAB, local=4).algorithm in ("ring", "tree")
