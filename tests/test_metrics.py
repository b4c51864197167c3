"""The figures: nccl-tests' bandwidth factors, the alpha-beta model read off
the schedules, percentiles, sizes, and the printed table."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import ring_allreduce_seconds
from collectives import metrics as M
from sim import alphabeta
from collectives import schedules as S
from report.tables import csv_text, nccl_table
from runs.record import RunRecord


# nccl-tests' doc/PERFORMANCE.md, written out by hand (not read from the code):
# busbw = algbw x 2(n-1)/n for AllReduce, (n-1)/n for ReduceScatter, AllGather
# and AllToAll, 1 for Broadcast, Reduce and SendRecv
NCCL_TESTS_FACTORS = {
    #                 n=2    n=4    n=6      n=8
    "allreduce":     (1.0,   1.5,   10 / 6,  1.75),
    "reducescatter": (0.5,   0.75,  5 / 6,   0.875),
    "allgather":     (0.5,   0.75,  5 / 6,   0.875),
    "alltoall":      (0.5,   0.75,  5 / 6,   0.875),
    "broadcast":     (1.0,   1.0,   1.0,     1.0),
    "reduce":        (1.0,   1.0,   1.0,     1.0),
    "sendrecv":      (1.0,   1.0,   1.0,     1.0),
}
FACTOR_CASES = [(c, n, f) for c, fs in NCCL_TESTS_FACTORS.items()
                for n, f in zip((2, 4, 6, 8), fs)]


@pytest.mark.parametrize("collective,n,factor", FACTOR_CASES,
                         ids=[f"{c}-{n}" for c, n, _ in FACTOR_CASES])
def test_bus_bandwidth_factors_are_nccl_tests(collective, n, factor):
    """Each collective's factor at four rank counts is nccl-tests' published one."""
    assert M.bus_factor(collective, n) == pytest.approx(factor, rel=1e-12)


# (collective, n, size column in bytes, seconds, algbw GB/s, busbw GB/s), by hand:
# algbw = size / seconds / 1e9, busbw = algbw x the factor above
BANDWIDTHS = [
    ("allreduce", 8, 10 ** 9, 0.01, 100.0, 175.0),
    ("allreduce", 6, 6 * 10 ** 8, 0.02, 30.0, 50.0),
    ("allreduce", 4, 4 * 10 ** 8, 0.1, 4.0, 6.0),
    ("allreduce", 2, 1 << 30, 0.5, 2.147483648, 2.147483648),
    ("reducescatter", 4, 8 * 10 ** 8, 0.1, 8.0, 6.0),
    ("reducescatter", 6, 12 * 10 ** 8, 0.05, 24.0, 20.0),
    ("allgather", 8, 8 * 10 ** 8, 0.04, 20.0, 17.5),
    ("allgather", 2, 4 * 10 ** 8, 0.02, 20.0, 10.0),
    ("alltoall", 6, 6 * 10 ** 8, 0.01, 60.0, 50.0),
    ("alltoall", 4, 10 ** 9, 0.25, 4.0, 3.0),
    ("broadcast", 8, 10 ** 9, 0.1, 10.0, 10.0),
    ("broadcast", 2, 5 * 10 ** 8, 0.25, 2.0, 2.0),
    ("reduce", 6, 3 * 10 ** 9, 1.5, 2.0, 2.0),
    ("reduce", 4, 10 ** 8, 0.01, 10.0, 10.0),
    ("sendrecv", 2, 10 ** 9, 0.2, 5.0, 5.0),
    ("sendrecv", 8, 2 * 10 ** 9, 0.5, 4.0, 4.0),
]


@pytest.mark.parametrize("collective,n,size,seconds,algbw,busbw", BANDWIDTHS,
                         ids=[f"{b[0]}-{b[1]}" for b in BANDWIDTHS])
def test_algbw_and_busbw_are_hand_computed_gb_per_s(collective, n, size, seconds, algbw,
                                                      busbw):
    """algbw and busbw of concrete sizes and times, in GB/s (1e9 bytes/s),
    worked out by hand from nccl-tests' definitions."""
    assert M.algbw_gbps(size, seconds) == pytest.approx(algbw, rel=1e-12)
    assert M.busbw_gbps(collective, n, size, seconds) == pytest.approx(busbw, rel=1e-12)


