"""Mutation-hardening tests for sim (fairness, network, replay, phases, steps, clos).

Expectations are computed by hand in the tests, never via the modules under test:
max-min rates on small link graphs, transfer times as bits / rate on a hand-made
network (FakeNet: named links, rates, delays), ring pipelining from its closed form,
ECMP paths against hand-enumerated equal-cost sets.
"""

import math
from typing import NamedTuple

import pytest

from harness.fabrics import leaf_spine
from topologies.fabric import load_fabric, parse_fabric
from collectives import schedules as S
from sim.clos import ClosNetwork, ClosShape
from sim.fairness import max_min_rates
from sim.network import Network, sim_channels
from sim.phases import Phase, allreduce_phases, phase_seconds, ring_seconds
from sim.replay import Replay
from sim.steps import step_seconds, stepwise_seconds, transfer_times


# --- a tiny hand-made network: named links, their rates and delays -------------------

class FakeHop(NamedTuple):
    intf: str
    delay_s: float


class FakeRate(NamedTuple):
    rate_bps: float


class FakeNet:
    """`routes[(src, dst)]` or `routes[(src, dst, flow)]`: the link names a flow crosses."""

    def __init__(self, routes, rates, delays=None):
        self.routes, self.delays = routes, delays or {}
        self.links = {name: FakeRate(r) for name, r in rates.items()}
        self.asked = []

    def path(self, src, dst, flow=0):
        self.asked.append((src, dst, flow))
        names = self.routes.get((src, dst, flow), self.routes.get((src, dst)))
        return [FakeHop(n, self.delays.get(n, 0.0)) for n in names]


def rounded(x):
    """Floats in nested lists, tuples and dicts rounded to 9 digits (exact compare)."""
    if isinstance(x, float):
        return round(x, 9)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(rounded(v) for v in x)
    return x


def send(peer, length, step=0, offset=0):
    return S.Op("send", peer, offset, length, round=step)


def recv(peer, length, step=0, offset=0, reduce=False):
    return S.Op("recv", peer, offset, length, reduce=reduce, round=step)


# --- fairness --------------------------------------------------------------------------

def test_fairness_two_levels_of_bottleneck_by_hand():
    # a (cap 1): f1, f2 -> 0.5 each; b (cap 10): f2, f3, f4 -> (10 - 0.5) / 2 = 4.75
    rates = max_min_rates({"f1": ["a"], "f2": ["a", "b"], "f3": ["b"], "f4": ["b"]},
                          {"a": 1.0, "b": 10.0})
    assert rates == pytest.approx({"f1": 0.5, "f2": 0.5, "f3": 4.75, "f4": 4.75}, rel=1e-12)


def test_fairness_a_flow_on_no_link_is_infinite_and_a_repeated_link_counts_once():
    rates = max_min_rates({"none": [], "twice": ["a", "a"], "other": ["a"]}, {"a": 6.0})
    assert rates["none"] == math.inf
    assert rates["twice"] == pytest.approx(3.0) and rates["other"] == pytest.approx(3.0)


def test_fairness_a_lone_flow_gets_its_slowest_link():
    assert max_min_rates({"f": ["a", "b", "c"]}, {"a": 5, "b": 2, "c": 9}) == {"f": 2.0}
    # alone on a, sharing b with g: b decides (4/2 = 2), a does not (5)
    rates = max_min_rates({"f": ["a", "b"], "g": ["b"]}, {"a": 5.0, "b": 4.0})
    assert rates == pytest.approx({"f": 2.0, "g": 2.0})


def test_fairness_three_tiers_of_shares_with_leftovers():
    # c (cap 3) holds f1, f2, f3 -> 1 each; d (cap 7) holds f3, f4 -> f4 = 6;
    # e (cap 20) holds f4, f5 -> f5 = 14
    rates = max_min_rates({"f1": ["c"], "f2": ["c"], "f3": ["c", "d"], "f4": ["d", "e"],
                           "f5": ["e"]}, {"c": 3.0, "d": 7.0, "e": 20.0})
    assert rates == pytest.approx({"f1": 1.0, "f2": 1.0, "f3": 1.0, "f4": 6.0, "f5": 14.0})


def test_fairness_stale_shares_are_skipped_not_used():
    # x (cap 2): f1, f2 (share 1); y (cap 3): f2, f3 (share 1.5, later 2 once f2 is
    # frozen at 1); z (cap 2.5): f3 alone among users -> but f3 also on y.
    rates = max_min_rates({"f1": ["x"], "f2": ["x", "y"], "f3": ["y", "z"], "f4": ["z"]},
                          {"x": 2.0, "y": 3.0, "z": 2.5})
    # x first: f1 = f2 = 1; y has 2 left for f3; z 2.5 for f3, f4 -> 1.25 each (< 2)
    assert rates == pytest.approx({"f1": 1.0, "f2": 1.0, "f3": 1.25, "f4": 1.25})


# --- replay on hand-made links ----------------------------------------------------------

def test_replay_one_transfer_is_bits_over_rate_plus_delays_and_hop_latency():
    # 10 elements * 4 bytes * 1.5 wire * 8 = 480 bits at 800 bit/s = 0.6 s;
    # path a (delay 0.1) + b (0.02), 2 hops of 0.05: latency 0.22
    net = FakeNet({("A", "B"): ["a", "b"]}, {"a": 800.0, "b": 1600.0}, {"a": 0.1, "b": 0.02})
    sched = {0: [send(1, 10)], 1: [recv(0, 10)]}
    out = Replay(net, ["A", "B"], sched, 1, 1.5, 0.05).run()
    assert out.seconds == pytest.approx(0.6 + 0.22, rel=1e-12)
    assert out.link_bytes == pytest.approx({"a": 60.0, "b": 60.0})
    assert rounded(out.busy) == [
        {"rank": 0, "step": 0, "kind": "send", "start": 0.0, "end": 0.0},
        {"rank": 1, "step": 0, "kind": "recv", "start": 0.0, "end": 0.82}]


def test_replay_a_reducing_receive_is_its_own_span_kind_and_spans_group_by_step():
    net = FakeNet({("A", "B"): ["a"]}, {"a": 320.0})
    # B: step 0 receives 10 (1 s), step 1 adds 10 more in (another second)
    sched = {0: [send(1, 10, step=0, offset=0), send(1, 10, step=1, offset=10)],
             1: [recv(0, 10, step=0, offset=0), recv(0, 10, step=1, offset=10, reduce=True)]}
    out = Replay(net, ["A", "B"], sched).run()
    spans = {(e["rank"], e["step"], e["kind"]): (e["start"], e["end"]) for e in out.busy}
    assert rounded(spans) == {(0, 0, "send"): (0.0, 0.0), (0, 1, "send"): (0.0, 0.0),
                              (1, 0, "recv"): (0.0, 1.0), (1, 1, "reduce"): (0.0, 2.0)}
    assert [(e["rank"], e["step"], e["kind"]) for e in out.busy] == \
        [(0, 0, "send"), (0, 1, "send"), (1, 0, "recv"), (1, 1, "reduce")]
    assert out.seconds == pytest.approx(2.0)
    assert out.link_bytes == pytest.approx({"a": 80.0})


def test_replay_two_flows_share_a_link_then_the_survivor_takes_it_all():
    # A -> C over [a, c], B -> C over [b, c], all 800 bit/s. 320 and 640 bits:
    # both at 400 until A is through (0.8 s), then B's last 320 at 800 (0.4 s)
    net = FakeNet({("A", "C"): ["a", "c"], ("B", "C"): ["b", "c"]},
                  {"a": 800.0, "b": 800.0, "c": 800.0})
    sched = {0: [send(2, 10)], 1: [send(2, 20)],
             2: [recv(0, 10, step=0, offset=0), recv(1, 20, step=1, offset=10)]}
    out = Replay(net, ["A", "B", "C"], sched).run()
    ends = {(e["rank"], e["step"]): e["end"] for e in out.busy}
    assert ends[(2, 0)] == pytest.approx(0.8, rel=1e-12)
    assert ends[(2, 1)] == pytest.approx(1.2, rel=1e-12)
    assert out.seconds == pytest.approx(1.2, rel=1e-12)
    assert out.link_bytes == pytest.approx({"a": 40.0, "b": 80.0, "c": 120.0})


def test_replay_a_flow_joined_mid_way_halves_then_recovers():
    # A -> C: 1280 bits alone on c (800 bit/s). At 0.4 s B (which first got 10
    # elements from D over d) starts 320 bits to C over c as well: both at 400.
    # B's piece is through at 0.4 + 0.8 = 1.2, A has 1280 - 320 - 320 = 640 left
    # at 800: done at 2.0
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"], ("D", "B"): ["d"]},
                  {"c": 800.0, "d": 800.0})
    sched = {0: [send(2, 40)],
             1: [recv(3, 10, step=0), send(2, 10, step=1)],
             2: [recv(0, 40, step=0, offset=0), recv(1, 10, step=1, offset=40)],
             3: [send(1, 10)]}
    out = Replay(net, ["A", "B", "C", "D"], sched).run()
    ends = {(e["rank"], e["step"], e["kind"]): e["end"] for e in out.busy}
    assert ends[(1, 0, "recv")] == pytest.approx(0.4, rel=1e-12)
    assert ends[(1, 1, "send")] == pytest.approx(0.4, rel=1e-12)
    assert ends[(2, 1, "recv")] == pytest.approx(1.2, rel=1e-12)
    assert ends[(2, 0, "recv")] == pytest.approx(2.0, rel=1e-12)
    assert out.seconds == pytest.approx(2.0, rel=1e-12)


