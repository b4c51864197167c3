"""collectives/metrics.py against references written out by hand: the alpha-beta
closed forms of each algorithm the schedules build, the same model with
multi-GPU servers (NVLink-class links inside a server, NICs between them),
nccl-tests' count/type/redop/root columns and -b/-e/-f sizes, the latency
summary, and the per-tier ECMP report on small fabrics whose every up-link's
bytes are chosen here. No expected value is computed with the module's own
functions or constants."""

import math
import random
import sys
from types import SimpleNamespace

import pytest

from harness.fabrics import leaf_spine
from topologies.fabric import parse_fabric
from collectives import metrics as M
from sim import alphabeta
from sim.alphabeta import Costs
from collectives import schedules as S

ALPHA, BETA, BETA_INTRA = 1e-5, 1e-8, 1e-9      # s per step, s per network byte, s per NVLink byte
EXACT = dict(rel=1e-12, abs=0)


# --- the alpha-beta prediction, one GPU per server ---------------------------------------
#
# What the schedules run (collectives/schedules.py) and its textbook cost, S the
# whole buffer in bytes (count x 4), n ranks:
#   ring AllReduce            2(n-1) steps,         2(n-1)/n S   (Thakur et al. 2005)
#   ring AllGather            (n-1) steps,          (n-1)/n S
#   ring ReduceScatter        (n-1) steps,          (n-1)/n S
#   rhd AllReduce, n = 2^k    2 log2(n) steps,      2(n-1)/n S   (Rabenseifner)
#   rhd AllReduce, p = 2^k<n  2 log2(p) + 2 steps,  S + 2(p-1)/p S + S: the folding rank
#                             receives its neighbour's S, exchanges, hands S back, in turn
#   chain Broadcast / Reduce  (n-1) steps,          S (every rank moves the buffer once;
#                             a pipelined chain, not a binomial tree)
#   pairwise AllToAll         (n-1) steps,          (n-1)/n S
#   SendRecv                  1 step,               S
#   binary-tree AllReduce     2 x height steps,     3 S at an inner rank with two children
#                             (reduce: receives 2S, sends S; broadcast: receives S, sends 2S)
CLOSED_FORMS = [
    # collective, algorithm, n, count (elements), steps, bytes of the busiest rank
    ("allreduce", "ring", 4, 4000, 6, 2 * 3 / 4 * 16000),        # 24000
    ("allreduce", "ring", 8, 8000, 14, 2 * 7 / 8 * 32000),       # 56000
    ("allgather", "ring", 4, 4000, 3, 3 / 4 * 16000),            # 12000
    ("reducescatter", "ring", 5, 5000, 4, 4 / 5 * 20000),        # 16000
    ("allreduce", "rhd", 8, 8000, 6, 2 * 7 / 8 * 32000),         # 2 log2 8 = 6
    ("allreduce", "rhd", 6, 4000, 6, (1 + 2 * 3 / 4 + 1) * 16000),   # p=4: 2x2+2 steps, 56000
    ("broadcast", "ring", 4, 1000, 3, 4000),
    ("reduce", "ring", 5, 1000, 4, 4000),
    ("alltoall", "pairwise", 4, 4000, 3, 3 / 4 * 16000),
    ("sendrecv", "ring", 4, 1000, 1, 4000),
    ("allreduce", "tree", 7, 1000, 4, 3 * 4000),                 # height 2
]


@pytest.mark.parametrize("collective,algorithm,n,count,steps,nbytes", CLOSED_FORMS,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CLOSED_FORMS])
def test_prediction_is_each_algorithms_closed_form(collective, algorithm, n, count, steps,
                                                   nbytes):
    """alpha x steps + beta x bytes with the steps and bytes of the closed
    form above, for every algorithm the schedules build."""
    want = ALPHA * steps + BETA * nbytes
    assert alphabeta.predict(collective, algorithm, n, count, Costs(ALPHA, BETA)) == pytest.approx(
        want, **EXACT)
    cost = alphabeta.schedule_cost(S.build(collective, algorithm, n, count), algorithm)
    assert cost == {"steps": steps, "max_rank_elements": nbytes / 4}


