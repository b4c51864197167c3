"""The hybrid step's plan (sim/hybrid_step.py): groups as Megatron-LM lays
ranks out, the 1F1B order, its bubble in closed form, the waves the
simulator prices together, and layouts refused in one sentence."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim import hybrid_step
from sim.hybrid_step import HybridError, check, one_f_one_b, plan_hybrid, timeline

REPO = Path(__file__).resolve().parent.parent


def plan(tp=4, pp=2, dp=2, m=4, layers=4, n=16, local=4, fwd_s=0.01):
    return plan_hybrid({"tp": tp, "pp": pp, "dp": dp, "micro_batches": m,
                        "activation": 4096}, n, local, layers, fwd_s, 1 << 16)


def test_groups_are_laid_out_tensor_parallel_innermost():
    p = plan()
    groups = {c["kind"]: set() for c in p.collectives}
    for c in p.collectives:
        groups[c["kind"]].add(tuple(c["members"]))
    # TP: one server's 4 GPUs; DP: the same GPU of the two servers of a stage
    assert groups["tp"] == {(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15)}
    assert groups["dp"] == {(t, t + 4) for t in range(4)} | {(8 + t, 12 + t) for t in range(4)}
    # PP: rank r of stage 0 and rank r + 8 of stage 1, both ways
    assert groups["pp"] == {(r, r + 8) for r in range(8)} | {(r + 8, r) for r in range(8)}


@pytest.mark.parametrize("stage,pp,m,order", [
    (0, 2, 4, "F0 F1 B0 F2 B1 F3 B2 B3"),
    (1, 2, 4, "F0 B0 F1 B1 F2 B2 F3 B3"),
    (0, 4, 2, "F0 F1 B0 B1"),
    (0, 1, 3, "F0 B0 F1 B1 F2 B2"),
])
def test_one_f_one_b_order(stage, pp, m, order):
    assert " ".join(f"{k}{i}" for k, i in one_f_one_b(stage, pp, m)) == order


@pytest.mark.parametrize("tp,pp,dp,m", [(4, 2, 2, 4), (4, 4, 1, 3), (2, 2, 4, 8), (4, 1, 4, 2),
                                        (1, 4, 4, 1)])
def test_with_free_communication_the_step_is_the_1f1b_closed_form(tp, pp, dp, m):
    """(m + p - 1) x a micro-batch's forward and backward on a stage: the
    pipeline's bubble is (p-1)/(m+p-1) of it."""
    p = plan(tp, pp, dp, m, layers=8)
    per_micro_batch = 3 * 0.01 * (8 // pp)
    t = timeline(p, lambda wave: 0.0)
    assert t["step_s"] == pytest.approx((m + pp - 1) * per_micro_batch)
    assert t["compute_s"] == pytest.approx(p.compute_s) == pytest.approx(m * per_micro_batch)


def test_communication_lengthens_the_step_by_the_critical_path():
    p = plan(m=2)
    free = timeline(p, lambda wave: 0.0)["step_s"]
    # only the DP AllReduce costs: it ends the step, after the last backward
    dp_only = timeline(p, lambda wave: 0.5 if wave[0] == "dp" else 0.0)["step_s"]
    assert dp_only == pytest.approx(free + 0.5)
    # a TP AllReduce after every half layer: 2 halves x 2 layers x 2 passes x 2
    # micro-batches on stage 0, and the same on stage 1 within its window
    tp = timeline(p, lambda wave: 0.001 if wave[0] == "tp" else 0.0)["step_s"]
    assert tp > free + 16 * 0.001 - 1e-9


def test_a_wave_prices_every_group_of_a_stage_together():
    p = plan()
    wave = next(c["wave"] for c in p.collectives if c["kind"] == "dp")
    sched = hybrid_step.wave_schedule(p, wave)
    assert sorted(sched) == list(range(8))                  # stage 0's 8 ranks
    assert all(op.peer - r in (4, -4) for r, ops in sched.items() for op in ops)


@pytest.mark.parametrize("par,words", [
    ({"tp": 4, "pp": 2, "dp": 1}, "tp x pp x dp must be the 16 ranks"),
    ({"tp": 3, "pp": 1, "dp": 5}, "tp x pp x dp must be the 16 ranks"),
    ({"tp": 8, "pp": 1, "dp": 2}, "tp 8 must divide the 4 GPUs of a server"),
    ({"tp": 2, "pp": 8, "dp": 1}, "a pipeline stage must be whole servers"),
    ({"tp": 4, "pp": 4, "dp": 1, "layers": 6}, "pp 4 must divide the 6 layers"),
])
def test_layouts_the_ranks_cannot_run_are_refused(par, words):
    layers = par.pop("layers", 8)
    with pytest.raises(HybridError, match=words):
        check({"micro_batches": 1, **par}, 16, 4, layers)


FABRIC = """
name: hyb
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
server: {gpus: 4, nics: 1}
links:
  intra_node: {rate_mbit: 100}
  server_leaf: {rate_mbit: 10}
  leaf_spine: {rate_mbit: 10}
"""


@pytest.mark.parametrize("step,words", [
    ("{parallel: {tp: 4, pp: 2}}", "experiment.step.parallel: dp is missing"),
    ("{parallel: {tp: 4, pp: 2, dp: 2, cp: 2}}", "unknown key 'cp'"),
    ("{parallel: {tp: 4, pp: 4, dp: 2}}", "tp x pp x dp must be the 16 ranks"),
    ("{parallel: {tp: 4, pp: 2, dp: 2}, mode: sharded}", "experiment.step.mode"),
    ("{parallel: {tp: 4, pp: 2, dp: 2}, layers: 3}", "pp 2 must divide the 3 layers"),
])
def test_a_bad_parallel_step_is_one_sentence_naming_the_key(tmp_path, step, words):
    path = tmp_path / "hyb.yaml"
    path.write_text(FABRIC + f"experiment:\n  step: {step}\n")
    proc = subprocess.run([sys.executable, str(REPO / "run_topology.py"), str(path), "--engine",
                           "sim", "--results", str(tmp_path / "r")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert "hyb.yaml" in proc.stderr


def test_the_simulator_alone_runs_the_hybrid_step(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "run_topology.py"),
                           str(REPO / "topologies" / "hybrid-step.yaml"), "--engine", "sim",
                           "--results", str(tmp_path), "--json"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    step = json.loads(proc.stdout)["step"]
    assert step["step"]["parallel"]["tp"] == 4 and step["engine"] == "sim"
    p = step["predicted"]["parallel"]
    # 4 micro-batches on 2 stages of 2 layers: (m + p - 1) x 3 x 100 ms x 2 at least
    assert p["step_s"] >= 5 * 0.6 and p["exposed_s"] > 0


def test_the_parallel_flag_is_the_yaml_key(tmp_path):
    base = [sys.executable, str(REPO / "run_topology.py"), str(REPO / "topologies" /
                                                            "multi-gpu.yaml"),
            "--engine", "sim", "--results", str(tmp_path), "--step", "--layers", "4"]
    proc = subprocess.run(base + ["--parallel", "tp=4,pp=2,dp=2,micro_batches=2", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    par = json.loads(proc.stdout)["step"]["step"]["parallel"]
    assert par == {"tp": 4, "pp": 2, "dp": 2, "micro_batches": 2, "activation": 65536}
    bad = subprocess.run(base + ["--parallel", "tp=4,pp=3"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--parallel: dp is missing" in bad.stderr