def test_replay_pieces_on_one_connection_go_one_after_another():
    # two messages A -> B of 10 elements (320 bits, 0.4 s each at 800), latency 0.1
    net = FakeNet({("A", "B"): ["a"]}, {"a": 800.0}, {"a": 0.1})
    sched = {0: [send(1, 10, step=0, offset=0), send(1, 10, step=1, offset=10)],
             1: [recv(0, 10, step=0, offset=0), recv(0, 10, step=1, offset=10)]}
    out = Replay(net, ["A", "B"], sched).run()
    ends = {(e["rank"], e["step"]): e["end"] for e in out.busy}
    assert ends[(1, 0)] == pytest.approx(0.5, rel=1e-12)
    assert ends[(1, 1)] == pytest.approx(0.9, rel=1e-12)


def test_replay_channels_take_turns_and_are_flows_of_their_own():
    # message k to a peer on channel k mod channels; flow 0 over p, flow 1 over q
    net = FakeNet({("A", "B", 0): ["p"], ("A", "B", 1): ["q"]}, {"p": 800.0, "q": 800.0})
    sched = {0: [send(1, 10, step=s, offset=10 * s) for s in range(3)],
             1: [recv(0, 10, step=s, offset=10 * s) for s in range(3)]}
    two = Replay(net, ["A", "B"], sched, channels=2)
    out = two.run()
    ends = {e["step"]: e["end"] for e in out.busy if e["rank"] == 1}
    # channel 0 carries messages 0 and 2 (0.4, 0.8), channel 1 message 1 (0.4)
    assert ends == pytest.approx({0: 0.4, 1: 0.4, 2: 0.8})
    assert out.link_bytes == pytest.approx({"p": 80.0, "q": 40.0})
    assert two.sent_bytes() == pytest.approx({("A", "B", 0): 80.0, ("A", "B", 1): 40.0})
    one = Replay(net, ["A", "B"], sched, channels=1)
    assert one.run().seconds == pytest.approx(1.2)
    assert one.sent_bytes() == pytest.approx({("A", "B", 0): 120.0})


def test_replay_sent_bytes_count_the_wire_factor():
    net = FakeNet({("A", "B"): ["a"], ("B", "A"): ["b"]}, {"a": 8.0, "b": 8.0})
    sched = {0: [send(1, 3), recv(1, 5, offset=3)], 1: [send(0, 5, offset=3), recv(0, 3)]}
    r = Replay(net, ["A", "B"], sched, 1, 2.0)
    assert r.sent_bytes() == pytest.approx({("A", "B", 0): 24.0, ("B", "A", 0): 40.0})


def test_replay_a_forward_waits_for_its_receive():
    # A -> B -> C, B forwards what it got (same buffer region): 2 x (0.4 + 0.1)
    net = FakeNet({("A", "B"): ["ab"], ("B", "C"): ["bc"]}, {"ab": 800.0, "bc": 800.0},
                  {"ab": 0.1, "bc": 0.1})
    sched = {0: [send(1, 10)], 1: [recv(0, 10, step=0), send(2, 10, step=1)],
             2: [recv(1, 10, step=1)]}
    out = Replay(net, ["A", "B", "C"], sched).run()
    spans = {(e["rank"], e["step"], e["kind"]): (e["start"], e["end"]) for e in out.busy}
    assert spans[(1, 1, "send")] == pytest.approx((0.5, 0.5))
    assert spans[(2, 1, "recv")] == pytest.approx((0.0, 1.0))
    assert out.seconds == pytest.approx(1.0)


def test_replay_a_piece_that_arrived_early_is_taken_when_its_receive_may_start():
    # B: op 0 receives 20 elements from C (0.8 s), op 1 overwrites 10 of them with
    # A's piece, which arrived at 0.4: op 1 starts and ends at 0.8
    net = FakeNet({("A", "B"): ["ab"], ("C", "B"): ["cb"]}, {"ab": 800.0, "cb": 800.0})
    sched = {0: [send(1, 10)], 1: [recv(2, 20, step=0), recv(0, 10, step=1)],
             2: [send(1, 20)]}
    out = Replay(net, ["A", "B", "C"], sched).run()
    spans = {(e["rank"], e["step"]): (e["start"], e["end"]) for e in out.busy}
    assert spans[(1, 0)] == pytest.approx((0.0, 0.8))
    assert spans[(1, 1)] == pytest.approx((0.8, 0.8))


def test_replay_a_receive_nobody_sends_stalls_with_a_count():
    net = FakeNet({}, {})
    with pytest.raises(RuntimeError, match="stalled with 2 operations never done"):
        Replay(net, ["A", "B"], {0: [recv(1, 4), send(1, 4, offset=0)], 1: []}).run()


def test_replay_a_link_of_no_rate_never_delivers():
    net = FakeNet({("A", "B"): ["a"]}, {"a": 0.0})
    with pytest.raises(RuntimeError, match="stalled with 1 operations"):
        Replay(net, ["A", "B"], {0: [send(1, 4)], 1: [recv(0, 4)]}).run()


def test_replay_of_nothing_takes_no_time():
    out = Replay(FakeNet({}, {}), ["A"], {0: []}).run()
    assert out.seconds == 0.0 and out.link_bytes == {} and out.busy == []


def test_replay_a_path_of_no_links_is_instant():
    net = FakeNet({("A", "B"): []}, {})
    out = Replay(net, ["A", "B"], {0: [send(1, 4)], 1: [recv(0, 4)]}, 1, 1.0, 0.5).run()
    assert out.seconds == 0.0


def test_replay_three_flows_two_bottlenecks_then_regrouping():
    # f1: A->D over [x], f2: B->D over [x, y], f3: C->D over [y]
    # x cap 800, y cap 1600. Max-min: x -> f1 = f2 = 400; y: f3 = 1200.
    # bits: f1 320 (done 0.8), f2 640 (320 left at 0.8), f3 1440 (480 left at 0.8)
    # from 0.8: y shared by f2, f3 -> 800 each (x allows f2 800): f2 done 1.2;
    # f3 has 160 left at 1.2, alone on y at 1600: done 1.3
    net = FakeNet({("A", "D"): ["x"], ("B", "D"): ["x", "y"], ("C", "D"): ["y"]},
                  {"x": 800.0, "y": 1600.0})
    sched = {0: [send(3, 10)], 1: [send(3, 20)], 2: [send(3, 45)],
             3: [recv(0, 10, step=0, offset=0), recv(1, 20, step=1, offset=10),
                 recv(2, 45, step=2, offset=30)]}
    out = Replay(net, ["A", "B", "C", "D"], sched).run()
    ends = {e["step"]: e["end"] for e in out.busy if e["rank"] == 3}
    assert ends == pytest.approx({0: 0.8, 1: 1.2, 2: 1.3}, rel=1e-9)


# --- network: the fabric's links and routes ---------------------------------------------

def hops(net, src, dst, flow=0):
    return [l.intf for l in net.path(src, dst, flow)]


def test_network_links_both_directions_with_rate_in_bits_and_delay_in_seconds():
    net = Network(leaf_spine(2, 2, 2, parallel=2, rate=8, delay_ms=2))
    up, down = net.links["leaf1-eth3"], net.links["spine1-eth1"]
    assert (up.intf, up.src, up.dst, up.kind) == ("leaf1-eth3", "leaf1", "spine1", "leaf_spine")
    assert (down.intf, down.src, down.dst) == ("spine1-eth1", "spine1", "leaf1")
    assert up.rate_bps == 8e6 and down.rate_bps == 8e6
    # each direction: the link's delay and the switch it enters (RoCE's 0.6 us, the default)
    assert up.delay_s == pytest.approx(0.002 + 0.6e-6) and down.delay_s == pytest.approx(0.0020006)
    assert net.links["h1-eth0"].dst == "leaf1" and net.links["leaf1-eth1"].dst == "h1"
    assert net.links["leaf1-eth1"].delay_s == pytest.approx(0.002)      # into a server: no switch
    assert len(net.links) == 2 * 12


def test_the_network_technology_sets_each_switch_latency_and_the_transport_s_message_cost():
    ib = Network(leaf_spine(2, 2, 2, rate=8).with_network("infiniband"))
    tcp = Network(leaf_spine(2, 2, 2, rate=8).with_network("tcp"))
    assert ib.links["leaf1-eth3"].delay_s == pytest.approx(0.13e-6)
    assert ib.links["h1-eth0"].delay_s == pytest.approx(0.13e-6)        # verbs add nothing
    assert tcp.links["h1-eth0"].delay_s == pytest.approx((0.6 + 20) * 1e-6)   # out of a server
    assert tcp.links["leaf1-eth3"].delay_s == pytest.approx(0.6e-6)
    asked = leaf_spine(2, 2, 2, rate=8).edited(lambda s: s["network"].update(switch_latency_us=0))
    assert Network(asked).links["leaf1-eth3"].delay_s == 0


