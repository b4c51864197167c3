"""The simulator past what a fabric file can describe: a Clos from its counts
(sim/clos.py), routed as the controller routes one; ring and
hierarchical AllReduce from their structure (sim/phases.py), held to
the steps of the schedules they stand for; and the planner's --simulate."""

import json
import statistics
from collections import Counter

import pytest

from planner import main as plan_main
from topologies.fabric import load_fabric
from collectives import schedules as S
from sim.clos import ClosNetwork, ClosShape
from sim.network import Network
from sim.phases import allreduce_phases, phase_seconds
from sim.replay import Replay
from sim.steps import stepwise_seconds

SHAPES = [ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8),
          ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8, wiring="rail"),
          ClosShape(servers=16, gpus=4, nics=2, down=4, up=2, tiers=3, radix=4),
          ClosShape(servers=12, gpus=1, nics=1, down=3, up=1, radix=6)]
BIG = ClosShape(servers=16, gpus=8, nics=8, down=16, up=4, radix=16, nic_bps=400e9,
                fabric_bps=400e9, intra_bps=3600e9)


# --- phases: the schedules' steps, without building the schedules ------------------------

def built_sends(sched, channels):
    """Every send of a built schedule as (src, dst, channel, elements), counted."""
    out = Counter()
    for r, ops in sched.items():
        sent = Counter()
        for op in ops:
            if op.kind == "send":
                out[(r, op.peer, sent[op.peer] % channels, op.length)] += 1
                sent[op.peer] += 1
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=["2-tier", "rail", "3-tier-pcie", "1-gpu"])
@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
@pytest.mark.parametrize("channels", [1, 2, 3])
def test_the_phases_are_the_sends_of_the_schedule_they_stand_for(shape, algorithm, channels):
    n, count = shape.n, shape.n * shape.gpus * 320
    built = S.build("allreduce", algorithm, n, count, S.RankLayout(local=shape.gpus), data=False)
    phased = Counter()
    for ph in allreduce_phases(algorithm, n, count, shape.gpus, channels):
        for src, dst, ch in ph.transfers:
            phased[(src, dst, ch, ph.elements)] += ph.steps
    assert phased == built_sends(built, channels)


@pytest.mark.parametrize("shape", SHAPES + [BIG], ids=["2-tier", "rail", "3-tier-pcie", "1-gpu",
                                                       "128-gpus"])
@pytest.mark.parametrize("algorithm", ["ring", "hierarchical"])
@pytest.mark.parametrize("hop", [0.0, 1e-6, 1e-4])
def test_the_phases_agree_with_the_full_simulation(shape, algorithm, hop):
    # one connection per peer, as the planner simulates: within 7% over three draws
    n, count = shape.n, shape.n * shape.gpus * 320
    sched = S.build("allreduce", algorithm, n, count, S.RankLayout(local=shape.gpus), data=False)
    phases = allreduce_phases(algorithm, n, count, shape.gpus)
    for seed in range(3):
        net = ClosNetwork(shape, seed)
        full = Replay(net, list(range(n)), sched, 1, 1.0, hop).run().seconds
        assert phase_seconds(net, phases, 1.0, hop) == pytest.approx(full, rel=0.07)


def test_with_several_channels_the_phases_lean_slow_within_bounds():
    # a step's blocks on another connection overlap the last step's, which a
    # step priced alone cannot see: the phases are up to a third slower, and
    # at most a tenth faster, than the full simulation
    shape = SHAPES[0]
    n, count = shape.n, shape.n * shape.gpus * 320
    sched = S.build("allreduce", "hierarchical", n, count, S.RankLayout(local=shape.gpus), data=False)
    phases = allreduce_phases("hierarchical", n, count, shape.gpus, 2)
    for seed in range(3):
        net = ClosNetwork(shape, seed)
        full = Replay(net, list(range(n)), sched, 2, 1.0, 0.0).run().seconds
        assert full * 0.9 <= phase_seconds(net, phases, 1.0, 0.0) <= full * 1.35


def test_a_ring_of_nvlink_edges_and_one_nic_edge_runs_at_the_nics_pace():
    # 1,024 GPUs in the benchmark; here 16 servers x 8: the flat ring's one NIC
    # edge per server moves 2(n-1) blocks back to back, its latency hidden
    n, count = BIG.n, BIG.n * (1 << 20)            # 4 MiB blocks: 84 us at 400 Gbit/s
    net = ClosNetwork(BIG)
    block_s = count // n * 4 * 8 / BIG.nic_bps
    t = phase_seconds(net, allreduce_phases("ring", n, count), 1.0, 1e-6)
    assert t == pytest.approx(2 * (n - 1) * block_s, rel=0.05)
    assert t < 2 * (n - 1) * (block_s + 4e-6)            # not a latency per step on top


