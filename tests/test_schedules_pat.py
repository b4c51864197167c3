"""NCCL's PAT for AllGather and ReduceScatter (collectives/schedules.py
`pat`): right data on real buffers for 1 to 17 ranks, ceil(log2 n) steps,
the ring's bytes per rank, NCCL's peers and its messages where it
aggregates fully (traced by hand from src/include/collectives.h's
PatAGAlgorithm and PatRSAlgorithm); its alpha-beta price, the flow-level
simulator's replay, and -a auto's choice of it (sim/nccl/endhosts.py)."""

import math

import pytest

from collectives import schedules as S
from collectives import registry as R
from collectives.algorithms import ALGORITHM_REGISTRY
from collectives.executor import RankExecutor
from harness import TOPOLOGIES
from harness.collectives import RankLayout, simulate
from runs.experiment import ExperimentError, experiment_from
from sim import alphabeta
from sim.network import Network
from sim.nccl import endhosts
from sim.replay import Replay
from topologies.fabric import load_fabric, parse_fabric

PAT = ("allgather", "reducescatter")
RANKS = range(1, 18)
ONE_GPU = alphabeta.Costs(alpha=2e-3, beta=8 / 20e6)


def steps_of(sched):
    return {op.round for ops in sched.values() for op in ops}


def pat(collective, n, count):
    """The schedule; one rank built by its builder, as `build` refuses a
    collective of one rank whatever the algorithm."""
    if n == 1:
        return ALGORITHM_REGISTRY["pat"].build(collective, 1, count, 0, 1)
    return S.build(collective, "pat", n, count)


@pytest.mark.parametrize("collective", PAT)
@pytest.mark.parametrize("piece", [0, 3], ids=["whole", "pieces-of-3"])
def test_every_rank_ends_with_the_right_data(collective, piece):
    for n in RANKS:
        count = n * 6
        if n == 1:        # nothing to move: the rank's own block is its result
            (ops,) = pat(collective, 1, count).values()
            ranks = [RankExecutor(0, 1, ops, collective, count)]
        else:
            ranks = simulate(collective, "pat", n, count, RankLayout(0, piece))
        assert all(r.finished for r in ranks), n
        assert [r.wrong() for r in ranks] == [0] * n, n
        assert sum(r.bad_chunk_elements for r in ranks) == 0, n


@pytest.mark.parametrize("collective", PAT)
def test_ceil_log2_n_steps_and_the_rings_bytes_per_rank(collective):
    for n in RANKS:
        count = n * 4
        sched = pat(collective, n, count)
        assert steps_of(sched) == set(range(math.ceil(math.log2(n)))), n
        ring = S.build(collective, "ring", n, count) if n > 1 else {0: []}
        for r in range(n):
            for kind in ("send", "recv"):
                moved = sum(op.length for op in sched[r] if op.kind == kind)
                assert moved == (n - 1) * count // n, (n, r, kind)
                assert moved == sum(op.length for op in ring[r] if op.kind == kind)


@pytest.mark.parametrize("n", [2, 3, 5, 6, 8, 12, 16, 17])
def test_nccls_peers_at_each_dimension(n):
    """AllGather works its dimensions farthest first, sending to r - 2^d
    and receiving from r + 2^d; ReduceScatter nearest first, the other way
    round (src/transport/generic.cc, prims_simple.h)."""
    dims = math.ceil(math.log2(n))
    for collective in PAT:
        for r, ops in pat(collective, n, n).items():
            for op in ops:
                d = dims - 1 - op.round if collective == "allgather" else op.round
                toward = -1 if (op.kind == "send") == (collective == "allgather") else 1
                assert op.peer == (r + toward * (1 << d)) % n, (collective, n, r, op)


def table(ops):
    return [(op.round, op.kind, op.peer, op.offset, sorted(op.contributors)) for op in ops]