# the equal-cost paths from h1 (leaf1) to h3 (leaf2) on 2 spines with 2 parallel links
# each: leaf1-eth3/4 reach spine1, eth5/6 spine2; spine1/2-eth3/4 go down to leaf2
H1_H3 = {("h1-eth0", up, f"{spine}-eth{d}", "leaf2-eth1")
         for spine, ups in (("spine1", (3, 4)), ("spine2", (5, 6)))
         for up in (f"leaf1-eth{u}" for u in ups) for d in (3, 4)}


def test_network_ecmp_paths_are_the_equal_cost_ones_and_reach_all_of_them():
    net = Network(leaf_spine(2, 2, 2, parallel=2, rate=8), seed=0)
    seen = {tuple(hops(net, "h1", "h3", f)) for f in range(64)}
    assert seen == H1_H3                     # every one, and nothing else
    assert hops(net, "h1", "h2") == ["h1-eth0", "leaf1-eth2"]     # same leaf: no choice
    assert net.decisions("h1", "h2") == []
    d = net.decisions("h1", "h3", 5)
    assert [n for _, n in d] == [4, 2] and d[0][0] == "leaf1"
    assert d[1][0] == hops(net, "h1", "h3", 5)[2].split("-")[0]


def test_network_the_hash_takes_source_destination_and_seed():
    f = leaf_spine(2, 2, 2, parallel=2, rate=8)
    net, other = Network(f, seed=0), Network(f, seed=1)
    up = lambda n, s, d, k: hops(n, s, d, k)[1]
    assert any(up(net, "h1", "h3", k) != up(net, "h2", "h3", k) for k in range(16))
    assert any(up(net, "h1", "h3", k) != up(net, "h1", "h4", k) for k in range(16))
    assert any(hops(net, "h1", "h3", k) != hops(other, "h1", "h3", k) for k in range(16))
    again = Network(f, seed=1)
    assert all(hops(again, "h1", "h3", k) == hops(other, "h1", "h3", k) for k in range(16))


def test_network_reseed_draws_as_a_fresh_network_of_that_seed():
    f = leaf_spine(2, 2, 2, parallel=2, rate=8)
    net = Network(f, seed=0)
    before = [hops(net, "h1", "h3", k) for k in range(16)]
    net.reseed(7)
    assert net.seed == 7
    fresh = Network(f, seed=7)
    after = [hops(net, "h1", "h3", k) for k in range(16)]
    assert after == [hops(fresh, "h1", "h3", k) for k in range(16)]
    assert after != before
    assert net.decisions("h1", "h3", 3) == fresh.decisions("h1", "h3", 3)


def test_network_pin_forces_a_bucket_and_none_draws_again():
    f = leaf_spine(2, 2, 2, parallel=2, rate=8)
    net = Network(f, seed=0)
    drawn = hops(net, "h1", "h3", 0)
    ups = set()
    for b in range(4):
        net.pin("leaf1", "h1", "h3", 0, b)
        p = hops(net, "h1", "h3", 0)
        assert tuple(p) in H1_H3
        ups.add(p[1])
    assert ups == {"leaf1-eth3", "leaf1-eth4", "leaf1-eth5", "leaf1-eth6"}
    net.pin("leaf1", "h1", "h3", 0, None)
    assert hops(net, "h1", "h3", 0) == drawn
    assert ("leaf1", "h1", "h3", 0) not in net.pinned
    net.pin("leaf1", "h1", "h3", 0, None)     # unpinning twice is fine
    # pinning one flow leaves the others as drawn
    net.pin("leaf1", "h1", "h3", 1, 0)
    assert hops(net, "h1", "h3", 0) == drawn


def spray_fabric(entropy):
    return parse_fabric(f"""
name: spray
fabric: {{spines: 2, leaves: 2, servers_per_leaf: 2, uplinks_per_spine: 2}}
links:
  server_leaf: {{rate_mbit: 8}}
  leaf_spine: {{rate_mbit: 8}}
routing: {{policy: spray, entropy: {entropy}}}
""", "spray.yaml")


def test_network_spray_sends_connection_k_over_path_k():
    net = Network(spray_fabric(16))
    paths = [tuple(hops(net, "h1", "h3", k)) for k in range(16)]
    assert set(paths[:8]) == H1_H3                 # 8 connections, 8 distinct paths
    assert paths[8:] == paths[:8]                  # then round again
    # the first choice (4 uplinks) turns fastest, the next (2 down) every 4
    assert len({p[1] for p in paths[:4]}) == 4
    assert all(paths[k][1] == paths[k + 4][1] and paths[k][2] != paths[k + 4][2]
               for k in range(4))
    assert Network(spray_fabric(16), seed=9).path("h1", "h3", 5) == net.path("h1", "h3", 5)


def test_sim_channels_are_the_entropy_under_spray_else_the_channels():
    assert sim_channels(spray_fabric(16), 2) == 16
    assert sim_channels(spray_fabric(4), 6) == 6
    assert sim_channels(spray_fabric(4), 3) == 4
    assert sim_channels(leaf_spine(2, 2, 2, policy="flowlet"), 3) == 3
    assert sim_channels(leaf_spine(2, 2, 2), 5) == 5


def test_network_adaptive_avoids_the_loaded_next_link_and_reseed_forgets():
    # 2 spines, 3 leaves, a server each. h3 -> h2 goes first, onto some spine X
    # (its uplink and X's link down to leaf2 now carry one); h1 -> h2 then finds
    # its own uplink to X free but X's link to leaf2 loaded: it takes the other
    f = leaf_spine(2, 3, 1, policy="adaptive", rate=8)
    net = Network(f)
    first = hops(net, "h3", "h2")
    second = hops(net, "h1", "h2")
    spine = lambda p: net.links[p[1]].dst
    assert spine(first) != spine(second)
    assert net.placed[first[1]] == 1 and net.placed[first[2]] == 1
    assert net.placed[second[1]] == 1 and net.placed[second[2]] == 1
    # a third connection h1 -> h2: both ways carry one now, the first port wins
    third = hops(net, "h1", "h2", 1)
    assert spine(third) == spine(first)
    assert net.placed[third[2]] == 2
    net.reseed(0)
    assert net.placed == {}
    assert spine(hops(net, "h1", "h2")) == spine(first)


def test_network_adaptive_spreads_connections_over_every_spine_before_doubling_up():
    net = Network(leaf_spine(4, 2, 1, policy="adaptive", rate=8))
    spines = [net.links[hops(net, "h1", "h2", k)[1]].dst for k in range(8)]
    assert sorted(spines[:4]) == ["spine1", "spine2", "spine3", "spine4"]
    assert spines[4:] == spines[:4]


def test_network_multi_gpu_paths_nvlink_inside_pcie_and_nic_outside():
    f = load_fabric("topologies/multi-gpu.yaml")
    net = Network(f, seed=0)
    assert hops(net, "h1g1", "h1g3") == ["h1g1-eth1", "h1nv-eth3"]
    assert net.decisions("h1g1", "h1g3") == []
    assert net.links["h1g1-eth1"].rate_bps == 100e6
    assert hops(net, "h1g2", "h2g3") == ["h1g2-eth0", "h1-eth5", "leaf1-eth2", "h2-eth3"]
    seen = {tuple(hops(net, "h1g1", "h3g4", k)) for k in range(32)}
    assert seen == {("h1g1-eth0", "h1-eth5", "leaf1-eth3", "spine1-eth2", "leaf2-eth1",
                     "h3-eth4"),
                    ("h1g1-eth0", "h1-eth5", "leaf1-eth4", "spine2-eth2", "leaf2-eth1",
                     "h3-eth4")}
    assert net.links["h1-eth5"].rate_bps == 10e6


# --- steps: transfers sharing links, step by step -----------------------------------------

def test_transfer_times_share_then_finish_with_the_latency_apart():
    # A->C over [a, c], B->C over [b, c], 800 bit/s each; 320 and 640 bits: both at
    # 400 until A is through at 0.8, B's last 320 at 800: 1.2. Latency: delays plus
    # 0.01 per hop
    net = FakeNet({("A", "C"): ["a", "c"], ("B", "C"): ["b", "c"]},
                  {"a": 800.0, "b": 800.0, "c": 800.0}, {"a": 0.05, "b": 0.2, "c": 0.1})
    done = transfer_times(net, [("A", "C", 0, 320.0), ("B", "C", 0, 640.0)], 0.01)
    assert rounded(done) == {("A", "C", 0): (0.8, 0.17), ("B", "C", 0): (1.2, 0.32)}
    assert step_seconds(net, [("A", "C", 0, 320.0), ("B", "C", 0, 640.0)], 0.01) == \
        pytest.approx(1.2 + 0.32)


def test_transfer_times_alone_at_the_slowest_link_and_repeats_add_up():
    net = FakeNet({("A", "B"): ["a", "b"], ("C", "D"): ["d"]}, {"a": 800.0, "b": 400.0,
                                                               "d": 1000.0})
    done = transfer_times(net, [("A", "B", 0, 160.0), ("A", "B", 0, 160.0),
                                ("C", "D", 1, 500.0)])
    assert rounded(done) == {("A", "B", 0): (0.8, 0.0), ("C", "D", 1): (0.5, 0.0)}
    assert ("C", "D", 1) in net.asked


