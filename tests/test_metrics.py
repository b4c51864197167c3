"""The figures: nccl-tests' bandwidth factors, the alpha-beta model read off
the schedules, percentiles, sizes, and the printed table."""

import math

import pytest

from planner import ring_allreduce_seconds
from traffic import metrics as M
from traffic import schedules as S
from traffic.report.tables import csv_text, nccl_table


@pytest.mark.parametrize("collective,n,factor", [
    ("allreduce", 8, 1.75), ("allreduce", 2, 1.0), ("allreduce", 4, 1.5),
    ("reducescatter", 8, 0.875), ("allgather", 4, 0.75), ("alltoall", 16, 0.9375),
    ("broadcast", 8, 1.0), ("reduce", 8, 1.0), ("sendrecv", 8, 1.0)])
def test_bus_bandwidth_factors_are_nccl_tests(collective, n, factor):
    assert M.bus_factor(collective, n) == pytest.approx(factor)


def test_algbw_and_busbw_with_known_values():
    # nccl-tests: 1 GB AllReduce on 8 ranks in 10 ms -> algbw 100 GB/s, busbw 175 GB/s
    assert M.algbw_gbps(10**9, 0.01) == pytest.approx(100.0)
    assert M.busbw_gbps("allreduce", 8, 10**9, 0.01) == pytest.approx(175.0)
    assert M.busbw_gbps("allgather", 4, 4 * 10**8, 0.01) == pytest.approx(30.0)


def test_ring_allreduce_prediction_is_the_textbook_formula():
    n, count, alpha, beta = 8, 8 * 1024, 5e-5, 1e-8
    size = count * 4
    textbook = 2 * 7 * alpha + 2 * 7 / 8 * size * beta       # 2(n-1)a + 2(n-1)/n S b
    assert M.predict_seconds("allreduce", "ring", n, count, alpha, beta) == pytest.approx(textbook)
    # the planner's closed form is the same formula
    assert ring_allreduce_seconds(n, size, alpha, beta) == pytest.approx(textbook)


def test_rhd_takes_fewer_steps_than_ring_for_the_same_bytes():
    ring = M.schedule_cost(S.build("allreduce", "ring", 16, 1600))
    rhd = M.schedule_cost(S.build("allreduce", "rhd", 16, 1600))
    assert (ring["steps"], rhd["steps"]) == (30, 8)           # 2(n-1) versus 2 log2(n)
    assert M.schedule_cost(S.build("allreduce", "rhd", 6, 600))["steps"] == 6   # + fix-up
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


def fake_result():
    run = {"collective": "allreduce", "algorithm": "ring", "engine": "agents", "ranks": 4,
           "size_bytes": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": -1,
           "time_s": 0.5, "algbw_gbps": 0.0021, "busbw_gbps": 0.0031, "busbw_over_link": 0.9,
           "wrong": 0, "predicted_s": 0.45, "measured_over_predicted": 1.11,
           "latency": {"p50_us": 900.0, "p99_us": 2000.0, "max_us": 2500.0},
           "links": {"leaf1-eth3": {"tx_bytes": 1, "drops": 2, "peak_util": 0.97,
                                    "peak_backlog_bytes": 9000}},
           "ecmp_imbalance": {"leaf1": 1.2}, "cpu_busy_pct": 40.0}
    return {"experiment": {"collective": "allreduce", "algorithm": "ring", "engine": "agents",
                           "channels": 1, "iters": 5, "warmup": 1},
            "ranks": ["h1", "h2", "h3", "h4"], "runs": [run]}


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
    text = csv_text(fake_result()).splitlines()
    assert text[0].startswith("collective,algorithm,engine,ranks,size_bytes")
    assert text[1].startswith("allreduce,ring,agents,4,1048576,262144,float,sum,-1,0.5,")
    assert ",2," in text[1]                              # drops summed


@pytest.mark.parametrize("n, p", [(5, 4), (6, 4), (12, 8)])
def test_rhd_prices_the_fold_in_and_out_in_sequence(n, p):
    # the folding rank receives S, exchanges 2(p-1)/p S, hands S back: in sequence
    count = 4096 * 16
    cost = M.schedule_cost(S.build("allreduce", "rhd", n, count), "rhd")
    assert cost["max_rank_elements"] == pytest.approx((2 + 2 * (p - 1) / p) * count)


def test_rhd_over_a_power_of_two_is_the_textbook_cost():
    count = 4096 * 16
    cost = M.schedule_cost(S.build("allreduce", "rhd", 8, count), "rhd")
    assert cost["max_rank_elements"] == 2 * 7 / 8 * count


def test_the_tier_report_finds_each_tiers_spread_and_polarisation():
    """A 4-ary fat-tree whose edge tier spreads evenly while every
    aggregation switch sends all up one core link: the upper tier reads
    max/mean 2 with half its up-links idle (hash polarisation)."""
    from topologies.fabric import load_fabric
    from tests.helpers import TOPOLOGIES
    from traffic.metrics import tier_report
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