def test_allgather_rank_0_of_8_sends_all_it_has_and_halves_the_distance():
    """NCCL's order with full aggregation: its own block 4 away, then the
    two it has 2 away, then four 1 away."""
    assert table(S.build("allgather", "pat", 8, 8)[0]) == [
        (0, "send", 4, 0, []), (0, "recv", 4, 4, [4]),
        (1, "send", 6, 0, []), (1, "send", 6, 4, []),
        (1, "recv", 2, 2, [2]), (1, "recv", 2, 6, [6]),
        (2, "send", 7, 0, []), (2, "send", 7, 2, []), (2, "send", 7, 4, []),
        (2, "send", 7, 6, []),
        (2, "recv", 1, 1, [1]), (2, "recv", 1, 3, [3]), (2, "recv", 1, 5, [5]),
        (2, "recv", 1, 7, [7])]


def test_allgather_of_6_leaves_out_offsets_past_n():
    """NCCL (6 ranks, aggregation 4): its own block 4 away, then its own 2
    away (offset 4 + 2 is past 6), then blocks 0, 2, 4 one away."""
    assert table(S.build("allgather", "pat", 6, 6)[0]) == [
        (0, "send", 2, 0, []), (0, "recv", 4, 4, [4]),
        (1, "send", 4, 0, []), (1, "recv", 2, 2, [2]),
        (2, "send", 5, 0, []), (2, "send", 5, 2, []), (2, "send", 5, 4, []),
        (2, "recv", 1, 1, [1]), (2, "recv", 1, 3, [3]), (2, "recv", 1, 5, [5])]


def test_reducescatter_of_6_reduces_as_it_goes_and_doubles_the_distance():
    """Rank 0: the odd offsets 1 away first; block 2 (its own and rank
    1's) 2 away; block 4 (its own and rank 5's) 4 away. Its own block
    gathers 5, then 4 and 3, then 2 and 1."""
    assert table(S.build("reducescatter", "pat", 6, 6)[0]) == [
        (0, "send", 1, 1, []), (0, "send", 1, 3, []), (0, "send", 1, 5, []),
        (0, "recv", 5, 0, [5]), (0, "recv", 5, 2, [5]), (0, "recv", 5, 4, [5]),
        (1, "send", 2, 2, []), (1, "recv", 4, 0, [3, 4]),
        (2, "send", 4, 4, []), (2, "recv", 2, 0, [1, 2])]
    assert all(op.reduce for op in S.build("reducescatter", "pat", 6, 6)[0] if op.kind == "recv")


@pytest.mark.parametrize("collective", PAT)
def test_pieces_and_timing_only_keep_the_transfers(collective):
    whole = S.build(collective, "pat", 12, 120)
    split = S.build(collective, "pat", 12, 120, S.RankLayout(piece_elements=4))
    assert steps_of(split) == steps_of(whole) == {0, 1, 2, 3}

    def per_step(sched):
        out = {}
        for step, src, dst, elements in S.transfers(sched):
            out[(step, src, dst)] = out.get((step, src, dst), 0) + elements
        return out
    assert per_step(split) == per_step(whole)
    timed = S.build(collective, "pat", 12, 120, data=False)
    assert [(op.kind, op.peer, op.offset) for op in timed[3]] == \
        [(op.kind, op.peer, op.offset) for op in whole[3]]
    assert not any(op.contributors for ops in timed.values() for op in ops)
    assert S.phase("pat", 2, 12) == "pat"


@pytest.mark.parametrize("collective", PAT)
def test_alpha_beta_charges_log_steps_and_the_rings_bytes(collective):
    n, count = 12, 12 * 1000
    sched = S.build(collective, "pat", n, count)
    assert alphabeta.schedule_cost(sched, "pat") == {"steps": 4,
                                                     "max_rank_elements": 11 * 1000}
    assert alphabeta.predict(collective, "pat", n, count, ONE_GPU) == pytest.approx(
        4 * 2e-3 + 11 * 1000 * 4 * 8 / 20e6)


def one_switch(n):
    return parse_fabric(f"""
name: one-switch
fabric: {{kind: single-switch, servers: {n}, mtu: 1500}}
links:
  server_leaf: {{rate_mbit: 8, queue_packets: 100}}
network: {{switch_latency_us: 0}}
""", "one-switch.yaml")