def test_transfer_times_three_flows_two_bottlenecks():
    # x 800: f1, f2; y 1600: f2, f3. f1 = f2 = 400, f3 = 1200 until f1 (320 bits)
    # ends at 0.8; then f2 = f3 = 800: f2's 320 left end at 1.2; f3's 160 left
    # then at 1600: 1.3
    net = FakeNet({("A", "D"): ["x"], ("B", "D"): ["x", "y"], ("C", "D"): ["y"]},
                  {"x": 800.0, "y": 1600.0})
    done = transfer_times(net, [("A", "D", 0, 320.0), ("B", "D", 0, 640.0),
                                ("C", "D", 0, 1440.0)])
    assert {k: round(t, 9) for k, (t, _) in done.items()} == \
        {("A", "D", 0): 0.8, ("B", "D", 0): 1.2, ("C", "D", 0): 1.3}


def test_step_seconds_adds_the_longest_latency_to_the_last_transfer():
    # X: 800 bits on a (800): 1 s, no delay; Y: 200 bits on b (800): 0.25 s, 0.3 delay
    net = FakeNet({("X", "Z"): ["a"], ("Y", "Z"): ["b"]}, {"a": 800.0, "b": 800.0},
                  {"b": 0.3})
    assert step_seconds(net, [("X", "Z", 0, 800.0), ("Y", "Z", 0, 200.0)]) == \
        pytest.approx(1.3)


def test_stepwise_seconds_adds_steps_and_maps_ranks_channels_and_wire():
    # ranks 0, 1 are endpoints "A", "B"; channel 0 over p, 1 over q (800 bit/s each)
    net = FakeNet({("A", "B", 0): ["p"], ("A", "B", 1): ["q"], ("B", "A", 0): ["r"],
                   ("B", "A", 1): ["r"]}, {"p": 800.0, "q": 800.0, "r": 400.0},
                  {"p": 0.1, "q": 0.1, "r": 0.0})
    # step 0: A sends 2 messages of 5 elements (160 bits each) to B: with 2 channels
    # one on p and one on q: 0.2 s + 0.1; with 1 channel both on p: 0.4 + 0.1
    # step 1: B sends 5 elements to A over r: 160 / 400 = 0.4
    sched = {0: [send(1, 5, step=0, offset=0), send(1, 5, step=0, offset=5),
                 recv(1, 5, step=1, offset=10)],
             1: [recv(0, 5, step=0, offset=0), recv(0, 5, step=0, offset=5),
                 send(0, 5, step=1, offset=10)]}
    assert stepwise_seconds(net, ["A", "B"], sched, 2) == pytest.approx(0.3 + 0.4)
    assert stepwise_seconds(net, ["A", "B"], sched, 1) == pytest.approx(0.5 + 0.4)
    # wire factor 2 doubles the bits; hop latency 0.05 per (single-link) path
    assert stepwise_seconds(net, ["A", "B"], sched, 2, 2.0, 0.05) == \
        pytest.approx((0.4 + 0.15) + (0.8 + 0.05))


def test_stepwise_seconds_counts_a_repeated_step_each_time():
    net = FakeNet({("A", "B"): ["p"]}, {"p": 320.0})
    sched = {0: [send(1, 10, step=s, offset=10 * s) for s in range(3)],
             1: [recv(0, 10, step=s, offset=10 * s) for s in range(3)]}
    assert stepwise_seconds(net, ["A", "B"], sched) == pytest.approx(3.0)


# --- phases: ring and hierarchical AllReduce by structure ------------------------------------

def test_ring_phases_by_hand():
    assert allreduce_phases("ring", 4, 101) == [
        Phase("ring", 6, ((0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 0, 0)), 26, 4)]
    two = allreduce_phases("ring", 3, 30, channels=2)
    ring3 = lambda ch: ((0, 1, ch), (1, 2, ch), (2, 0, ch))
    assert two == [Phase("ring", 2, ring3(0), 10, 3), Phase("ring", 2, ring3(1), 10, 3)]
    # 6 steps over 4 channels: channels 0, 1 twice, 2, 3 once
    four = allreduce_phases("ring", 4, 40, channels=4)
    assert [(p.steps, p.transfers[0][2]) for p in four] == [(2, 0), (2, 1), (1, 2), (1, 3)]
    # more channels than steps: only as many as there are steps
    assert [p.steps for p in allreduce_phases("ring", 2, 8, channels=5)] == [1, 1]
    assert allreduce_phases("ring", 1, 8) == []
    assert allreduce_phases("hierarchical", 3, 9, local=1) == allreduce_phases("ring", 3, 9)


def test_hierarchical_phases_by_hand():
    # 2 servers of 2 GPUs, 2 channels, 100 elements: block 50
    out = allreduce_phases("hierarchical", 4, 100, local=2, channels=2)
    assert out == [
        Phase("intra-node reduce-scatter", 1, ((0, 1, 0), (1, 0, 0), (2, 3, 0), (3, 2, 0)), 50, 2),
        Phase("inter-node allreduce", 1, ((0, 2, 0), (2, 0, 0), (1, 3, 0), (3, 1, 0)), 25, 2),
        Phase("inter-node allreduce", 1, ((0, 2, 1), (2, 0, 1), (1, 3, 1), (3, 1, 1)), 25, 2),
        Phase("intra-node allgather", 1, ((0, 1, 1), (1, 0, 1), (2, 3, 1), (3, 2, 1)), 50, 2)]
    # 3 servers of 3: rings within servers, rails across; odd sizes round up
    out = allreduce_phases("hierarchical", 9, 100, local=3)
    rs, ar, ag = out
    assert (rs.name, rs.steps, rs.elements, rs.group) == ("intra-node reduce-scatter", 2, 34, 3)
    assert rs.transfers == tuple((a, b, 0) for a, b in
                                 [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3),
                                  (6, 7), (7, 8), (8, 6)])
    assert (ar.name, ar.steps, ar.elements, ar.group) == ("inter-node allreduce", 4, 12, 3)
    assert ar.transfers == tuple((a, b, 0) for a, b in
                                 [(0, 3), (3, 6), (6, 0), (1, 4), (4, 7), (7, 1),
                                  (2, 5), (5, 8), (8, 2)])
    assert ag == Phase("intra-node allgather", 2, rs.transfers, 34, 3)
    # one server: no inter-node phase
    assert [p.name for p in allreduce_phases("hierarchical", 2, 8, local=2)] == \
        ["intra-node reduce-scatter", "intra-node allgather"]


def test_phases_refuse_unknown_algorithms_and_partial_servers():
    with pytest.raises(ValueError, match="not 'tree'"):
        allreduce_phases("tree", 4, 8)
    with pytest.raises(ValueError, match="6 ranks are not whole servers of 4 GPUs"):
        allreduce_phases("hierarchical", 6, 8, local=4)


def test_ring_seconds_slowest_edge_or_round_trip_per_hop():
    ring = ((0, 1, 0), (1, 0, 0))
    ph = Phase("p", 3, ring, 1, 2)
    # serial 1 and 2, lat 0.5 and 0.1: period max(2, 3.6 / 2) = 2; last 2.1
    assert ring_seconds([(ph, {(0, 1, 0): (1.0, 0.5), (1, 0, 0): (2.0, 0.1)})]) == \
        pytest.approx(2 * 2 + 2.1)
    # latency-bound: period max(1, 8 / 2) = 4; last 4
    assert ring_seconds([(ph, {(0, 1, 0): (1.0, 3.0), (1, 0, 0): (1.0, 3.0)})]) == \
        pytest.approx(2 * 4 + 4)


def test_ring_seconds_weights_channels_by_their_steps_and_takes_the_slowest_ring():
    ch0, ch1 = ((0, 1, 0), (1, 0, 0)), ((0, 1, 1), (1, 0, 1))
    part = [(Phase("p", 2, ch0, 1, 2), {t: (1.0, 0.3) for t in ch0}),
            (Phase("p", 1, ch1, 1, 2), {t: (4.0, 0.0) for t in ch1})]
    # serial 2/3 * 1 + 1/3 * 4 = 2, lat 0.2: period max(2, 2.2) = 2.2; last max(1.3, 4)
    assert ring_seconds(part) == pytest.approx(2 * 2.2 + 4.0)
    # two rings of 2 side by side: the second slower
    rings = ((0, 1, 0), (1, 0, 0), (2, 3, 0), (3, 2, 0))
    times = {(0, 1, 0): (1.0, 0.0), (1, 0, 0): (1.0, 0.0), (2, 3, 0): (3.0, 0.0),
             (3, 2, 0): (1.0, 1.0)}
    # ring 2: period max(3, (4 + 1) / 2) = 3, last max(3, 2) = 3: 4 steps -> 3 * 3 + 3
    assert ring_seconds([(Phase("p", 4, rings, 1, 2), times)]) == pytest.approx(12.0)
    times[(2, 3, 0)] = (0.5, 0.0)
    # now ring 1: period 1, last 1 -> 4; ring 2: period max(1, 2.5 / 2), last 2 -> 5.75
    assert ring_seconds([(Phase("p", 4, rings, 1, 2), times)]) == pytest.approx(5.75)