def test_a_timing_schedule_is_the_data_schedule_without_contributors():
    for algorithm in ("ring", "rhd", "tree"):
        data = S.build("allreduce", algorithm, 6, 600)
        timing = S.build("allreduce", algorithm, 6, 600, data=False)
        strip = {r: [(o.kind, o.peer, o.offset, o.length, o.round) for o in ops]
                 for r, ops in data.items()}
        assert strip == {r: [(o.kind, o.peer, o.offset, o.length, o.round) for o in ops]
                         for r, ops in timing.items()}
        assert any(o.contributors for ops in data.values() for o in ops)
        assert not any(o.contributors for ops in timing.values() for o in ops)


# --- the Clos from its counts routes as the controller does ----------------------------

def test_paths_go_up_only_as_far_as_needed():
    two = ClosNetwork(ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8))
    kinds = lambda path: [h.intf[0] for h in path]         # noqa: E731
    assert kinds(two.path(0, 3)) == ["nv", "nv"]                        # same server: NVLink
    assert kinds(two.path(0, 4)) == ["nic", "nic"]                      # same leaf
    assert kinds(two.path(0, 8)) == ["nic", "leaf-up", "spine-down", "nic"]
    three = ClosNetwork(SHAPES[2])                                      # 2 NICs for 4 GPUs
    assert kinds(three.path(0, 4)) == ["pcie", "nic", "nic", "pcie"]    # same leaf, over PCIe
    assert kinds(three.path(0, 8)) == ["pcie", "nic", "leaf-up", "agg-down", "nic", "pcie"]
    assert kinds(three.path(0, 63)) == ["pcie", "nic", "leaf-up", "agg-up", "core-down",
                                        "agg-down", "nic", "pcie"]


def test_rail_wiring_keeps_gpu_k_of_a_units_servers_on_one_leaf():
    rail = ClosNetwork(SHAPES[1])
    server = ClosNetwork(SHAPES[0])
    # GPU 2 of server 0 to GPU 2 of server 5: one rail leaf, or two leaves and a spine
    assert len(rail.path(2, 5 * 4 + 2)) == 2
    assert len(server.path(2, 5 * 4 + 2)) == 4


def test_ecmp_spreads_flows_over_every_uplink_and_a_seed_repeats_its_draw():
    shape = ClosShape(servers=64, gpus=1, nics=1, down=8, up=8, radix=16)
    net = ClosNetwork(shape, seed=1)
    used = {net.path(s, 63 - s, flow)[1].intf for s in range(8) for flow in range(8)}
    assert {u[2] for u in used if u[1] == 0} == set(range(8))          # leaf 0's 8 uplinks
    again = ClosNetwork(shape, seed=1)
    other = ClosNetwork(shape, seed=2)
    paths = lambda n: [n.path(s, 63 - s, 0) for s in range(32)]       # noqa: E731
    assert paths(net) == paths(again) and paths(net) != paths(other)


def test_on_a_fabric_file_of_the_same_shape_the_two_agree_where_ecmp_has_no_choice():
    # rail-optimized.yaml: 8 servers x 4 GPUs on 4 rail leaves. A hierarchical
    # AllReduce keeps its inter-server step on the rail leaves, and a flat ring's
    # leaf-crossing hops never share a link: no draw matters
    for wiring, name, algorithm in (("rail", "rail-optimized.yaml", "hierarchical"),
                                    ("server", "leaf-spine-4gpu.yaml", "ring")):
        fabric = load_fabric(f"topologies/{name}")
        spec = fabric.spec["links"]
        shape = ClosShape(servers=8, gpus=4, nics=4, down=8, up=2, radix=4, wiring=wiring,
                          nic_bps=spec["server_leaf"]["rate_mbit"] * 1e6,
                          fabric_bps=spec["leaf_spine"]["rate_mbit"] * 1e6,
                          intra_bps=spec["intra_node"]["rate_mbit"] * 1e6,
                          switch_s=fabric.switch_latency_us * 1e-6)    # the switches' latency too
        count = 32 * 4096
        sched = S.build("allreduce", algorithm, 32, count, S.RankLayout(local=4), data=False)
        full = stepwise_seconds(Network(fabric), [h.name for h in fabric.endpoints], sched,
                                1, 1.0, 1e-4)
        assert stepwise_seconds(ClosNetwork(shape), list(range(32)), sched, 1, 1.0, 1e-4) == \
            pytest.approx(full, rel=1e-9)


