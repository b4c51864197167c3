"""The flow-level simulator against closed forms where they are exact, its
determinism, and its run record: the emulator's, field for field."""

import json

import pytest

from harness.fabrics import leaf_spine
from topologies.fabric import parse_fabric
from collectives import metrics as M
from collectives import schedules as S
from runs.experiment import Experiment
from sim.fairness import max_min_rates
from sim.network import Network
from sim.replay import Replay
from runs.simulated import simulate_experiment

MBIT = 1e6


# --- max-min fairness -------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_k_flows_on_one_link_get_a_kth_each(k):
    rates = max_min_rates({f: ["a"] for f in range(k)}, {"a": 12.0})
    assert all(r == pytest.approx(12.0 / k) for r in rates.values())


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others():
    # f1 crosses a (1) and b (10); f2 only b: f1 gets 1, f2 the other 9
    assert max_min_rates({"f1": ["a", "b"], "f2": ["b"]}, {"a": 1.0, "b": 10.0}) == \
        pytest.approx({"f1": 1.0, "f2": 9.0})


def test_the_textbook_parking_lot():
    # one long flow over links a and b, one short flow on each: all get 1/2
    rates = max_min_rates({"long": ["a", "b"], "s1": ["a"], "s2": ["b"]}, {"a": 1.0, "b": 1.0})
    assert rates == pytest.approx({"long": 0.5, "s1": 0.5, "s2": 0.5})


# --- replays with known answers -------------------------------------------------------

def one_switch(n, rate=8.0, switch_us=0.0):
    """`n` servers on one switch of `switch_us` latency (0: the closed forms
    of bandwidth alone)."""
    return parse_fabric(f"""
name: one-switch
fabric: {{kind: single-switch, servers: {n}, mtu: 1500}}
links:
  server_leaf: {{rate_mbit: {rate}, queue_packets: 100}}
network: {{switch_latency_us: {switch_us}}}
""", "one-switch.yaml")


def replay(fabric, collective, algorithm, count, piece=0, channels=1, seed=0, hop=0.0,
           wire=1.0):
    ranks = [h.name for h in fabric.endpoints]
    sched = S.build(collective, algorithm, len(ranks), count, S.RankLayout(piece_elements=piece))
    return Replay(Network(fabric, seed), ranks, sched, channels, wire, hop).run()


@pytest.mark.parametrize("n", [2, 4, 5, 8])
def test_a_ring_on_a_non_blocking_fabric_takes_2_n_1_over_n_s_over_b_plus_latency(n):
    fabric, count, hop, switch = one_switch(n, switch_us=3.0), 1024 * n, 50e-6, 3e-6
    out = replay(fabric, "allreduce", "ring", count, hop=hop)
    bits = count * 4 * 8
    # 2(n-1) steps, each S/n at the link rate plus a 2-hop path's latency and its switch's
    expected = 2 * (n - 1) * (bits / n / (8 * MBIT) + 2 * hop + switch)
    assert out.seconds == pytest.approx(expected, rel=1e-9)


def test_pieces_pipeline_a_chain_broadcast_to_about_s_over_b():
    fabric, count = one_switch(6), 64 * 1024
    whole = replay(fabric, "broadcast", "ring", count).seconds
    pieces = replay(fabric, "broadcast", "ring", count, piece=1024).seconds
    one_pass = count * 4 * 8 / (8 * MBIT)
    assert whole == pytest.approx(5 * one_pass)                  # store and forward, 5 hops
    assert pieces == pytest.approx(one_pass * (1 + 4 / 64))      # the pipe fills, then streams