def ring3_net():
    # edges of a 3-ring: 0->1 and 1->2 at 800 bit/s, 2->0 at 400 with 0.3 s delay
    return FakeNet({(0, 1): ["e01"], (1, 2): ["e12"], (2, 0): ["e20"]},
                   {"e01": 800.0, "e12": 800.0, "e20": 400.0}, {"e20": 0.3})


def test_phase_seconds_prices_a_step_and_pipelines_the_ring():
    # 3 ranks, 30 elements: 4 steps of 10 elements = 320 bits: 0.4, 0.4, 0.8 s.
    # period max(0.8, 1.9 / 3) = 0.8; last 0.8 + 0.3: 3 * 0.8 + 1.1
    assert phase_seconds(ring3_net(), allreduce_phases("ring", 3, 30)) == \
        pytest.approx(3.5)
    # channels: the same ring on 2 channels is one part of 4 steps
    assert phase_seconds(ring3_net(), allreduce_phases("ring", 3, 30, channels=2)) == \
        pytest.approx(3.5)
    # wire factor 2: 0.8, 0.8, 1.6; hop latency 0.1: lat 0.1, 0.1, 0.4
    # period max(1.6, (3.2 + 0.6) / 3) = 1.6; last 2.0: 3 * 1.6 + 2.0
    assert phase_seconds(ring3_net(), allreduce_phases("ring", 3, 30), 2.0, 0.1) == \
        pytest.approx(6.8)


def test_phase_seconds_adds_the_hierarchical_parts():
    # 2 servers of 2 GPUs, all links 800 bit/s, no latency; count 40: block 20
    # (640 bits: 0.8 s), inter-node 10 elements (0.4 s). RS 1 step, AR 2 steps,
    # AG 1 step: 0.8 + 2 * 0.4 + 0.8
    routes = {(a, b): [f"e{a}{b}"] for a in range(4) for b in range(4) if a != b}
    net = FakeNet(routes, {f"e{a}{b}": 800.0 for a, b in routes})
    assert phase_seconds(net, allreduce_phases("hierarchical", 4, 40, local=2)) == \
        pytest.approx(2.4)


# --- clos: counts and paths from the shape alone ---------------------------------------------

def test_clos_counts_by_hand():
    s = ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8)
    # 32 NICs, 8 a leaf: 4 leaves; 4 * 4 uplinks over 8 ports: 2 spines
    assert (s.n, s.leaves, s.spines, s.pod_leaves, s.pods, s.group_cores) == (32, 4, 2, 4, 1, 1)
    assert [s.leaf_of(0, 3), s.leaf_of(1, 3), s.leaf_of(2, 0), s.leaf_of(7, 3)] == [0, 0, 1, 3]
    # the spines are at most the uplinks of a leaf
    assert ClosShape(servers=64, gpus=1, nics=1, down=4, up=4, radix=8).spines == 4
    assert ClosShape(servers=64, gpus=1, nics=1, down=4, up=3, radix=8).spines == 3
    assert ClosShape(servers=2, gpus=1, nics=1, down=2, up=4).spines == 1
    # 3 tiers: 16 leaves in pods of 4 -> 4 pods; group j's 4 * 4 uplinks on 8-port cores: 2
    t = ClosShape(servers=64, gpus=1, nics=1, down=4, up=4, tiers=3, radix=8)
    assert (t.leaves, t.pod_leaves, t.pods, t.group_cores) == (16, 4, 4, 2)
    t = ClosShape(servers=64, gpus=1, nics=1, down=4, up=4, tiers=3, radix=16)
    assert (t.pod_leaves, t.pods, t.group_cores) == (8, 2, 1)
    # an odd count rounds the leaves up
    assert ClosShape(servers=9, gpus=1, nics=1, down=4, up=1).leaves == 3


def test_clos_rail_wiring_counts_and_leaves():
    r = ClosShape(servers=8, gpus=4, nics=4, down=4, up=2, wiring="rail")
    # 2 units of 4 servers, a leaf per NIC per unit: 8 leaves
    assert r.leaves == 8
    assert [r.leaf_of(0, 2), r.leaf_of(3, 2), r.leaf_of(4, 2), r.leaf_of(5, 0)] == [2, 2, 6, 4]
    assert ClosShape(servers=9, gpus=2, nics=2, down=4, up=1, wiring="rail").leaves == 6
    s = ClosShape(servers=8, gpus=4, nics=4, down=4, up=2)
    assert s.leaves == 8 and [s.leaf_of(0, 2), s.leaf_of(3, 2), s.leaf_of(4, 2)] == [0, 3, 4]


@pytest.mark.parametrize("keys", [dict(tiers=1), dict(tiers=4), dict(wiring="mesh")])
def test_clos_refuses_other_tiers_or_wirings(keys):
    base = dict(servers=2, gpus=1, nics=1, down=2, up=1)
    with pytest.raises(ValueError, match=r"^tiers must be 2 or 3 and wiring one of \('server', 'rail'\)$"):
        ClosShape(**{**base, **keys})


@pytest.mark.parametrize("keys", [dict(servers=0), dict(gpus=0, nics=0), dict(nics=0),
                                  dict(down=0), dict(up=0), dict(gpus=2, nics=3)])
def test_clos_refuses_empty_counts_and_more_nics_than_gpus(keys):
    base = dict(servers=2, gpus=2, nics=1, down=2, up=1)
    with pytest.raises(ValueError,
                       match="^servers, gpus, nics, down and up must be at least 1, nics <= gpus$"):
        ClosShape(**{**base, **keys})


def test_clos_accepts_the_smallest_shape_and_nics_equal_to_gpus():
    s = ClosShape(servers=1, gpus=1, nics=1, down=1, up=1, tiers=3)
    assert s.n == 1
    assert ClosShape(servers=1, gpus=3, nics=3, down=1, up=1).nics == 3


def test_clos_rates_by_link_class_and_no_listing():
    s = ClosShape(servers=2, gpus=2, nics=1, down=2, up=1, nic_bps=1e9, fabric_bps=2e9,
                  intra_bps=5e9)
    links = ClosNetwork(s).links
    assert links[("nv", "up", 0)].rate_bps == 5e9
    assert links[("pcie", "down", 1)].rate_bps == 5e9
    assert links[("nic", "up", 0, 0)].rate_bps == 1e9
    assert links[("leaf-up", 0, 0)].rate_bps == 2e9
    assert links[("core-down", 0, 0, 0)].rate_bps == 2e9
    with pytest.raises(TypeError, match="^a Clos shape's links are not listed, only looked up$"):
        iter(links)
    with pytest.raises(TypeError, match="^a Clos shape's links are not counted$"):
        len(links)


def test_clos_paths_inside_a_server_and_through_pcie_and_one_leaf():
    s = ClosShape(servers=4, gpus=4, nics=2, down=8, up=2)
    net = ClosNetwork(s)
    assert net.path(1, 2) == [(("nv", "up", 1), 0.0), (("nv", "down", 2), 0.0)]
    # GPU 1 (server 0, NIC 1) to GPU 6 (server 1, GPU 2 -> NIC 0): same leaf (8 ports)
    assert [h.intf for h in net.path(1, 6)] == [("pcie", "up", 1), ("nic", "up", 0, 1),
                                                ("nic", "down", 1, 0), ("pcie", "down", 6)]
    assert all(h.delay_s == 0.0 for h in net.path(1, 6))
    full = ClosNetwork(ClosShape(servers=4, gpus=2, nics=2, down=8, up=2))
    assert [h.intf for h in full.path(1, 2)] == [("nic", "up", 0, 1), ("nic", "down", 1, 0)]


def test_clos_two_tier_ecmp_reaches_every_equal_cost_path():
    # 4 leaves, 4 uplinks each, 2 spines: uplink j goes to spine j mod 2, and the
    # spine reaches the far leaf over its uplinks k = j mod 2 (+2)
    s = ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8)
    net = ClosNetwork(s, seed=3)
    seen = set()
    for f in range(64):
        p = [h.intf for h in net.path(0, 8, f)]
        assert p[0] == ("nic", "up", 0, 0) and p[-1] == ("nic", "down", 2, 0)
        (kind_up, la, j), (kind_down, lb, k) = p[1], p[2]
        assert (kind_up, la, kind_down, lb) == ("leaf-up", 0, "spine-down", 1)
        seen.add((j, k))
    assert seen == {(j, k) for j in range(4) for k in range(4) if j % 2 == k % 2}


def test_clos_two_uplinks_are_both_used():
    net = ClosNetwork(ClosShape(servers=4, gpus=1, nics=1, down=2, up=2, radix=4))
    # 2 leaves, spines = min(2, ceil(2 * 2 / 4)) = 1: both uplinks to it, both back
    seen = {tuple(h.intf for h in net.path(0, 2, f))[1:3] for f in range(256)}
    assert seen == {(("leaf-up", 0, j), ("spine-down", 1, k)) for j in (0, 1) for k in (0, 1)}