# nccl-tests' S: count x type size, where count is per rank for AllGather,
# ReduceScatter and AllToAll and S = count x type size x nranks. The lab's
# size_bytes is the whole buffer (elements x 4), so its count column must be
# (collective, n, datatype, elements of 4 bytes, nccl-tests' count column)
COUNT_COLUMNS = [
    ("allreduce", 4, "float", 1 << 20, 1 << 20),
    ("broadcast", 8, "float", 1 << 20, 1 << 20),
    ("reduce", 6, "float", 6 * 1024, 6 * 1024),
    ("sendrecv", 2, "half", 1 << 20, 1 << 21),
    ("allgather", 4, "float", 1 << 20, 1 << 18),
    ("reducescatter", 8, "float", 1 << 20, 1 << 17),
    ("alltoall", 6, "float", 6 * 1024, 1024),
    ("allgather", 2, "int8", 1024, 2048),
    ("reducescatter", 4, "bfloat16", 1 << 20, 1 << 19),
]


@pytest.mark.parametrize("collective,n,dtype,elements,count", COUNT_COLUMNS,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in COUNT_COLUMNS])
def test_the_size_is_nccl_tests_s_for_the_count_column(collective, n, dtype, elements, count):
    """The size the bandwidths divide (elements x 4 bytes) is nccl-tests' S for
    the count it prints: count x type size, times n for the per-rank counts."""
    from types import SimpleNamespace
    exp = SimpleNamespace(collective=collective, datatype=dtype, op="sum", root=0)
    columns = M.nccl_columns(exp, n, elements)
    assert columns["count"] == count
    typesize = {"float": 4, "half": 2, "bfloat16": 2, "int8": 1}[dtype]
    per_rank = collective in ("allgather", "reducescatter", "alltoall")
    assert elements * M.TYPE_SIZE == count * typesize * (n if per_rank else 1)


def test_algbw_and_busbw_with_known_values():
    # nccl-tests: 1 GB AllReduce on 8 ranks in 10 ms -> algbw 100 GB/s, busbw 175 GB/s
    assert M.algbw_gbps(10**9, 0.01) == pytest.approx(100.0)
    assert M.busbw_gbps("allreduce", 8, 10**9, 0.01) == pytest.approx(175.0)
    assert M.busbw_gbps("allgather", 4, 4 * 10**8, 0.01) == pytest.approx(30.0)
    assert M.algbw_gbps(10**9, 0) == 0.0


def test_ring_allreduce_prediction_is_the_textbook_formula():
    n, count, alpha, beta = 8, 8 * 1024, 5e-5, 1e-8
    size = count * 4
    textbook = 2 * 7 * alpha + 2 * 7 / 8 * size * beta       # 2(n-1)a + 2(n-1)/n S b
    assert alphabeta.predict("allreduce", "ring", n, count,
                             alphabeta.Costs(alpha, beta)) == pytest.approx(textbook)
    # the planner's closed form is the same formula
    assert ring_allreduce_seconds(n, size, alpha, beta) == pytest.approx(textbook)


def test_rhd_takes_fewer_steps_than_ring_for_the_same_bytes():
    ring = alphabeta.schedule_cost(S.build("allreduce", "ring", 16, 1600))
    rhd = alphabeta.schedule_cost(S.build("allreduce", "rhd", 16, 1600))
    assert (ring["steps"], rhd["steps"]) == (30, 8)           # 2(n-1) versus 2 log2(n)
    assert alphabeta.schedule_cost(S.build("allreduce", "rhd", 6, 600))["steps"] == 6   # + fix-up
    assert ring["max_rank_elements"] == rhd["max_rank_elements"] == 3000


def test_beta_accounts_for_headers():
    assert M.payload_share(1500) == pytest.approx(1448 / 1514)
    assert M.beta_for_rate(8, 9000) == pytest.approx(9014 / 8948 / 1e6)