def test_rhd_prediction_prices_the_fold_in_sequence_without_being_told_separately():
    """predict passes the algorithm on: rhd over 6 ranks costs the
    folding rank S + 1.5 S + S = 3.5 S, not the 2.5 S it would if the fold
    overlapped the exchange."""
    count, size = 4000, 16000
    assert alphabeta.predict("allreduce", "rhd", 6, count, Costs(0.0, BETA)) == pytest.approx(
        3.5 * size * BETA, **EXACT)


def test_without_intra_rates_every_byte_is_priced_at_the_network_rate():
    """GPUs per server with no intra-node rate (or an intra rate with one GPU
    per server) leave the one-rate model: 2(n-1)a + 2(n-1)/n S b."""
    ring = 6 * ALPHA + 24000 * BETA                    # n=4, S=16000 B
    assert alphabeta.predict("allreduce", "ring", 4, 4000, Costs(ALPHA, BETA), 0, 2) == pytest.approx(
        ring, **EXACT)
    assert alphabeta.predict("allreduce", "ring", 4, 4000,
                             Costs(ALPHA, BETA, BETA_INTRA)) == pytest.approx(ring, **EXACT)


# --- the prediction with multi-GPU servers -------------------------------------------------
#
# local GPUs per server, ranks r = server x local + g; a rank's bytes to its own
# server cost beta_intra, to other servers beta on its NIC (shared by the ranks
# nic_of maps to it); sends and receives overlap; the slowest rank sets the time.

def test_ring_over_two_gpu_servers_pays_both_links_at_every_rank():
    """Ring 0->1->2->3->0 over servers {0,1} {2,3}, S = 16000 B: every rank
    sends 6 blocks of 4000 B one way and receives 6 the other, one of the two
    inside its server and the other across the network: 6a + 24000(bi + b)."""
    want = 6 * ALPHA + 24000 * (BETA_INTRA + BETA)
    got = alphabeta.predict("allreduce", "ring", 4, 4000, Costs(ALPHA, BETA, BETA_INTRA), 0, 2)
    assert got == pytest.approx(want, **EXACT)


def test_ranks_sharing_a_nic_add_up_on_it():
    """Both GPUs of a server behind one NIC. In the ring, one of them sends
    across (rank 1: 24000 B out) and the other receives (rank 0: 24000 B in),
    so the NIC still carries 24000 B each way; in hierarchical AllReduce both
    send and receive across, and the shared NIC carries twice one GPU's bytes."""
    server = lambda r: r // 2                                    # noqa: E731
    shared_nic = Costs(ALPHA, BETA, BETA_INTRA, server)
    got = alphabeta.predict("allreduce", "ring", 4, 4000, shared_nic, 0, 2)
    assert got == pytest.approx(6 * ALPHA + 24000 * (BETA_INTRA + BETA), **EXACT)
    # hierarchical, n=4, 2 GPUs per server, S = 16000 B: steps 1 (intra RS)
    # + 2 (ring AllReduce of 2 servers) + 1 (intra AG) = 4; per GPU inside its
    # server 2(l-1)/l S = 16000 B each way, across 2(m-1)/m S/l = 8000 B each way
    own = alphabeta.predict("allreduce", "hierarchical", 4, 4000, Costs(ALPHA, BETA, BETA_INTRA),
                            0, 2)
    assert own == pytest.approx(4 * ALPHA + 16000 * BETA_INTRA + 8000 * BETA, **EXACT)
    shared = alphabeta.predict("allreduce", "hierarchical", 4, 4000, shared_nic, 0, 2)
    assert shared == pytest.approx(4 * ALPHA + 16000 * BETA_INTRA + 16000 * BETA, **EXACT)


def test_alltoall_over_two_gpu_servers_counts_both_directions_of_each_link():
    """Pairwise AllToAll, n=4, blocks of 4000 B: each rank sends one block to
    its server mate and two across, and receives the same: 3a + 4000 bi +
    8000 b. (The rank's own block is a copy: no link.)"""
    want = 3 * ALPHA + 4000 * BETA_INTRA + 8000 * BETA
    got = alphabeta.predict("alltoall", "pairwise", 4, 4000, Costs(ALPHA, BETA, BETA_INTRA), 0, 2)
    assert got == pytest.approx(want, **EXACT)