@pytest.mark.parametrize("collective", PAT)
def test_the_simulator_replays_it_at_the_rings_bandwidth_on_one_switch(collective):
    """Nothing shared but each server's own link: PAT's bytes take the
    ring's time; every byte sent crosses a server's link once each way."""
    fabric, n, count = one_switch(6), 6, 6 * 4096
    ranks = [h.name for h in fabric.endpoints]
    runs = {a: Replay(Network(fabric), ranks, S.build(collective, a, n, count, data=False)).run()
            for a in ("ring", "pat")}
    assert runs["pat"].seconds == pytest.approx(runs["ring"].seconds, rel=1e-6)
    assert runs["pat"].seconds == pytest.approx(5 * 4096 * 4 * 8 / 8e6, rel=1e-6)


def test_the_experiment_takes_pat_for_allgather_and_reducescatter_only():
    fabric = load_fabric(TOPOLOGIES / "default.yaml")
    for collective in PAT:
        assert experiment_from(fabric, {"collective": collective, "algorithm": "pat"}) \
            .algorithm == "pat"
    with pytest.raises(ExperimentError, match="not an algorithm of allreduce"):
        experiment_from(fabric, {"collective": "allreduce", "algorithm": "pat"})
    assert R.ALGORITHMS["allgather"][0] == R.ALGORITHMS["reducescatter"][0] == "ring"


# --- -a auto -----------------------------------------------------------------------

@pytest.mark.parametrize("collective", PAT)
def test_pat_is_a_candidate_only_with_one_gpu_a_server(collective):
    assert endhosts.candidates(collective, 1, 16) == ["ring", "pat"]
    assert endhosts.candidates(collective, 4, 4) == ["ring"]
    assert endhosts.candidates("allreduce", 1, 16) == ["ring", "tree"]
    # 6 ranks on servers of 4 GPUs: some server holds two, NCCL connects no PAT
    assert endhosts.choose(collective, 6, 6, ONE_GPU, local=4).table[0][0] == "ring"
    assert len(endhosts.choose(collective, 6, 6, ONE_GPU, local=4).table) == 1


@pytest.mark.parametrize("collective", PAT)
def test_auto_takes_pat_on_many_one_gpu_servers_by_the_lab_costs(collective):
    """16 servers of one GPU, 8 bytes a rank: PAT's 4 steps against the
    ring's 15, the same bytes."""
    n, count = 16, 16 * 2
    c = endhosts.choose(collective, n, count, ONE_GPU)
    assert (c.algorithm, c.nccl) == ("pat", "pat")
    table = dict(c.table)
    bytes_s = 15 * 2 * 4 * 8 / 20e6
    assert table == pytest.approx({"ring": 15 * 2e-3 + bytes_s, "pat": 4 * 2e-3 + bytes_s})
    assert c.predicted_s == table["pat"]


@pytest.mark.parametrize("collective", PAT)
def test_large_sizes_go_to_the_ring_only_where_the_costs_say_so(collective):
    """PAT moves the ring's bytes in fewer steps: by the lab's alpha-beta
    costs it stays the quicker at 64 MiB while a step costs anything; a lab
    of no latency prices the two alike, and the tie goes to Ring."""
    n, count = 16, 16 << 20
    assert endhosts.choose(collective, n, count, ONE_GPU).algorithm == "pat"
    free = alphabeta.Costs(alpha=0.0, beta=ONE_GPU.beta)
    c = endhosts.choose(collective, n, count, free)
    assert c.algorithm == "ring" and dict(c.table)["ring"] == dict(c.table)["pat"]


@pytest.mark.parametrize("collective", PAT)
def test_nccl_algo_narrows_the_choice(collective):
    small = (collective, 16, 32, ONE_GPU)
    assert endhosts.choose(*small, algo="ring").algorithm == "ring"
    assert endhosts.choose(*small, algo="^pat").algorithm == "ring"
    assert [a for a, _ in endhosts.choose(*small, algo="ring").table] == ["ring"]
    assert endhosts.choose(*small, algo="pat").algorithm == "pat"
    assert endhosts.choose(*small, algo=f"ring;{collective}:pat").algorithm == "pat"
    with pytest.raises(ValueError, match=f"leaves no algorithm .* {collective} \\(pat or ring\\)"):
        endhosts.choose(*small, algo="tree")
    with pytest.raises(ValueError, match="leaves no algorithm"):
        endhosts.choose(collective, 8, 8, ONE_GPU, local=4, algo="pat")