def test_percentiles_and_sizes():
    values = list(range(1, 101))
    assert (M.percentile(values, 50), M.percentile(values, 99), M.percentile(values, 100)) == (50, 99, 100)
    assert math.isnan(M.percentile([], 50))
    assert M.sweep_sizes(32 * 1024, 2 * 1024 * 1024, 4) == [32768, 131072, 524288, 2097152]
    assert M.sweep_sizes(1024, 1024, 2) == [1024]
    with pytest.raises(ValueError):
        M.sweep_sizes(8, 4, 2)
    assert M.imbalance([30, 10]) == 1.5 and M.imbalance([0, 0]) == 0.0


# Nearest rank (the code's documented definition): the k-th smallest of N,
# k = ceil(p/100 x N), at least 1. Counts where rounding the rank matters,
# worked by hand: (values, p, the k-th smallest)
SEVEN = [70, 10, 50, 30, 20, 60, 40]          # unsorted on purpose: 10, 20, ..., 70
PERCENTILES = [
    (SEVEN, 50, 40),          # 3.5 -> 4th (down would give 30)
    (SEVEN, 90, 70),          # 6.3 -> 7th (down or to nearest: 60)
    (SEVEN, 99, 70),          # 6.93 -> 7th
    (SEVEN, 14, 10),          # 0.98 -> 1st
    (SEVEN, 15, 20),          # 1.05 -> 2nd
    (SEVEN, 0, 10),           # 0 -> at least the 1st
    (SEVEN, 100, 70),
    ([5, 1, 3], 33, 1),       # 0.99 -> 1st
    ([5, 1, 3], 34, 3),       # 1.02 -> 2nd
    ([5, 1, 3], 50, 3),       # 1.5 -> 2nd
    ([5, 1, 3], 66, 3),       # 1.98 -> 2nd
    ([5, 1, 3], 67, 5),       # 2.01 -> 3rd
    ([2.5], 1, 2.5),          # one value is every percentile
    (list(range(1, 1001)), 99.9, 999),       # exactly 999: the 999th, not the 1000th
    (list(range(1, 1001)), 99.95, 1000),     # 999.5 -> 1000th
    (list(range(1, 1001)), 99.85, 999),      # 998.5 -> 999th
    (list(range(1, 101)), 14, 14),           # exactly 14 (14/100 x 100 is 14.000000000000002)
    (list(range(1, 101)), 28, 28),
]


@pytest.mark.parametrize("values,p,want", PERCENTILES,
                         ids=[f"{len(v)}-p{p}" for v, p, _ in PERCENTILES])
def test_nearest_rank_percentiles_worked_by_hand(values, p, want):
    """The nearest-rank percentile where rounding the rank up, down or to
    nearest give different values, and where p/100 x N is a whole number."""
    assert M.percentile(values, p) == want


def _nearest_rank(values, thousandths: int):
    """An independent nearest rank, in exact integers: p = thousandths / 1000."""
    rank = max(1, -(-thousandths * len(values) // 100_000))
    return sorted(values)[rank - 1]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(-10 ** 6, 10 ** 6), min_size=1, max_size=2000),
       st.integers(0, 100_000))
def test_percentile_is_the_nearest_rank_for_any_values(values, thousandths):
    """For any values and any p with three decimals, the k-th smallest with
    k = ceil(p N / 100) computed in integers."""
    assert M.percentile(values, thousandths / 1000) == _nearest_rank(values, thousandths)


def test_latency_summary_reads_the_nearest_ranks():
    """p50 and p99 of seven round-trip times, by hand: the 4th and the 7th."""
    summary = M.latency_summary([7e-6, 1e-6, 5e-6, 3e-6, 2e-6, 6e-6, 4e-6])
    assert summary["samples"] == 7
    assert summary["p50_us"] == pytest.approx(4.0) and summary["p99_us"] == pytest.approx(7.0)
    assert summary["max_us"] == pytest.approx(7.0)