def test_a_chain_prices_ranks_that_never_touch_the_network():
    """Broadcast chain 0->1->2->3 over servers {0,1} {2,3}, S = 4000 B:
    ranks 1 and 2 each move S inside and S across: 3a + 4000(bi + b); ranks
    0 and 3 never use their NIC."""
    want = 3 * ALPHA + 4000 * (BETA_INTRA + BETA)
    got = alphabeta.predict("broadcast", "ring", 4, 1000, Costs(ALPHA, BETA, BETA_INTRA), 0, 2)
    assert got == pytest.approx(want, **EXACT)


def test_one_server_costs_only_its_intra_links():
    """Two GPUs of one server, ring AllReduce of S = 8000 B: each sends 2
    blocks of 4000 B to the other and receives 2: 2a + 8000 bi, nothing on
    the NIC."""
    got = alphabeta.predict("allreduce", "ring", 2, 2000, Costs(ALPHA, BETA, BETA_INTRA), 0, 2)
    assert got == pytest.approx(2 * ALPHA + 8000 * BETA_INTRA, **EXACT)


def test_the_root_decides_which_hop_of_the_chain_is_left_out():
    """Three GPUs, the first two in one server, S = 4000 B. From root 0 the
    chain 0->1->2 takes one hop inside and one across: rank 1 pays both,
    2a + 4000(bi + b). From root 1 the chain 1->2->0 crosses the network
    twice and never uses the link inside: 2a + 4000 b. The default root is 0."""
    root0 = 2 * ALPHA + 4000 * (BETA_INTRA + BETA)
    root1 = 2 * ALPHA + 4000 * BETA
    costs = Costs(ALPHA, BETA, BETA_INTRA)
    assert alphabeta.predict("broadcast", "ring", 3, 1000, costs, local=2) == pytest.approx(
        root0, **EXACT)
    assert alphabeta.predict("broadcast", "ring", 3, 1000, costs, 1, 2) == pytest.approx(
        root1, **EXACT)


# --- schedule_cost and serial_phase ----------------------------------------------------------

def test_copies_are_not_traffic():
    """A rank that only copies its own input moves nothing over a link."""
    sched = {0: [S.Op("copy", 0, 0, 10)], 1: [S.Op("copy", 1, 10, 10)]}
    assert alphabeta.schedule_cost(sched)["max_rank_elements"] == 0
    assert alphabeta.schedule_cost({0: [], 1: []}) == {"steps": 0, "max_rank_elements": 0}


def _phases(algorithm, sched):
    """The steps of `sched` grouped by the phase serial_phase gives them."""
    phase_of = alphabeta.serial_phase(algorithm, sched)
    groups = {}
    for step in sorted({op.round for ops in sched.values() for op in ops}):
        groups.setdefault(phase_of(step), []).append(step)
    return sorted(groups.values())


def test_rhd_over_six_ranks_has_three_serial_phases():
    """p = 4: fold-in at step 0, halving steps 1-2 and doubling 3-4 (one
    exchange), fold-out at step 5."""
    assert _phases("rhd", S.build("allreduce", "rhd", 6, 600)) == [[0], [1, 2, 3, 4], [5]]
    # p = 8 over 12 ranks: fold-in, 6 exchange steps, fold-out
    assert _phases("rhd", S.build("allreduce", "rhd", 12, 1200)) == [
        [0], [1, 2, 3, 4, 5, 6], [7]]


@pytest.mark.parametrize("algorithm,n", [("rhd", 8), ("rhd", 4), ("ring", 6), ("tree", 5)])
def test_without_a_fold_every_step_overlaps(algorithm, n):
    """rhd over a power of two (its steps start at 1: no fold-in) and the
    pipelined algorithms are one phase."""
    sched = S.build("allreduce", algorithm, n, 100 * n)
    steps = sorted({op.round for ops in sched.values() for op in ops})
    assert _phases(algorithm, sched) == [steps]


# --- nccl-tests' columns ---------------------------------------------------------------------

# nccl-tests prints redop "none" for the collectives that do not reduce and
# root -1 for those that have no root; count is per rank for AllGather,
# ReduceScatter and AllToAll, an integer. (collective, count, redop, root)
COLUMNS = [
    ("allreduce", 4096, "max", -1),
    ("reducescatter", 1024, "max", -1),
    ("reduce", 4096, "max", 2),
    ("broadcast", 4096, "none", 2),
    ("allgather", 1024, "none", -1),
    ("alltoall", 1024, "none", -1),
    ("sendrecv", 4096, "none", -1),
]