def test_clos_three_tier_paths_within_and_across_pods():
    s = ClosShape(servers=64, gpus=1, nics=1, down=4, up=4, tiers=3, radix=8)
    net = ClosNetwork(s, seed=1)
    within, across = set(), set()
    for f in range(128):
        p = [h.intf for h in net.path(0, 4, f)]       # leaf 0 to leaf 1, pod 0
        assert p[0] == ("nic", "up", 0, 0) and p[-1] == ("nic", "down", 4, 0)
        (_, la, j), (_, lb, j2) = p[1], p[2]
        assert (p[1][0], p[2][0], la, lb) == ("leaf-up", "agg-down", 0, 1) and j == j2
        within.add(j)
        q = [h.intf for h in net.path(0, 20, f)]      # leaf 0 (pod 0) to leaf 5 (pod 1)
        assert [h[0] for h in q] == ["nic", "leaf-up", "agg-up", "core-down", "agg-down", "nic"]
        (_, _, j), (_, pa, ja, c), (_, pb, jb, k), (_, lb, jd) = q[1:5]
        assert (pa, pb, lb) == (0, 1, 5) and j == ja == jb == jd
        across.add((j, c, k))
    assert within == {0, 1, 2, 3}
    # 2 cores per group: uplink c reaches core c mod 2, whose links k = c mod 2 (+2);
    # every uplink and every core link is drawn (not every combination: the
    # per-switch hashes of one flow are correlated, see the report)
    assert across <= {(j, c, k) for j in range(4) for c in range(4) for k in range(4)
                      if c % 2 == k % 2}
    assert {x[0] for x in across} == {x[1] for x in across} == {x[2] for x in across} == \
        {0, 1, 2, 3}


def test_clos_seed_repeats_and_reseed_draws_again():
    s = ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8)
    a, b = ClosNetwork(s, seed=1), ClosNetwork(s, seed=1)
    draw = lambda n: [tuple(n.path(0, 8, f)) for f in range(16)]
    assert draw(a) == draw(b)
    b.reseed(2)
    assert b.seed == 2 and draw(b) != draw(a)
    assert draw(b) == draw(ClosNetwork(s, seed=2))


# --- defaults, channels beyond two, and the garbage collector ------------------------------

def three_channels():
    # channel 0 over p (800 bit/s), 1 over q (400), 2 over r (1600)
    return FakeNet({("A", "B", 0): ["p"], ("A", "B", 1): ["q"], ("A", "B", 2): ["r"]},
                   {"p": 800.0, "q": 400.0, "r": 1600.0})


def test_three_channels_take_messages_in_turn_in_every_model():
    # messages of 10, 5, 20 elements (320, 160, 640 bits) on channels 0, 1, 2: 0.4 s each
    # (another order would put 640 bits on q: 1.6 s)
    sched = {0: [send(1, 10, offset=0), send(1, 5, offset=10), send(1, 20, offset=15)],
             1: [recv(0, 10, offset=0), recv(0, 5, offset=10), recv(0, 20, offset=15)]}
    assert stepwise_seconds(three_channels(), ["A", "B"], sched, 3) == pytest.approx(0.4)
    out = Replay(three_channels(), ["A", "B"], sched, 3).run()
    assert out.seconds == pytest.approx(0.4)
    assert out.link_bytes == pytest.approx({"p": 40.0, "q": 20.0, "r": 80.0})
    # a fourth message goes on channel 0 again, behind the first
    sched[0].append(send(1, 1, offset=35))
    sched[1].append(recv(0, 1, offset=35))
    r = Replay(three_channels(), ["A", "B"], sched, 3)
    assert r.sent_bytes() == pytest.approx({("A", "B", 0): 44.0, ("A", "B", 1): 20.0,
                                            ("A", "B", 2): 80.0})
    assert r.run().link_bytes == pytest.approx({"p": 44.0, "q": 20.0, "r": 80.0})


def test_defaults_are_flow_0_seed_0_one_channel_plain_wire_no_hop_latency():
    f = leaf_spine(2, 2, 2, parallel=2, rate=8)
    # a seed where flows 0 and 1 of h1 -> h3 cross different spines
    seed = next(s for s in range(32)
                if hops(Network(f, s), "h1", "h3", 0)[2] != hops(Network(f, s), "h1", "h3", 1)[2])
    net = Network(f, seed)
    assert hops(net, "h1", "h3") == hops(net, "h1", "h3", 0)
    assert net.decisions("h1", "h3")[1][0] == hops(net, "h1", "h3", 0)[2].split("-")[0]
    plain = Network(f)
    assert [hops(plain, "h1", "h3", k) for k in range(8)] == \
        [hops(Network(f, 0), "h1", "h3", k) for k in range(8)]
    # Clos: flow 0 and seed 0 by default
    s = ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8)
    c = ClosNetwork(s)
    assert c.seed == 0
    first = next(k for k in range(1, 32) if c.path(0, 8, k) != c.path(0, 8, 0))
    assert c.path(0, 8) == c.path(0, 8, 0) != c.path(0, 8, first)
    assert ClosNetwork(s).path(0, 8, 5) == ClosNetwork(s, 0).path(0, 8, 5)
    # steps: one channel, plain wire, no hop latency unless told
    net = FakeNet({("A", "B", 0): ["p"], ("A", "B", 1): ["q"]}, {"p": 800.0, "q": 800.0},
                  {"p": 0.1, "q": 0.1})
    sched = {0: [send(1, 5, offset=0), send(1, 5, offset=5)],
             1: [recv(0, 5, offset=0), recv(0, 5, offset=5)]}
    assert stepwise_seconds(net, ["A", "B"], sched) == pytest.approx(0.4 + 0.1)


@pytest.mark.parametrize("enabled", [True, False])
def test_replay_leaves_the_garbage_collector_as_it_found_it(enabled):
    import gc
    net = FakeNet({("A", "B"): ["a"]}, {"a": 800.0})
    sched = {0: [send(1, 10)], 1: [recv(0, 10)]}
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        r = Replay(net, ["A", "B"], sched)
        assert gc.isenabled() == enabled
        r.run()
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_replay_collects_nothing_while_it_runs():
    import gc
    seen = []

    class Probe(FakeNet):
        def path(self, src, dst, flow=0):
            seen.append(gc.isenabled())
            return super().path(src, dst, flow)

    probe = Probe({("A", "B"): ["a"]}, {"a": 800.0})
    Replay(probe, ["A", "B"], {0: [send(1, 10)], 1: [recv(0, 10)]}).run()
    assert seen == [False] and gc.isenabled()


def test_hierarchical_phases_default_to_one_gpu_a_server_and_number_the_allgathers_channels():
    assert allreduce_phases("hierarchical", 3, 9) == allreduce_phases("ring", 3, 9)
    # 3 channels, 2 GPUs a server: the allgather's one step is the 2nd message
    # to that peer (the reduce-scatter's was the 1st): channel 1
    out = allreduce_phases("hierarchical", 4, 40, local=2, channels=3)
    assert [(p.name, p.transfers[0][2]) for p in out] == [
        ("intra-node reduce-scatter", 0), ("inter-node allreduce", 0),
        ("inter-node allreduce", 1), ("intra-node allgather", 1)]
    # 3 GPUs a server, 3 channels: the allgather's 2 steps are messages 3 and 4: 2, 0
    out = allreduce_phases("hierarchical", 6, 60, local=3, channels=3)
    assert [(p.steps, p.transfers[0][2]) for p in out if p.name == "intra-node allgather"] \
        == [(1, 2), (1, 0)]


def test_ring_seconds_prices_each_ring_of_a_part_on_its_own_edges():
    # two rings of 2 edges; ring 1: serial 1, 1, latency 0 and 6: period max(1, 8 / 2) = 4,
    # last 7: 4 steps -> 3 * 4 + 7 = 19; ring 2 the same, mirrored. (Edges 2 and 3
    # taken as one ring would give 3 * 7 + 7 = 28.)
    rings = ((0, 1, 0), (1, 0, 0), (2, 3, 0), (3, 2, 0))
    times = {(0, 1, 0): (1.0, 0.0), (1, 0, 0): (1.0, 6.0), (2, 3, 0): (1.0, 6.0),
             (3, 2, 0): (1.0, 0.0)}
    assert ring_seconds([(Phase("p", 4, rings, 1, 2), times)]) == pytest.approx(19.0)


def test_network_a_routing_loop_is_reported_not_followed_forever():
    import dataclasses
    net = Network(leaf_spine(2, 2, 2, rate=8))
    h3 = net.endpoints["h3"].ip
    spine = net.plan["spine1"]
    # spine1 sends h3's traffic back down to leaf1, which sends it up to spine1 again
    back = next(p for (node, p), l in net.port_to.items() if node == "spine1" and l.dst == "leaf1")
    net.plan = dict(net.plan)
    net.plan["spine1"] = dataclasses.replace(spine, routes={**spine.routes, h3: ("output", back)})
    up = next(b for b in range(2)
              if net.port_to[("leaf1", net.plan["leaf1"].groups[net.plan["leaf1"].routes[h3][1]][b])].dst == "spine1")
    net.pin("leaf1", "h1", "h3", 0, up)
    with pytest.raises(RuntimeError, match=r"^no route from h1 to h3 \(a loop\?\)$"):
        net.path("h1", "h3")


