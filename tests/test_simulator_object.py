"""The simulator is one object (sim/simulator.py) that owns its network,
seed, hop latency and what a caller hands it for the next collective; and
the sweep knows a backend only through the hooks its protocol declares."""

import ast
import inspect

import pytest

from collectives import schedules as S
from harness import REPO, TOPOLOGIES
from harness.fabrics import leaf_spine
from runs import sweep as sweep_module
from runs.experiment import Experiment
from runs.measured import LabBackend
from runs.simulated import SimBackend, simulate_experiment
from sim import phases
from sim.clos import ClosNetwork, ClosShape
from sim.nccl import rails
from sim.network import Network
from sim.simulator import EVENTS, NCCL_MODEL, Simulator
from topologies.fabric import load_fabric, parse_fabric
from traffic.engines import Job

FABRIC = leaf_spine(2, 2, 2, parallel=2, rate=20)        # 4 ways up: ECMP draws collide
RANKS = [h.name for h in FABRIC.endpoints]
JOB = Job("allreduce", "rhd", 1 << 14, channels=2)


def test_a_fresh_simulator_for_the_same_fabric_and_seed_gives_the_same_result():
    draws = {}
    for seed in range(6):
        one = Simulator.on_fabric(FABRIC, RANKS, seed).simulate(JOB)
        again = Simulator.on_fabric(FABRIC, RANKS, seed).simulate(JOB)
        assert (one.seconds, one.link_bytes) == (again.seconds, again.link_bytes)
        draws[seed] = tuple(sorted(one.link_bytes.items()))
    assert len(set(draws.values())) > 1                # the seed does decide the paths
    used = Simulator.on_fabric(FABRIC, RANKS, 0)
    used.simulate(JOB)
    for seed in (3, 1, 0):                             # reseeded: as fresh at that seed
        used.reseed(seed)
        assert tuple(sorted(used.simulate(JOB).link_bytes.items())) == draws[seed]
        assert used.seed == seed


def test_a_time_handed_over_is_the_next_collectives_alone_and_replays_nothing():
    sim = Simulator.on_fabric(FABRIC, RANKS)
    assert sim.method == ""
    sim.use_time(0.125)
    assert sim.prepare(JOB) == NCCL_MODEL == sim.method
    assert sim.result() == (0.125, {}, None)
    assert sim.prepare(JOB) == EVENTS                  # the next one is simulated again
    assert sim.result().seconds == Simulator.on_fabric(FABRIC, RANKS).simulate(JOB).seconds


def test_a_schedule_handed_over_is_replayed_for_its_count_only(monkeypatch):
    built = S.build(JOB.collective, JOB.algorithm, len(RANKS), JOB.count, data=False)
    expected = Simulator.on_fabric(FABRIC, RANKS).simulate(JOB)
    calls = []
    real = S.build

    def counted(*args, **kwargs):
        calls.append(args[:4])
        return real(*args, **kwargs)
    monkeypatch.setattr(S, "build", counted)
    sim = Simulator.on_fabric(FABRIC, RANKS)
    sim.use_schedule(JOB.count, built)
    assert sim.simulate(JOB) == expected and calls == []
    sim.use_schedule(JOB.count, built)
    sim.simulate(Job("allreduce", "rhd", 2 * JOB.count, channels=2))       # another count
    assert calls == [("allreduce", "rhd", len(RANKS), 2 * JOB.count)]
    sim.simulate(JOB)                                  # and it was used up
    assert len(calls) == 2


class _ByRank:
    """A fresh fabric network by rank numbers, as NCCL's share walks one."""

    def __init__(self, network, ranks):
        self.network, self.ranks, self.links, self.splits = network, ranks, network.links, False

    def path(self, a, b, flow=0):
        return self.network.path(self.ranks[a], self.ranks[b], flow)


