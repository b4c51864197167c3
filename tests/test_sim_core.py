"""Mutation-hardening tests for traffic/sim (fairness, network, replay, phases, steps, clos).

Expectations are computed by hand in the tests, never via the modules under test.
"""

import hashlib
import math
from typing import NamedTuple

import pytest

from tests.helpers import leaf_spine
from topologies.fabric import load_fabric, parse_fabric
from traffic import schedules as S
from traffic.sim.clos import ClosNetwork, ClosShape
from traffic.sim.fairness import max_min_rates
from traffic.sim.network import Network, sim_channels
from traffic.sim.phases import Phase, allreduce_phases, phase_seconds, ring_seconds
from traffic.sim.replay import Replay
from traffic.sim.steps import step_seconds, stepwise_seconds, transfer_times


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
    return S.Op("send", peer, offset, length, step=step)


def recv(peer, length, step=0, offset=0, reduce=False):
    return S.Op("recv", peer, offset, length, reduce=reduce, step=step)


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
