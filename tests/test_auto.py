"""-a auto through a whole sweep (simulated, no root): each size runs the
algorithm endhosts.choose picks with the sweep's own costs, the record says
what it weighed, the table prints what ran; a training step's buckets run
what it picks for their size."""

import pytest

from harness import TOPOLOGIES
from report.tables import nccl_table
from runs.experiment import Experiment, experiment_from, step_plan
from runs.simulated import simulate_experiment
from sim import alphabeta
from sim.nccl import endhosts
from topologies.fabric import load_fabric

RAIL = load_fabric(TOPOLOGIES / "rail-2x4.yaml")
DEFAULT = load_fabric(TOPOLOGIES / "default.yaml")


def test_each_size_runs_the_quickest_by_the_sweeps_own_costs():
    exp = Experiment(algorithm="auto", engine="sim", minbytes=8, maxbytes=1 << 21, stepfactor=64,
                     iters=1, warmup=0)
    record = simulate_experiment(DEFAULT, exp, hop_latency_s=2e-3)
    for r in record.runs:
        costs = alphabeta.Costs(record.alpha_s, record.beta_s_per_byte)
        want = endhosts.choose("allreduce", 4, r["elements"], costs)
        assert r["algorithm"] == want.algorithm
        assert r["auto"] == {"nccl": want.nccl, "predicted_s": dict(want.table)}
        assert r["predicted_s"] == pytest.approx(want.predicted_s)
    ran = [r["algorithm"] for r in record.runs]
    assert ran[0] == "tree" and ran[-1] == "ring"       # latency rules small, bytes large
    # the table's last column: the schedule, with NCCL's name only where it differs
    rows = [line for line in nccl_table(record, 20).splitlines() if not line.startswith("#")]
    assert [row.split()[-1] for row in rows] == ran and "(ring)" not in "".join(rows)


def test_servers_of_several_gpus_choose_between_nccls_rail_ring_and_tree():
    exp = Experiment(algorithm="auto", engine="sim", minbytes=8, maxbytes=8, iters=1, warmup=0)
    record = simulate_experiment(RAIL, exp)
    (r,) = record.runs
    assert set(r["auto"]["predicted_s"]) == {"rail-ring", "nccl-tree"}
    assert r["algorithm"] in ("rail-ring", "nccl-tree")
    table = nccl_table(record, 5)
    assert "algorithm (NCCL's)" in table and f"{r['algorithm']} ({r['auto']['nccl']})" in table


def test_a_named_algorithm_weighs_nothing():
    exp = Experiment(algorithm="ring", engine="sim", minbytes=8, maxbytes=8, iters=1, warmup=0)
    (r,) = simulate_experiment(DEFAULT, exp).runs
    assert "auto" not in r and r["algorithm"] == "ring"
    assert "algorithm (NCCL's)" not in nccl_table(simulate_experiment(DEFAULT, exp), 20)


def test_auto_is_a_choice_of_every_collective_and_compares():
    exp = experiment_from(DEFAULT, {"collective": "allgather", "algorithm": "auto"})
    assert exp.algorithm == "auto"
    exp = experiment_from(DEFAULT, {"algorithm": "ring"}, compare=["auto"])
    assert exp.algorithm == "ring"


def test_a_training_steps_buckets_run_what_auto_picks_for_their_size():
    """A step's buckets run what auto picks for their size by the links'
    rates alone (no lab latency yet), laid out by the servers' GPUs."""
    from runs.sweep import RankCosts
    from runs.training import jobs_of
    rail = load_fabric(TOPOLOGIES / "rail-2x4.yaml")
    step = {"layers": 2, "params": 1 << 20, "fwd_ms": 1.0}
    exp = experiment_from(rail, {"step": step, "engine": "sim", "algorithm": "auto"})
    assert exp.algorithm == "auto"
    jobs = jobs_of(exp, step_plan(exp), RankCosts.of(rail, [h.name for h in rail.endpoints]),
                   rail.policy)
    model = RankCosts.of(rail, [h.name for h in rail.endpoints])
    (count,) = {j.count for j in jobs.values()}
    pick = endhosts.choose("allreduce", 8, count, alphabeta.Costs(
        0.0, model.beta, model.beta_intra, model.nic_of.__getitem__), 4)
    assert pick.algorithm in ("rail-ring", "nccl-tree")
    assert {(j.algorithm, j.local) for j in jobs.values()} == {(pick.algorithm, 4)}


def test_a_schedule_too_large_to_draw_records_no_timeline(monkeypatch):
    from runs import sweep
    exp = Experiment(engine="sim", minbytes=1024, maxbytes=1024, iters=1, warmup=0)
    assert simulate_experiment(DEFAULT, exp).timeline is not None
    monkeypatch.setattr(sweep, "MAX_TIMELINE_OPERATIONS", 47)     # a 4-rank ring has 48
    assert simulate_experiment(DEFAULT, exp).timeline is None
    monkeypatch.setattr(sweep, "MAX_TIMELINE_OPERATIONS", 48)
    assert simulate_experiment(DEFAULT, exp).timeline is not None