@pytest.mark.parametrize("collective,count,redop,root", COLUMNS, ids=[c[0] for c in COLUMNS])
def test_redop_root_and_count_columns_are_nccl_tests(collective, count, redop, root):
    exp = SimpleNamespace(collective=collective, datatype="float", op="max", root=2)
    columns = M.nccl_columns(exp, 4, 4096)
    assert columns == {"count": count, "type": "float", "redop": redop, "root": root}
    assert type(columns["count"]) is int                 # printed as an integer count


# --- bandwidth and latency -------------------------------------------------------------------

def test_beta_is_seconds_per_payload_byte_at_the_default_mtu():
    """8 Mbit/s is 1e6 bytes/s on the wire; a 1500 B packet carries 1448 B of
    TCP payload (20 IP + 32 TCP with timestamps) in 1514 B (14 Ethernet)."""
    assert M.beta_for_rate(8) == pytest.approx(1514 / 1448 / 1e6, **EXACT)
    assert M.beta_for_rate(100, 9000) == pytest.approx(9014 / 8948 / 12.5e6, **EXACT)


def test_latency_summary_of_a_hundred_samples():
    """1..100 ms shuffled: nearest-rank p50 is the 50th (50 ms), p99 the
    99th (99 ms), max 100 ms; in microseconds."""
    rtts = [k / 1000 for k in range(1, 101)]
    random.Random(7).shuffle(rtts)
    summary = M.latency_summary(rtts)
    assert summary["samples"] == 100
    assert summary["p50_us"] == pytest.approx(50_000, **EXACT)
    assert summary["p99_us"] == pytest.approx(99_000, **EXACT)
    assert summary["max_us"] == pytest.approx(100_000, **EXACT)


def test_latency_summary_of_nothing_is_nan():
    summary = M.latency_summary(iter(()))
    assert summary["samples"] == 0
    assert all(math.isnan(summary[k]) for k in ("p50_us", "p99_us", "max_us"))


def test_imbalance_of_no_uplinks_is_zero():
    assert M.imbalance([]) == 0.0
    assert M.imbalance([10, 10, 40]) == 2.0