def test_where_ecmp_decides_both_draw_collisions_alike():
    # leaf-spine-4gpu.yaml with spine links as fast as the NICs, hierarchical:
    # 4 rails leave each leaf on 2 uplinks; over 24 draws each, the median
    # times of the two models agree
    fabric = load_fabric("topologies/leaf-spine-4gpu.yaml").edited(
        lambda spec: spec["links"]["leaf_spine"].update(rate_mbit=4))
    spec = fabric.spec["links"]
    shape = ClosShape(servers=8, gpus=4, nics=4, down=8, up=2, radix=4,
                      nic_bps=spec["server_leaf"]["rate_mbit"] * 1e6,
                      fabric_bps=spec["leaf_spine"]["rate_mbit"] * 1e6,
                      intra_bps=spec["intra_node"]["rate_mbit"] * 1e6)
    count = 32 * 4096
    sched = S.build("allreduce", "hierarchical", 32, count, S.RankLayout(local=4), data=False)
    ranks = [h.name for h in fabric.endpoints]
    full = [stepwise_seconds(Network(fabric, seed), ranks, sched, 1) for seed in range(24)]
    scale = [stepwise_seconds(ClosNetwork(shape, seed), list(range(32)), sched, 1)
             for seed in range(24)]
    assert statistics.median(scale) == pytest.approx(statistics.median(full), rel=0.1)
    assert min(scale) < max(scale) and min(full) < max(full)          # the draw mattered


# --- the planner's --simulate ------------------------------------------------------------

def simulate(capsys, *argv):
    assert plan_main(["--simulate", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)["simulated"]


def test_planner_simulates_ring_and_hierarchical_on_each_clos_and_wiring(capsys):
    sim = simulate(capsys, "--gpus", "1024", "--sizes", "1M,1G")
    rows = sim["rows"]
    assert {(r["design"], r["wiring"], r["algorithm"]) for r in rows} == {
        (d, w, a) for d in ("clos-2", "clos-3") for w in ("server", "rail")
        for a in ("ring", "hierarchical")}
    for r in rows:
        # nothing beats the NIC (busbw counts bytes per GPU through its 400 Gbit/s NIC),
        # and nothing beats the ideal fabric
        assert r["busbw_gbytes"] <= 400 / 8 * 1.0001 or r["algorithm"] == "hierarchical"
        assert r["seconds"] >= r["ideal_seconds"] * (1 - 1e-9)
    big = {(r["design"], r["wiring"], r["algorithm"]): r for r in rows if r["size_bytes"] == 1 << 30}
    # hierarchical beats the flat ring at 1 GiB: only 1/8 of the bytes leave each server
    assert big[("clos-2", "server", "hierarchical")]["seconds"] < \
        big[("clos-2", "server", "ring")]["seconds"]
    # rail wiring keeps the hierarchical inter-server step off the spines: no fabric cost
    assert big[("clos-2", "rail", "hierarchical")]["fabric_factor"] == pytest.approx(1.0)


def test_oversubscription_costs_where_more_flows_leave_a_leaf_than_it_has_uplinks(capsys):
    # rail wiring, flat ring: each server's hop to the next goes from its last
    # rail leaf to the first, so every server of a unit sends one flow up the
    # same leaf: 32 flows on 32 uplinks at 1:1, 51 on 13 at 4:1
    flat = simulate(capsys, "--gpus", "1024")["rows"]
    over = simulate(capsys, "--gpus", "1024", "--oversubscription", "4")["rows"]
    pick = lambda rows, w, a: next(r for r in rows if r["design"] == "clos-2"     # noqa: E731
                                   and r["wiring"] == w and r["algorithm"] == a)
    assert pick(over, "rail", "ring")["seconds"] > 1.5 * pick(flat, "rail", "ring")["seconds"]
    assert pick(over, "rail", "ring")["fabric_factor"] > 4
    # the rail wiring's hierarchical AllReduce never leaves the rail leaves
    assert pick(over, "rail", "hierarchical")["fabric_factor"] == pytest.approx(1.0)


def test_past_the_radix_the_smallest_3_tier_clos_that_holds_it_is_simulated(capsys):
    sim = simulate(capsys, "--gpus", "16384", "--radix", "16", "--gpus-per-server", "8",
                   "--sizes", "1M")
    assert sim["notes"] and "radix 16 holds neither" in sim["notes"][0]
    assert {r["design"] for r in sim["rows"]} == {"clos-3"}
    assert all(r["radix"] > 16 for r in sim["rows"])


def test_the_report_prints_nccl_tests_columns(capsys):
    assert plan_main(["--gpus", "256", "--simulate", "--seeds", "3"]) == 0
    out = capsys.readouterr().out
    assert "algbw(GB/s)" in out and "busbw(GB/s)" in out and "ECMP draws" in out
    assert "rail-optimized wiring" in out and "server per leaf wiring" in out