def test_replay_a_newcomer_slows_only_its_own_links_users_and_keeps_the_rest():
    # X: R0 -> R3 over [x]; Y: R1 -> R3 over [x, y]; x, y 800 bit/s: X = Y = 400.
    # Z: R2 -> R3 over [y], starting at 0.4 once R4's 320 bits over w reached R2.
    # Then y holds Y and Z: 400 each, Y unchanged; Z's 320 bits take 0.8 s: 1.2.
    # X and Y (1280 bits each at 400 throughout) end at 3.2
    net = FakeNet({("R0", "R3"): ["x"], ("R1", "R3"): ["x", "y"], ("R2", "R3"): ["y"],
                   ("R4", "R2"): ["w"]}, {"x": 800.0, "y": 800.0, "w": 800.0})
    sched = {0: [send(3, 40)], 1: [send(3, 40)],
             2: [recv(4, 10, step=0), send(3, 10, step=1)],
             3: [recv(0, 40, step=0, offset=0), recv(1, 40, step=1, offset=40),
                 recv(2, 10, step=2, offset=80)],
             4: [send(2, 10)]}
    out = Replay(net, [f"R{i}" for i in range(5)], sched).run()
    ends = {e["step"]: e["end"] for e in out.busy if e["rank"] == 3}
    assert rounded(ends) == {0: 3.2, 1: 3.2, 2: 1.2}


def test_replay_a_connection_on_a_link_another_used_before_runs_at_full_rate():
    # A -> C over c (320 bits, 0.4 s); B gets 640 bits from D over d (0.8 s), then
    # sends 320 bits to C over c, idle by then: 0.4 s at the full rate, 1.2
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"], ("D", "B"): ["d"]},
                  {"c": 800.0, "d": 800.0})
    sched = {0: [send(2, 10)],
             1: [recv(3, 20, step=0), send(2, 10, step=1)],
             2: [recv(0, 10, step=0, offset=0), recv(1, 10, step=1, offset=10)],
             3: [send(1, 20)]}
    out = Replay(net, ["A", "B", "C", "D"], sched).run()
    ends = {e["step"]: e["end"] for e in out.busy if e["rank"] == 2}
    assert rounded(ends) == {0: 0.4, 1: 1.2}
    assert out.link_bytes == pytest.approx({"c": 80.0, "d": 80.0})


def test_replay_settles_a_sub_bit_remainder_exactly_when_the_rate_changes():
    # X: A -> C, 320 bits alone on c at 800. B's piece over d (rate chosen so it
    # lands when X has 0.5 bit left) starts B -> C on c: X's half bit then goes at
    # 400: 0.00125 s more
    rate_d = 800.0 * 640 / 639
    t_b = 320 / rate_d                       # X has 320 - 800 t_b = 0.5 bit left
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"], ("D", "B"): ["d"]},
                  {"c": 800.0, "d": rate_d})
    sched = {0: [send(2, 10)],
             1: [recv(3, 10, step=0), send(2, 10, step=1)],
             2: [recv(0, 10, step=0, offset=0), recv(1, 10, step=1, offset=10)],
             3: [send(1, 10)]}
    out = Replay(net, ["A", "B", "C", "D"], sched).run()
    ends = {e["step"]: e["end"] for e in out.busy if e["rank"] == 2}
    assert ends[0] == pytest.approx(t_b + 0.5 / 400, rel=1e-9)
    # B: 400 until X is through, then 800: 0.5 bit of its 320 sent by then
    assert ends[1] == pytest.approx(t_b + 0.5 / 400 + (320 - 0.5) / 800, rel=1e-9)


def test_replay_three_connections_on_one_link_get_a_third_each():
    # A, B, D each send 320 bits to C over the one link c (800 bit/s): 266.7 each,
    # all through at 1.2
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"], ("D", "C"): ["c"]}, {"c": 800.0})
    sched = {0: [send(2, 10)], 1: [send(2, 10)], 3: [send(2, 10)],
             2: [recv(0, 10, step=0, offset=0), recv(1, 10, step=1, offset=10),
                 recv(3, 10, step=2, offset=20)]}
    out = Replay(net, ["A", "B", "C", "D"], sched).run()
    assert rounded({e["step"]: e["end"] for e in out.busy if e["rank"] == 2}) == \
        {0: 1.2, 1: 1.2, 2: 1.2}


def test_replay_two_channels_two_peers_each_channel_one_connection():
    # A sends 4 messages to B and 4 to C, alternating channels; every (peer,
    # channel) has its own link at 800 bit/s: a channel's 2 pieces go one after
    # another (0.4, 0.8), never side by side
    routes = {("A", p, ch): [f"{p}{ch}"] for p in "BC" for ch in (0, 1)}
    net = FakeNet(routes, {name: 800.0 for name in ("B0", "B1", "C0", "C1")})
    sched = {0: [send(1, 10, step=s, offset=10 * s) for s in range(4)] +
                [send(2, 10, step=s, offset=10 * s) for s in range(4)],
             1: [recv(0, 10, step=s, offset=10 * s) for s in range(4)],
             2: [recv(0, 10, step=s, offset=10 * s) for s in range(4)]}
    out = Replay(net, ["A", "B", "C"], sched, channels=2).run()
    for rank in (1, 2):
        assert rounded({e["step"]: e["end"] for e in out.busy if e["rank"] == rank}) == \
            {0: 0.4, 1: 0.4, 2: 0.8, 3: 0.8}
    assert out.link_bytes == pytest.approx({n: 80.0 for n in ("B0", "B1", "C0", "C1")})


def test_replay_a_slow_link_below_one_bit_per_second_still_delivers():
    # 1 element = 32 bits at 0.5 bit/s: 64 s
    net = FakeNet({("A", "B"): ["a"]}, {"a": 0.5})
    out = Replay(net, ["A", "B"], {0: [send(1, 1)], 1: [recv(0, 1)]}).run()
    assert out.seconds == pytest.approx(64.0)


def test_replay_an_op_waiting_for_two_does_not_hold_up_one_waiting_for_one():
    # R: op 0 receives 20 elements from X (over x, 0.8 s); op 1 overwrites the first
    # 10 with Y's (over y at 200 bit/s: 1.6 s); op 2 sends the last 10 to Z (waits
    # for op 0 only: starts at 0.8, over z: 1.2); op 3 sends all 20 to W (waits for
    # ops 0 and 1: starts at 1.6, over w: 2.4)
    net = FakeNet({("X", "R"): ["x"], ("Y", "R"): ["y"], ("R", "Z"): ["z"],
                   ("R", "W"): ["w"]}, {"x": 800.0, "y": 200.0, "z": 800.0, "w": 800.0})
    sched = {0: [recv(1, 20, step=0, offset=0), recv(2, 10, step=1, offset=0),
                 send(3, 10, step=2, offset=10), send(4, 20, step=3, offset=0)],
             1: [send(0, 20)], 2: [send(0, 10)],
             3: [recv(0, 10, step=2, offset=10)], 4: [recv(0, 20, step=3)]}
    out = Replay(net, ["R", "X", "Y", "Z", "W"], sched).run()
    spans = rounded({(e["rank"], e["step"]): (e["start"], e["end"]) for e in out.busy})
    assert spans[(0, 0)] == (0.0, 0.8)
    assert spans[(0, 1)] == (0.8, 1.6)
    assert spans[(0, 2)] == (0.8, 0.8)
    assert spans[(0, 3)] == (1.6, 1.6)
    assert spans[(3, 2)] == (0.0, 1.2)
    assert spans[(4, 3)] == (0.0, 2.4)


def test_replay_a_send_that_frees_a_region_lets_the_receive_behind_it_in():
    # R: op 0 receives 20 from X (0.8 s); ops 1 and 2 send its halves to Z and W;
    # op 3 receives V's 10 into the first half, after op 1 read it (V's piece is
    # there at 0.4). All of op 0's dependents run at 0.8
    net = FakeNet({("X", "R"): ["x"], ("R", "Z"): ["z"], ("R", "W"): ["w"],
                   ("V", "R"): ["v"]}, {"x": 800.0, "z": 800.0, "w": 800.0, "v": 800.0})
    sched = {0: [recv(1, 20, step=0, offset=0), send(2, 10, step=1, offset=0),
                 send(3, 10, step=2, offset=10), recv(4, 10, step=3, offset=0)],
             1: [send(0, 20)], 2: [recv(0, 10, step=1)], 3: [recv(0, 10, step=2)],
             4: [send(0, 10)]}
    out = Replay(net, ["R", "X", "Z", "W", "V"], sched).run()
    spans = rounded({(e["rank"], e["step"]): (e["start"], e["end"]) for e in out.busy})
    assert spans[(0, 1)] == spans[(0, 2)] == spans[(0, 3)] == (0.8, 0.8)
    assert spans[(2, 1)] == spans[(3, 2)] == (0.0, 1.2)
    assert out.seconds == pytest.approx(1.2)