def test_the_rail_and_alltoall_shares_draw_as_fresh_networks_do_and_leave_the_seed():
    fabric = parse_fabric("""
fabric: {spines: 4, leaves: 4, servers_per_leaf: 2, mtu: 9000}
server: {gpus: 4, nics: 4, model: hgx-h100}
links:
  server_leaf: {rate_mbit: 400G}
  leaf_spine: {rate_mbit: 400G}
  intra_node: {rate_mbit: 3600G}
""", "ls.yaml", emulate=False)
    ranks = [h.name for h in fabric.endpoints]
    fresh = rails.share_on(lambda seed: _ByRank(Network(fabric, seed), ranks), len(ranks), 4, 4,
                           400e9, 2, seeds=3)
    assert fresh < 1.0                                 # ECMP collides: the draws matter
    sim = Simulator.on_fabric(fabric, ranks, seed=7)
    before = sim.simulate(Job("allreduce", "ring", 1 << 16)).link_bytes
    assert sim.rail_share(4, 4, 400e9, 2, seeds=3) == fresh
    assert sim.seed == 7
    fresh = rails.alltoall_share_on(lambda seed: _ByRank(Network(fabric, seed), ranks),
                                    len(ranks), 4, 4, 400e9, 32, 2, seeds=3)
    assert sim.alltoall_share(4, 4, 400e9, 32, 2, seeds=3) == fresh < 1.0
    assert sim.seed == 7
    assert sim.simulate(Job("allreduce", "ring", 1 << 16)).link_bytes == before
    assert sim.ring_path_us(4) == rails.ring_path_us(_ByRank(Network(fabric), ranks),
                                                     len(ranks), 4)


def test_on_a_clos_it_prices_the_phases_as_the_planner_did():
    shape = ClosShape(servers=16, gpus=2, nics=2, down=4, up=2, radix=8)
    parts = phases.allreduce_phases("hierarchical", shape.n, 1 << 20, shape.gpus)
    times = set()
    for seed in range(4):
        t = Simulator.on_clos(shape, seed, 1e-6).phase_seconds(parts)
        assert t == phases.phase_seconds(ClosNetwork(shape, seed), parts, 1.0, 1e-6)
        times.add(t)
    assert len(times) > 1


# --- the sweep and its backends ----------------------------------------------------------

HOOKS = {name for name, member in vars(sweep_module.Backend).items()
         if inspect.isfunction(member) and not name.startswith("_")}
DECLARED = HOOKS | set(sweep_module.Backend.__annotations__)


def test_the_protocol_declares_every_hook_and_both_backends_have_each():
    assert {"begin", "tune", "price", "iterations", "measure", "finish", "close"} == HOOKS
    for backend in (LabBackend, SimBackend):
        missing = [h for h in HOOKS if not inspect.isfunction(getattr(backend, h, None))]
        assert not missing, (backend.__name__, missing)


def _backend_reads(tree) -> set:
    """Every attribute runs/sweep.py reads of a backend (`backend.x`,
    `loop.backend.x`), and whether it probes one with getattr."""
    read = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner = node.value
            if isinstance(inner, ast.Name) and inner.id == "backend" or (
                    isinstance(inner, ast.Attribute) and inner.attr == "backend"):
                read.add(node.attr)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr":
            target = ast.unparse(node.args[0])
            assert "backend" not in target, f"the sweep probes {target} with getattr"
    return read


def test_the_sweep_reads_nothing_of_a_backend_its_protocol_does_not_declare():
    reads = _backend_reads(ast.parse((REPO / "runs" / "sweep.py").read_text()))
    assert reads and reads <= DECLARED, reads - DECLARED
    with pytest.raises(AssertionError, match="probes backend"):
        _backend_reads(ast.parse("getattr(backend, 'tune', None)"))


class OnlyDeclared:
    """A backend offering only what the protocol declares: any other
    attribute read fails; the hooks called are counted."""

    def __init__(self, inner):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "called", set())

    def __getattribute__(self, name):
        if name == "called":
            return object.__getattribute__(self, name)
        if name not in DECLARED:
            raise AttributeError(f"the sweep asked for {name}, which Backend does not declare")
        value = getattr(object.__getattribute__(self, "_inner"), name)
        object.__getattribute__(self, "called").add(name)
        return value


def test_a_backend_with_only_the_protocols_hooks_runs_the_sweep_and_tune_prices_auto():
    h100 = load_fabric(TOPOLOGIES / "sim" / "hgx-h100-2x8.yaml", emulate=False)
    exp = Experiment(engine="sim", minbytes=1 << 20, maxbytes=1 << 22, iters=1, warmup=0)
    backend = OnlyDeclared(SimBackend(h100))
    record = sweep_module.sweep(backend, exp)
    assert HOOKS <= backend.called
    direct = simulate_experiment(h100, exp)
    assert [r["time_s"] for r in record.runs] == [r["time_s"] for r in direct.runs]
    assert all(r["method"] == NCCL_MODEL and "auto" in r for r in record.runs)