def test_traffic_split_counts_each_byte_once_at_its_sender():
    """Pairwise AllToAll, n=4, servers {0,1} {2,3}, blocks of 4000 B: each
    rank sends one block to its server mate and two across; its own block is a
    copy, on no link."""
    sched = S.build("alltoall", "pairwise", 4, 4000)
    assert M.traffic_split(sched, lambda r: r // 2) == {"intra": 4 * 4000, "inter": 4 * 8000}


# --- nccl-tests' -b/-e/-f ------------------------------------------------------------------

def _bounded(fn, *args, lines=100_000):
    """fn(*args), failing (not hanging) if it runs more than `lines` lines."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
            if count > lines:
                raise RuntimeError("did not stop")
        return tracer
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        return fn(*args)
    finally:
        sys.settrace(old)


SWEEPS = [
    # -b, -e, -f: sizes from b, times f, while not above e
    (8, 64, 2, [8, 16, 32, 64]),
    (4, 100, 3, [4, 12, 36]),
    (4, 4, 2, [4]),                     # the smallest size: one float
    (1024, 1024, 1, [1024]),            # one size: the factor does not matter
    (1024, 1024, 0.5, [1024]),
    (1000, 999_999, 10, [1000, 10_000, 100_000]),
]


@pytest.mark.parametrize("lo,hi,factor,sizes", SWEEPS, ids=[str(s[:3]) for s in SWEEPS])
def test_sweep_sizes_by_hand(lo, hi, factor, sizes):
    assert _bounded(M.sweep_sizes, lo, hi, factor) == sizes


@pytest.mark.parametrize("lo,hi,factor", [
    (3, 64, 2),                  # under one float
    (64, 32, 2),                 # max under min
    (4, 64, 1),                  # a factor of 1 would never reach 64
    (4, 64, 0.5),
    (4, 64, math.inf),
    (4, 4, math.inf),
    (4, 64, math.nan),
])
def test_sweep_sizes_rejects_what_no_sweep_is(lo, hi, factor):
    with pytest.raises(ValueError,
                       match=r"^expected 4 <= minbytes <= maxbytes and a step factor above 1$"):
        _bounded(M.sweep_sizes, lo, hi, factor)


# --- the per-tier ECMP report ------------------------------------------------------------------
# leaf_spine(spines, leaves, 1 server): leaf i's port 1 is its server, ports
# 2.. its up-links to spine 1, 2, ... (topologies/fabric.py's numbering)

def _uplinks(**per_leaf):
    return {f"{leaf}-eth{2 + j}": {"tx_bytes": b}
            for leaf, bytes_ in per_leaf.items() for j, b in enumerate(bytes_)}


def test_tier_report_of_three_leaves_by_hand():
    """leaf1 [0, 2, 5]: mean 7/3, max/mean 15/7 = 2.142857..., its empty link
    under 5% of the mean; leaf2 [1, 45, 54]: 54 x 3/100 = 1.62, 1 B under
    5 B/3; leaf3 even. Worst leaf1; mean (15/7 + 1.62 + 1)/3 = 1.5876...
    Spine ports (down-links) and servers are not up-links."""
    fabric = leaf_spine(3, 3, 1)
    assert {l.a_intf for l in fabric.links if l.kind == "leaf_spine"} == set(
        _uplinks(leaf1=[0] * 3, leaf2=[0] * 3, leaf3=[0] * 3))
    links = _uplinks(leaf1=[0, 2, 5], leaf2=[1, 45, 54], leaf3=[20, 20, 20])
    links.update({"spine1-eth1": {"tx_bytes": 999}, "h1-eth0": {"tx_bytes": 999}})
    assert M.tier_report(fabric, links) == {"leaf->spine": {
        "switches": {"leaf1": 2.143, "leaf2": 1.62, "leaf3": 1.0},
        "worst": ["leaf1", 2.143], "mean": 1.588, "idle_uplinks": 2, "uplinks": 9}}


def test_tier_report_reads_to_three_decimals():
    """leaf1 [1, 2]: 2/1.5 = 1.3333...; leaf2 [1, 1]: 1. Mean 1.1666..."""
    report = M.tier_report(leaf_spine(2, 2, 1), _uplinks(leaf1=[1, 2], leaf2=[1, 1]))
    assert report["leaf->spine"] == {"switches": {"leaf1": 1.333, "leaf2": 1.0},
                                     "worst": ["leaf1", 1.333], "mean": 1.167,
                                     "idle_uplinks": 0, "uplinks": 4}


def test_tier_report_edges():
    """leaf1 [1, 39]: 1 B is exactly 5% of the mean 20, not under it: not
    idle; 39/20 = 1.95. leaf2 sent a single byte up [1, 0]: it counts, 2.0,
    its empty link idle. leaf3's counters are missing: it sent nothing, no
    evidence either way."""
    links = _uplinks(leaf1=[1, 39], leaf2=[1, 0])
    assert M.tier_report(leaf_spine(2, 3, 1), links) == {"leaf->spine": {
        "switches": {"leaf1": 1.95, "leaf2": 2.0}, "worst": ["leaf2", 2.0], "mean": 1.975,
        "idle_uplinks": 1, "uplinks": 4}}


def test_a_single_uplink_has_no_spread():
    """One spine: a leaf has no choice of next hop, so no max/mean."""
    report = M.tier_report(leaf_spine(1, 2, 1), _uplinks(leaf1=[100], leaf2=[0]))
    assert report == {"leaf->spine": {"switches": {}, "worst": None, "mean": None,
                                      "idle_uplinks": 0, "uplinks": 1}}


def test_a_full_mesh_has_no_up_tier():
    """Switches cabled pairwise pick no next hop among equals: nothing to report."""
    mesh = parse_fabric("""
name: mesh3
fabric: {kind: full-mesh, servers: 3}
links:
  server_leaf: {rate_mbit: 10}
  leaf_spine: {rate_mbit: 10}
""", "mesh3.yaml")
    assert any(l.kind == "mesh" for l in mesh.links)
    links = {l.a_intf: {"tx_bytes": 100 * i} for i, l in enumerate(mesh.links)}
    assert M.tier_report(mesh, links) == {}