def test_a_64_rank_ring_over_two_channels_still_takes_the_closed_form():
    # one message per step: the channels take turns, never share the uplink
    n, hop = 64, 20e-6
    fabric, count = one_switch(n), 1024 * n
    out = replay(fabric, "allreduce", "ring", count, channels=2, hop=hop)
    bits = count * 4 * 8
    assert out.seconds == pytest.approx(2 * (n - 1) * (bits / n / (8 * MBIT) + 2 * hop), rel=1e-9)
    # each server sends 2(n-1) blocks of S/n, once over its uplink
    assert out.link_bytes["h1-eth0"] == pytest.approx(2 * (n - 1) * count * 4 / n, rel=1e-9)


def test_a_64_rank_chain_streams_its_pieces_behind_the_first():
    n, count, piece = 64, 64 * 1024, 1024
    out = replay(one_switch(n), "broadcast", "ring", count, piece=piece)
    one_pass = count * 4 * 8 / (8 * MBIT)
    # the first piece crosses n - 1 hops, the other 63 follow it one by one
    assert out.seconds == pytest.approx(one_pass * (1 + (n - 2) / (count // piece)), rel=1e-9)


def test_a_flow_that_finishes_first_leaves_its_share_to_the_one_still_moving():
    # h1 and h2 both send to h3: they halve its downlink until h1's S is
    # through (2 S/B), then h2's remaining S runs at the full rate (3 S/B)
    fabric, count = one_switch(3), 8192
    ranks = [h.name for h in fabric.endpoints]
    sched = {0: [S.Op("send", 2, 0, count)], 1: [S.Op("send", 2, 0, 2 * count)],
             2: [S.Op("recv", 0, 0, count, contributors=frozenset({0}), round=0),
                 S.Op("recv", 1, count, 2 * count, contributors=frozenset({1}), round=1)]}
    out = Replay(Network(fabric), ranks, sched).run()
    alone = count * 4 * 8 / (8 * MBIT)
    ends = [e["end"] for e in out.busy if e["rank"] == 2]
    assert ends == pytest.approx([2 * alone, 3 * alone], rel=1e-9)
    assert out.seconds == pytest.approx(3 * alone, rel=1e-9)
    assert out.link_bytes["leaf1-eth3"] == pytest.approx(3 * count * 4, rel=1e-9)


def test_header_overhead_stretches_the_time_by_the_wire_factor():
    fabric = one_switch(4)
    wire = 1 / M.payload_share(1500)
    plain = replay(fabric, "allreduce", "ring", 4096).seconds
    assert replay(fabric, "allreduce", "ring", 4096, wire=wire).seconds == \
        pytest.approx(plain * wire)


def test_single_path_puts_two_crossing_flows_on_one_spine_and_takes_twice_as_long():
    # h1 -> h3 and h2 -> h4 cross from leaf1 to leaf2; the uplinks run at the
    # servers' rate, so sharing one spine halves each flow; two spines need not
    single = leaf_spine(2, 2, 2, rate=8, policy="single-path", switch_latency_us=0)
    ranks, count = ["h1", "h2", "h3", "h4"], 8192
    sched = {0: [S.Op("send", 2, 0, count)], 1: [S.Op("send", 3, 0, count)],
             2: [S.Op("recv", 0, 0, count, contributors=frozenset({0}))],
             3: [S.Op("recv", 1, 0, count, contributors=frozenset({1}))]}
    alone = count * 4 * 8 / (8 * MBIT)
    assert Replay(Network(single), ranks, sched).run().seconds == pytest.approx(2 * alone)
    ecmp = leaf_spine(2, 2, 2, rate=8, switch_latency_us=0)
    times = {}
    for seed in range(16):          # the hash decides: a collision or not
        net = Network(ecmp, seed)
        collide = net.path("h1", "h3")[1].intf == net.path("h2", "h4")[1].intf
        times[collide] = Replay(net, ranks, sched).run().seconds
    assert times == pytest.approx({True: 2 * alone, False: alone})


def test_channels_are_flows_ecmp_may_spread():
    fabric = leaf_spine(4, 2, 1, rate=8)
    net = Network(fabric, seed=3)
    paths = {tuple(l.intf for l in net.path("h1", "h2", flow=c)) for c in range(16)}
    assert len({p[1] for p in paths}) == 4            # 16 channels reach all 4 spines


# --- the run record -----------------------------------------------------------------

def test_the_same_seed_gives_the_same_figures_and_another_may_not():
    fabric = leaf_spine(4, 2, 2, rate=20)
    exp = Experiment(engine="sim", algorithm="rhd", channels=2, minbytes=1 << 16,
                     maxbytes=1 << 18)
    a = simulate_experiment(fabric, exp, seed=1)
    b = simulate_experiment(fabric, exp, seed=1)
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)
    others = {tuple(r["time_s"] for r in simulate_experiment(fabric, exp, seed=s).runs)
              for s in range(8)}
    assert len(others) > 1                            # ECMP draws differ between seeds


def test_the_record_has_the_emulators_fields_and_per_link_bytes():
    from report.tables import CSV_FIELDS, csv_text, nccl_table
    fabric = leaf_spine(2, 2, 2, rate=20)
    exp = Experiment(engine="sim", minbytes=1 << 20, maxbytes=1 << 20)
    result = simulate_experiment(fabric, exp)
    run = result.runs[0]
    emulated_fields = {"collective", "algorithm", "engine", "ranks", "size_bytes", "count",
                       "type", "redop", "root", "time_s", "algbw_gbps", "busbw_gbps",
                       "busbw_over_link", "wrong", "predicted_s", "measured_over_predicted",
                       "latency", "links", "ecmp_imbalance", "cpu_busy_pct", "flags"}
    assert emulated_fields <= set(run)
    assert "#wrong" in nccl_table(result, 20)
    assert csv_text(result, fabric.network.name).splitlines()[0].split(",") == CSV_FIELDS
    # every byte a ring moves leaves a server once, headers not counted here
    sent = sum(run["links"][f"h{i}-eth0"]["tx_bytes"] for i in range(1, 5))
    assert sent == pytest.approx(4 * 2 * 3 / 4 * (1 << 20) / M.payload_share(fabric.mtu), rel=1e-6)
    assert max(l["mean_util"] for l in run["links"].values()) <= 1.0 + 1e-9


def test_run_topology_simulates_without_root_or_a_network(tmp_path):
    import subprocess
    import sys
    from harness import REPO
    proc = subprocess.run([sys.executable, str(REPO / "run_topology.py"), "--engine", "sim",
                           "-b", "64K", "-e", "256K", "--compare", "rhd", "--json",
                           "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    runs = summary["collectives"]["runs"]
    assert [r["size_bytes"] for r in runs] == [65536, 262144]
    assert all(r["engine"] == "sim" and r["wrong"] is None for r in runs)
    assert [r["algorithm"] for r in summary["compared"]["rhd"]["runs"]] == ["rhd", "rhd"]
    folder = tmp_path / summary["results"].rsplit("/", 1)[1]
    assert {"summary.json", "results.csv", "busbw.png"} <= {p.name for p in folder.iterdir()}


def test_beside_an_emulated_run_the_ecmp_draw_matching_its_counters_is_chosen():
    from traffic.engines import Job
    from runs.beside import Twin
    fabric = leaf_spine(2, 2, 2, rate=20)
    ranks = [h.name for h in fabric.endpoints]
    job = Job("allreduce", "rhd", 1 << 16, channels=2)
    sched = S.build("allreduce", "rhd", 4, 1 << 16, S.RankLayout(piece_elements=job.piece_bytes // 4))
    # the "lab": paths drawn with seed 5, two timed iterations counted
    lab = Replay(Network(fabric, seed=5), ranks, sched, 2, 1 / M.payload_share(fabric.mtu)).run()
    record = {"time_s": lab.seconds, "links": {i: {"tx_bytes": 2 * b}
                                               for i, b in lab.link_bytes.items()}}
    Twin(fabric, ranks, 0.0).beside(record, job, iterations=2)
    chosen = record["simulated_link_bytes"]
    inter = [i for l in fabric.links if l.kind == "leaf_spine" for i in (l.a_intf, l.b_intf)]
    assert all(chosen[i] == round(lab.link_bytes.get(i, 0)) for i in inter)
    assert record["measured_over_simulated"] == pytest.approx(1.0)
    spread = record["simulated_spread"]
    assert spread["seeds"] > 1 and spread["min_s"] <= record["simulated_s"] <= spread["max_s"]


def test_where_no_draw_matches_the_counters_the_paths_are_fitted_to_them():
    # 3 leaves with 2 parallel uplinks to each of 2 spines: 4 ways up, 2 down,
    # more combinations than 64 draws cover. The "lab" hashes with a seed the
    # draws never try; the paths fitted to its counters give its bytes and time
    from traffic.engines import Job
    from runs.beside import Twin
    fabric = parse_fabric("""
name: odd
fabric: {kind: leaf-spine, spines: 2, leaves: 3, servers_per_leaf: 2, uplinks_per_spine: 2}
links:
  server_leaf: {rate_mbit: 20}
  leaf_spine: {rate_mbit: 20}
""", "odd.yaml")
    ranks = [h.name for h in fabric.endpoints][:5]
    job = Job("allreduce", "rhd", 1 << 16)
    sched = S.build("allreduce", "rhd", 5, 1 << 16, S.RankLayout(piece_elements=job.piece_bytes // 4))
    inter = [i for l in fabric.links if l.kind == "leaf_spine" for i in (l.a_intf, l.b_intf)]
    for lab_seed in (1000, 1001, 1002):
        lab = Replay(Network(fabric, seed=lab_seed), ranks, sched, 1,
                     1 / M.payload_share(fabric.mtu)).run()
        record = {"time_s": lab.seconds, "links": {i: {"tx_bytes": 2 * b}
                                                   for i, b in lab.link_bytes.items()}}
        Twin(fabric, ranks, 0.0).beside(record, job, iterations=2)
        assert record["simulated_path_error"] < 1e-6
        assert all(record["simulated_link_bytes"][i] == pytest.approx(lab.link_bytes.get(i, 0),
                                                                      abs=1)
                   for i in inter if i in record["links"])
        assert record["measured_over_simulated"] == pytest.approx(1.0)


@pytest.mark.parametrize("algorithm, n", [("ring", 16), ("ring", 12), ("rhd", 16)])
def test_the_step_by_step_shortcut_agrees_with_the_full_simulation(algorithm, n):
    from sim.steps import stepwise_seconds
    fabric = leaf_spine(2, 4, 4, rate=20)
    ranks = [h.name for h in fabric.endpoints][:n]
    count = n * 4096
    whole = S.build("allreduce", algorithm, n, count)
    net = Network(fabric, seed=2)
    full = Replay(net, ranks, whole, 2, 1.0, 50e-6).run().seconds
    short = stepwise_seconds(net, ranks, whole, 2, 1.0, 50e-6)
    assert short == pytest.approx(full, rel=0.05)


def test_where_steps_overlap_unevenly_the_shortcut_is_a_lower_bound_within_15_percent():
    # rhd over 12 ranks: ranks that fold in nobody start exchanging at once,
    # competing with the fold for links; the shortcut keeps steps apart
    from sim.steps import stepwise_seconds
    fabric = leaf_spine(2, 4, 4, rate=20)
    ranks = [h.name for h in fabric.endpoints][:12]
    whole = S.build("allreduce", "rhd", 12, 12 * 4096)
    net = Network(fabric, seed=2)
    full = Replay(net, ranks, whole, 2, 1.0, 50e-6).run().seconds
    short = stepwise_seconds(net, ranks, whole, 2, 1.0, 50e-6)
    assert 0.85 * full <= short <= full