def fake_result():
    run = {"collective": "allreduce", "algorithm": "ring", "engine": "agents", "ranks": 4,
           "size_bytes": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": -1,
           "time_s": 0.5, "algbw_gbps": 0.0021, "busbw_gbps": 0.0031, "busbw_over_link": 0.9,
           "wrong": 0, "predicted_s": 0.45, "measured_over_predicted": 1.11,
           "latency": {"p50_us": 900.0, "p99_us": 2000.0, "max_us": 2500.0},
           "links": {"leaf1-eth3": {"tx_bytes": 1, "drops": 2, "peak_util": 0.97,
                                    "peak_backlog_bytes": 9000}},
           "ecmp_imbalance": {"leaf1": 1.2}, "cpu_busy_pct": 40.0}
    return RunRecord(experiment={"collective": "allreduce", "algorithm": "ring",
                                 "engine": "agents", "channels": 1, "iters": 5, "warmup": 1},
                     ranks=["h1", "h2", "h3", "h4"], gpus_per_server=1, alpha_s=4.5e-4,
                     beta_s_per_byte=3.2e-7, link_rate_mbit=25, runs=[run])


def test_the_table_has_nccl_tests_columns_and_footer():
    text = nccl_table(fake_result(), 25)
    lines = text.splitlines()
    assert "#       size         count      type   redop    root     time   algbw   busbw  #wrong" in lines
    row = next(l for l in lines if l.strip().startswith("1048576"))
    assert row.split() == ["1048576", "262144", "float", "sum", "-1", "500000", "0.0021",
                           "0.0031", "0"]
    assert lines[-2] == "# Out of bounds values : 0 OK"
    assert lines[-1] == "# Avg bus bandwidth    : 0.003100"


def test_csv_has_a_row_per_size():
    text = csv_text(fake_result(), "roce").splitlines()
    assert text[0].startswith("collective,algorithm,engine,network,ranks,size_bytes")
    assert text[1].startswith("allreduce,ring,agents,roce,4,1048576,262144,float,sum,-1,0.5,")
    assert ",2," in text[1]                              # drops summed


@pytest.mark.parametrize("n, p", [(5, 4), (6, 4), (12, 8)])
def test_rhd_prices_the_fold_in_and_out_in_sequence(n, p):
    # the folding rank receives S, exchanges 2(p-1)/p S, hands S back: in sequence
    count = 4096 * 16
    cost = alphabeta.schedule_cost(S.build("allreduce", "rhd", n, count), "rhd")
    assert cost["max_rank_elements"] == pytest.approx((2 + 2 * (p - 1) / p) * count)


def test_rhd_over_a_power_of_two_is_the_textbook_cost():
    count = 4096 * 16
    cost = alphabeta.schedule_cost(S.build("allreduce", "rhd", 8, count), "rhd")
    assert cost["max_rank_elements"] == 2 * 7 / 8 * count


def test_the_tier_report_finds_each_tiers_spread_and_polarisation():
    """A 4-ary fat-tree whose edge tier spreads evenly while every
    aggregation switch sends all up one core link: the upper tier reads
    max/mean 2 with half its up-links idle (hash polarisation)."""
    from topologies.fabric import load_fabric
    from harness import TOPOLOGIES
    from collectives.metrics import tier_report
    fat = load_fabric(TOPOLOGIES / "fat-tree-k4.yaml")
    first_up = {}
    for l in fat.links:
        if l.kind == "spine_core":
            first_up.setdefault(l.a, l.a_intf)
    links = {l.a_intf: {"tx_bytes": 1000 if l.kind == "leaf_spine" else
                        2000 if first_up[l.a] == l.a_intf else 0}
             for l in fat.links if l.kind in ("leaf_spine", "spine_core")}
    report = tier_report(fat, links)
    assert set(report) == {"leaf->agg", "agg->core"}
    assert report["leaf->agg"]["mean"] == 1.0 and report["leaf->agg"]["idle_uplinks"] == 0
    assert report["agg->core"]["mean"] == 2.0
    assert (report["agg->core"]["idle_uplinks"], report["agg->core"]["uplinks"]) == (8, 16)
    # a switch that sent nothing up is no evidence either way
    links = {i: {"tx_bytes": 0} for i in links}
    assert tier_report(fat, links)["agg->core"] == {
        "switches": {}, "worst": None, "mean": None, "idle_uplinks": 0, "uplinks": 0}
