"""How the simulator runs a sweep by its rank count and the work of each
size: event by event up to the emulator's 512 ranks while the replay stays
within its operations (a ring or hierarchical AllReduce past them takes the
step shortcut), the step shortcut beyond (no schedule of size n^2 built),
and a refusal in one sentence where neither reaches; the run says which
ran, and the shortcut's figures agree with the full simulation's."""

import pytest

from collectives import schedules as S
from harness import TOPOLOGIES
from harness.commands import run
from runs.experiment import Experiment
from runs.simulated import SimBackend, phase_prediction, simulate_experiment
from runs.sweep import RankCosts
from sim import alphabeta, phases
from topologies.fabric import load_fabric
import sim.simulator as simulator_module
from report.tables import sim_table
from sim.simulator import (EVENTS, MAX_REPLAY_OPS, PHASES, STEPS, Work, replay_operations,
                           simulation_method)

SIZES = dict(algorithm="ring", minbytes=64 << 10, maxbytes=1 << 20, stepfactor=4, iters=1,
             warmup=0)


def test_the_method_follows_the_rank_count_and_the_algorithm():
    assert simulation_method("allreduce", "ring", 512) == EVENTS
    assert simulation_method("alltoall", "pairwise", 512) == EVENTS
    assert simulation_method("allreduce", "ring", 513) == PHASES
    assert simulation_method("allreduce", "hierarchical", 16384) == PHASES
    assert simulation_method("allreduce", "rhd", 16384) == STEPS
    assert simulation_method("alltoall", "pairwise", 1024) == STEPS
    with pytest.raises(ValueError) as info:
        simulation_method("alltoall", "pairwise", 16384)
    message = str(info.value)
    assert "\n" not in message and message.startswith("alltoall (pairwise) over 16,384 ranks")
    assert "-c allreduce -a ring" in message


RING_512 = 4 * 512 * 511              # a ring over 512 ranks in whole blocks: its operations