def test_replay_a_piece_after_a_speed_up_waits_for_its_own_finish():
    # X: A -> C, 3 pieces of 320 bits over c (800); Y: B -> C, 480 bits over c.
    # Both at 400: X's piece 1 through at 0.8 (Y has 160 left); piece 2 at 400 until
    # Y is through at 1.2 (piece 2 has 160 left), then 800: 1.4; piece 3: 1.8
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"]}, {"c": 800.0})
    sched = {0: [send(2, 10, step=s, offset=10 * s) for s in range(3)],
             1: [send(2, 15, step=3, offset=30)],
             2: [recv(0, 10, step=s, offset=10 * s) for s in range(3)] +
                [recv(1, 15, step=3, offset=30)]}
    out = Replay(net, ["A", "B", "C"], sched).run()
    assert rounded({e["step"]: e["end"] for e in out.busy if e["rank"] == 2}) == \
        {0: 0.8, 1: 1.4, 2: 1.8, 3: 1.2}


def test_replay_pieces_of_no_bytes_arrive_with_the_piece_before_them():
    # A -> B: 10 elements, then an empty message, then 10 more; latency 0.1
    net = FakeNet({("A", "B"): ["a"]}, {"a": 800.0}, {"a": 0.1})
    sched = {0: [send(1, 10, step=0, offset=0), send(1, 0, step=1, offset=10),
                 send(1, 10, step=2, offset=10)],
             1: [recv(0, 10, step=0, offset=0), recv(0, 0, step=1, offset=10),
                 recv(0, 10, step=2, offset=10)]}
    out = Replay(net, ["A", "B"], sched).run()
    assert rounded({e["step"]: e["end"] for e in out.busy if e["rank"] == 1}) == \
        {0: 0.5, 1: 0.5, 2: 0.9}


def test_replay_shared_links_slower_than_a_bit_per_second_still_deliver_and_dead_ones_stall():
    # two connections share a 1 bit/s link: 0.5 each, 32 bits each: 64 s
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"]}, {"c": 1.0})
    sched = {0: [send(2, 1)], 1: [send(2, 1)],
             2: [recv(0, 1, step=0, offset=0), recv(1, 1, step=1, offset=1)]}
    assert Replay(net, ["A", "B", "C"], sched).run().seconds == pytest.approx(64.0)
    dead = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"]}, {"c": 0.0})
    with pytest.raises(RuntimeError, match="stalled with 2 operations never done"):
        Replay(dead, ["A", "B", "C"], sched).run()


def test_clos_a_single_uplink_is_uplink_0_both_ways():
    # 2 leaves of 2 ports, 1 uplink each, 1 spine: no choice anywhere
    net = ClosNetwork(ClosShape(servers=4, gpus=1, nics=1, down=2, up=1))
    assert {tuple(h.intf for h in net.path(0, 2, f)) for f in range(8)} == {
        (("nic", "up", 0, 0), ("leaf-up", 0, 0), ("spine-down", 1, 0), ("nic", "down", 2, 0))}
    # 4 uplinks to 4 spines (2 leaves x 4 uplinks on 2-port spines): the spine
    # reaches the far leaf over its one link
    wide = ClosNetwork(ClosShape(servers=4, gpus=1, nics=1, down=2, up=4, radix=2))
    assert wide.shape.spines == 4
    for f in range(16):
        _, (_, _, j), (_, _, k), _ = [h.intf for h in wide.path(0, 2, f)]
        assert j == k


def test_clos_the_draw_depends_on_source_destination_and_flow():
    s = ClosShape(servers=8, gpus=4, nics=4, down=8, up=4, radix=8)
    net = ClosNetwork(s, seed=3)
    p = lambda a, b, f: [h.intf for h in net.path(a, b, f)]
    # GPUs 0 and 1 share leaf 0; GPUs 8 and 9 share leaf 1
    assert any(p(0, 8, f)[1] != p(1, 8, f)[1] for f in range(16))
    assert any(p(0, 8, f)[1] != p(0, 9, f)[1] for f in range(16))
    assert any(p(0, 8, f)[1] == p(0, 9, f)[1] and p(0, 8, f)[2][2] != p(0, 9, f)[2][2]
               for f in range(64))
    t = ClosShape(servers=64, gpus=1, nics=1, down=4, up=4, tiers=3, radix=8)
    net = ClosNetwork(t, seed=1)
    for (a, b), (x, y) in [((0, 20), (1, 20)), ((0, 20), (0, 21))]:
        assert any(p(a, b, f)[1] != p(x, y, f)[1] for f in range(32))
        assert any(p(a, b, f)[1] == p(x, y, f)[1] and p(a, b, f)[2] != p(x, y, f)[2]
                   for f in range(256))
    assert any(p(0, 20, f)[2] == p(0, 21, f)[2] and p(0, 20, f)[3][3] != p(0, 21, f)[3][3]
               for f in range(256))
    # the same leaf and aggregation uplinks, another core link: the flow decides
    ways = {}
    for f in range(256):
        q = p(0, 20, f)
        ways.setdefault((q[1], q[2]), set()).add(q[3])
    assert any(len(v) > 1 for v in ways.values())


def test_network_decisions_on_a_fresh_network_walk_that_flow():
    f = leaf_spine(2, 2, 2, parallel=2, rate=8)
    net = Network(f, seed=4)
    d = net.decisions("h1", "h3", 5)
    assert d[0] == ("leaf1", 4) and d[1][1] == 2
    assert d[1][0] == net.links[hops(net, "h1", "h3", 5)[1]].dst


def test_fairness_below_one_unit_of_capacity():
    # a 0.2: f1, f2 -> 0.1 each; b 0.9: f2, f3 -> f3 gets the 0.8 left
    rates = max_min_rates({"f1": ["a"], "f2": ["a", "b"], "f3": ["b"]}, {"a": 0.2, "b": 0.9})
    assert rates == pytest.approx({"f1": 0.1, "f2": 0.1, "f3": 0.8}, rel=1e-9)
    rates = max_min_rates({"f1": ["c"], "f2": ["c"], "f3": ["c", "d"], "f4": ["d", "e"],
                           "f5": ["e"]}, {"c": 0.03, "d": 0.07, "e": 0.2})
    assert rates == pytest.approx({"f1": 0.01, "f2": 0.01, "f3": 0.01, "f4": 0.06,
                                   "f5": 0.14}, rel=1e-9)


def test_clos_three_tier_pods_are_whole_multiples_of_their_leaves():
    # radix 8: pods of 4 leaves. Leaf 1 (GPU 4) to leaf 2 (GPU 8): one pod, no core;
    # leaf 3 (GPU 12) to leaf 4 (GPU 16): pods 0 and 1
    net = ClosNetwork(ClosShape(servers=64, gpus=1, nics=1, down=4, up=4, tiers=3, radix=8))
    for f in range(8):
        inside = [h.intf for h in net.path(4, 8, f)]
        assert [h[0] for h in inside] == ["nic", "leaf-up", "agg-down", "nic"]
        assert inside[1][1] == 1 and inside[2][1] == 2
        across = [h.intf for h in net.path(12, 16, f)]
        assert [h[0] for h in across] == ["nic", "leaf-up", "agg-up", "core-down", "agg-down",
                                          "nic"]
        assert across[2][1] == 0 and across[3][1] == 1 and across[4][1] == 4


def test_replay_a_connection_moving_again_ignores_the_finish_it_was_once_given():
    # X (A -> C over c, 800 bit/s) and Y (B -> C over c) start together at 400 each.
    # Y's 96 bits are through at 0.24; X's 320 had 224 left, at 800: through at 0.52
    # (it was first expected at 0.8). A then gets D's 480 bits over d at 0.6 and
    # forwards them to C on X: 0.6 s more, through at 1.2 (not at 0.8)
    net = FakeNet({("A", "C"): ["c"], ("B", "C"): ["c"], ("D", "A"): ["d"]},
                  {"c": 800.0, "d": 800.0})
    sched = {0: [send(2, 10, step=0, offset=0), recv(3, 15, step=1, offset=10),
                 send(2, 15, step=2, offset=10)],
             1: [send(2, 3, step=1)],
             2: [recv(0, 10, step=0, offset=0), recv(1, 3, step=1, offset=10),
                 recv(0, 15, step=2, offset=13)],
             3: [send(0, 15, step=1)]}
    out = Replay(net, ["A", "B", "C", "D"], sched).run()
    assert rounded({e["step"]: e["end"] for e in out.busy if e["rank"] == 2}) == \
        {0: 0.52, 1: 0.24, 2: 1.2}


def test_replay_730_connections_on_one_link_keep_it_busy_to_the_last_bit():
    # 730 senders of 1, 2, ..., 730 elements share the receiver's link (3200 bit/s):
    # the link is never idle, so the last bit is through at total bits / rate; the
    # smallest is through when 730 shares of 32 bits have gone: 730 * 32 / 3200.
    # (The rates of some 266,000 connection-groups are met on the way.)
    n = 730
    routes = {(f"S{i}", "C"): ["c"] for i in range(n)}
    net = FakeNet(routes, {"c": 3200.0})
    sched = {i: [send(n, i + 1)] for i in range(n)}
    sched[n] = [recv(i, i + 1, step=i, offset=i * (i + 1) // 2) for i in range(n)]
    out = Replay(net, [f"S{i}" for i in range(n)] + ["C"], sched).run()
    assert out.seconds == pytest.approx(32 * n * (n + 1) / 2 / 3200, rel=1e-9)
    ends = {e["step"]: e["end"] for e in out.busy if e["rank"] == n}
    assert ends[0] == pytest.approx(n * 32 / 3200, rel=1e-9)