def test_a_ring_over_512_ranks_replays_event_by_event_only_while_its_blocks_are_whole():
    # superpod-512's own sweep (32 KiB to 2 MiB: blocks of at most 4 KiB) stays
    # event by event; from two 64 KiB pieces a block (64 MiB) the replay would
    # run twice the operations, 33 million at 1 GiB: the step shortcut
    piece = 64 << 10
    for size, method in ((32 << 10, EVENTS), (2 << 20, EVENTS), (32 << 20, EVENTS),
                         (64 << 20, PHASES), (1 << 30, PHASES)):
        work = Work(size // 4, piece, 8)
        assert simulation_method("allreduce", "ring", 512, work=work) == method, size
    assert replay_operations("ring", 512, Work((2 << 20) // 4, piece)) == RING_512
    assert replay_operations("ring", 512, Work((1 << 30) // 4, piece)) == 32 * RING_512
    assert RING_512 <= MAX_REPLAY_OPS < 2 * RING_512
    # the budget is the replay's work, not the rank count: 64 ranks at 1 GiB
    # cut 256 pieces a block (16 million operations), 8 ranks stay event by event
    assert simulation_method("allreduce", "ring", 64, work=Work((1 << 30) // 4, piece)) == PHASES
    assert simulation_method("allreduce", "ring", 8, work=Work((1 << 30) // 4, piece)) == EVENTS
    assert simulation_method("allreduce", "hierarchical", 512,
                             work=Work((1 << 30) // 4, piece, 8)) == PHASES
    # other collectives have no phases to take instead: event by event, as before
    assert simulation_method("alltoall", "pairwise", 512, work=Work((1 << 30) // 4, piece)) \
        == EVENTS


@pytest.mark.parametrize("algorithm,n,local", [("ring", 8, 1), ("ring", 6, 1),
                                               ("hierarchical", 16, 4), ("hierarchical", 12, 4)])
@pytest.mark.parametrize("count,piece", [(96, 1 << 20), (96_000, 1000), (96_000, 4096),
                                         (100_003, 777), (100_003, 1 << 20)])
def test_the_replays_operations_are_counted_without_building_its_schedule(algorithm, n, local,
                                                                          count, piece):
    built = S.build("allreduce", algorithm, n, count, S.RankLayout(0, piece, local), data=False)
    ops = sum(len(v) for v in built.values())
    counted = replay_operations(algorithm, n, Work(count, piece * 4, local))
    if count % n == 0:
        assert counted == ops                   # blocks alike: exactly
    assert ops <= counted <= ops * 1.25         # else a bound, each block as the largest


def test_a_sweep_says_per_size_which_way_it_went(monkeypatch):
    # the budget lowered to whole blocks, so that 32 GPUs go both ways in one
    # sweep: blocks of 2 and 8 KiB whole, of 32 KiB in two 16 KiB pieces
    fabric = load_fabric(TOPOLOGIES / "rail-optimized.yaml")      # 32 GPUs, 8 servers x 4
    exp = Experiment(**{**SIZES, "piece_bytes": 16 << 10})
    whole = replay_operations("ring", 32, Work((64 << 10) // 4, 16 << 10, 4))
    monkeypatch.setattr(simulator_module, "MAX_REPLAY_OPS", whole)
    record = simulate_experiment(fabric, exp)
    assert [r["method"] for r in record.runs] == [EVENTS, EVENTS, PHASES]
    assert record.simulated["method"] == f"{EVENTS}, {PHASES}"
    table = sim_table(record).splitlines()
    assert table[1].endswith("method") and table[2].endswith(EVENTS)
    assert table[3].endswith(EVENTS) and table[4].endswith(PHASES)


def test_schedules_of_the_shortcut_beyond_512_ranks_stay_small():
    for collective, algorithm in (("allreduce", "rhd"), ("allreduce", "tree"),
                                  ("broadcast", "ring"), ("alltoall", "pairwise")):
        n = 1024 if algorithm != "pairwise" else 600
        built = S.build(collective, algorithm, n, n * 4, data=False)
        ops = sum(len(v) for v in built.values())
        assert ops <= simulator_module.schedule_operations(collective, algorithm, n), \
            (algorithm, ops)


# a ring's steps run alike on every rank; in the hierarchical AllReduce ranks
# run ahead into the next phase, which the shortcut keeps apart (docs/simulator.md)
@pytest.mark.parametrize("algorithm,most", [("ring", 1.05), ("hierarchical", 1.2)])
def test_the_shortcut_agrees_with_the_full_simulation_and_says_it_ran(monkeypatch, algorithm,
                                                                      most):
    fabric = load_fabric(TOPOLOGIES / "rail-optimized.yaml")      # 32 GPUs, 8 servers x 4
    exp = Experiment(**{**SIZES, "algorithm": algorithm})
    full = simulate_experiment(fabric, exp)
    monkeypatch.setattr(simulator_module, "FULL_RANKS", 8)
    short = simulate_experiment(fabric, exp)
    assert full.simulated["method"] == EVENTS and short.simulated["method"] == PHASES
    for a, b in zip(full.runs, short.runs):
        assert 0.95 <= b["time_s"] / a["time_s"] <= most
        assert b["predicted_s"] == pytest.approx(a["predicted_s"], rel=1e-9)
        busy = {i for i, l in a["links"].items() if l["tx_bytes"]}
        assert busy == {i for i, l in b["links"].items() if l["tx_bytes"]}
        for i in busy:
            assert b["links"][i]["tx_bytes"] == pytest.approx(a["links"][i]["tx_bytes"], rel=1e-6)


@pytest.mark.parametrize("algorithm,name", [("ring", "multi-gpu.yaml"),
                                            ("hierarchical", "multi-gpu.yaml"),
                                            ("ring", "default.yaml")])
def test_the_phases_price_alpha_beta_as_the_schedule_does(algorithm, name):
    fabric = load_fabric(TOPOLOGIES / name)
    ranks = [h.name for h in fabric.endpoints]
    model = RankCosts.of(fabric, ranks)
    count = model.n * 4096
    costs = alphabeta.Costs(1e-5, model.beta, model.beta_intra, model.nic_of.__getitem__)
    expected = alphabeta.predict("allreduce", algorithm, model.n, count, costs, 0, model.local)
    steps = alphabeta.schedule_cost(S.build("allreduce", algorithm, model.n, count,
                                            S.RankLayout(local=model.local), data=False),
                                    algorithm)["steps"]
    parts = phases.allreduce_phases(algorithm, model.n, count, model.local)
    assert phase_prediction(parts, model, 1e-5) == (pytest.approx(expected, rel=1e-12), steps)


def test_the_sweep_builds_no_schedule_where_the_shortcut_prices_it(monkeypatch):
    fabric = load_fabric(TOPOLOGIES / "multi-gpu.yaml")
    monkeypatch.setattr(simulator_module, "FULL_RANKS", 4)

    def never(*_args, **_kwargs):
        raise AssertionError("built a schedule the shortcut does without")
    monkeypatch.setattr(S, "build", never)
    record = simulate_experiment(fabric, Experiment(**SIZES))
    assert record.simulated["method"] == PHASES and len(record.runs) == 3
    _, sched, steps = SimBackend(fabric).price(Experiment(**SIZES), RankCosts.of(
        fabric, [h.name for h in fabric.endpoints]), 4096, 0.0)
    assert sched == {} and steps == 2 * 15


def test_event_by_event_the_engine_replays_the_schedule_the_sweep_priced(monkeypatch):
    built = []
    real = S.build

    def counted(*args, **kwargs):
        built.append(args[:4])
        return real(*args, **kwargs)
    monkeypatch.setattr(S, "build", counted)
    record = simulate_experiment(load_fabric(TOPOLOGIES / "default.yaml"), Experiment(**SIZES))
    assert record.simulated["method"] == EVENTS
    # per size one, priced and then replayed (at 512 ranks a ring's takes seconds)
    assert len(built) == len(record.runs)


def test_a_prediction_builds_its_schedule_without_data(monkeypatch):
    """At 512 ranks a ring AllReduce's contributors held 15 GB."""
    seen = []
    real = S.build

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(any(op.contributors for ops in out.values() for op in ops))
        return out
    monkeypatch.setattr(S, "build", spy)
    simulate_experiment(load_fabric(TOPOLOGIES / "default.yaml"), Experiment(**SIZES))
    assert seen and not any(seen)


def test_run_topology_refuses_what_neither_way_reaches_before_it_runs():
    path = TOPOLOGIES / "sim" / "leaf-spine-16k.yaml"
    bad = run("--check", str(path), "-c", "alltoall")
    assert bad.returncode == 2 and bad.stderr.startswith(
        "error: alltoall (pairwise) over 16,384 ranks would build a schedule of about ")
    assert bad.stderr.count("\n") == 1 and "-c allreduce -a ring" in bad.stderr
    ok = run("--check", str(path))
    assert ok.returncode == 0 and "engine sim" in ok.stdout
