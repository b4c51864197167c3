"""Laws of max-min fair sharing (sim/fairness.py), checked on
random flows over random links: no link carries more than its capacity,
rates are never negative, every flow is held back by a full link on which
no other flow goes faster (that is what max-min fair means), a flow alone
gets exactly its narrowest link, a flow crossing no link is unlimited, and
more capacity never lowers the smallest rate."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.fairness import max_min_rates

FAST = settings(max_examples=150, deadline=None)
REL = 1e-9


@st.composite
def networks(draw, max_links=6, max_flows=8):
    """Links with capacities (a few repeated values, so ties happen) and
    flows each crossing a non-empty set of them, a link named twice at times."""
    n_links = draw(st.integers(1, max_links))
    links = [f"l{i}" for i in range(n_links)]
    capacity = {link: draw(st.one_of(st.sampled_from([1.0, 2.0, 3.0, 10.0]),
                                     st.floats(0.01, 1000.0)))
                for link in links}
    n_flows = draw(st.integers(1, max_flows))
    flows = {}
    for f in range(n_flows):
        path = draw(st.lists(st.sampled_from(links), min_size=1, max_size=n_links + 1))
        flows[f] = path
    return flows, capacity


def loads(flows, capacity, rates):
    load = {link: 0.0 for link in capacity}
    for f, path in flows.items():
        for link in set(path):
            load[link] += rates[f]
    return load


@FAST
@given(networks())
def test_no_link_carries_more_than_its_capacity_and_no_rate_is_negative(net):
    flows, capacity = net
    rates = max_min_rates(flows, capacity)
    assert set(rates) == set(flows)
    assert all(0 <= r < math.inf for r in rates.values()), rates
    for link, load in loads(flows, capacity, rates).items():
        assert load <= capacity[link] * (1 + REL), (link, load, capacity[link], rates)


@FAST
@given(networks())
def test_every_flow_is_held_back_by_a_full_link_where_it_is_among_the_fastest(net):
    """Max-min fairness (Bertsekas and Gallager): every flow crosses a
    saturated link on which its rate is the largest. No flow could go
    faster without slowing one that is no faster than it."""
    flows, capacity = net
    rates = max_min_rates(flows, capacity)
    load = loads(flows, capacity, rates)
    for f, path in flows.items():
        bottlenecks = [
            link for link in set(path)
            if load[link] >= capacity[link] * (1 - REL)
            and all(rates[f] >= rates[g] * (1 - REL) for g, p in flows.items() if link in p)]
        assert bottlenecks, (f, path, rates, load)


@FAST
@given(st.lists(st.floats(0.01, 1e6), min_size=1, max_size=6))
def test_a_flow_alone_gets_exactly_its_narrowest_link(capacities):
    capacity = {f"l{i}": c for i, c in enumerate(capacities)}
    rates = max_min_rates({"f": list(capacity)}, capacity)
    assert rates == {"f": min(capacities)}


@FAST
@given(st.lists(st.floats(0.01, 1e6), min_size=2, max_size=6), st.integers(1, 5))
def test_flows_alone_on_separate_paths_each_get_their_own_narrowest_link(capacities, k):
    """k flows, each on its own links (no sharing): each gets the
    narrowest of its own, whatever the others have."""
    capacity = {f"f{f}-l{i}": c * (f + 1) for f in range(k) for i, c in enumerate(capacities)}
    flows = {f: [f"f{f}-l{i}" for i in range(len(capacities))] for f in range(k)}
    rates = max_min_rates(flows, capacity)
    assert rates == {f: min(capacities) * (f + 1) for f in range(k)}


def test_a_flow_that_crosses_no_link_is_unlimited():
    assert max_min_rates({"local": [], "f": ["a"]}, {"a": 5.0}) == {"local": math.inf, "f": 5.0}


@FAST
@given(networks(), st.data())
def test_more_capacity_never_lowers_the_smallest_rate(net, data):
    """The max-min allocation maximises the smallest rate over all feasible
    ones; more capacity only adds feasible allocations."""
    flows, capacity = net
    link = data.draw(st.sampled_from(sorted(capacity)))
    more = {**capacity, link: capacity[link] * data.draw(st.floats(1.0, 10.0))}
    before = min(max_min_rates(flows, capacity).values())
    after = min(max_min_rates(flows, more).values())
    assert after >= before * (1 - REL), (before, after)


@FAST
@given(networks(), st.floats(0.01, 100.0))
def test_scaling_every_capacity_scales_every_rate(net, factor):
    flows, capacity = net
    rates = max_min_rates(flows, capacity)
    scaled = max_min_rates(flows, {k: c * factor for k, c in capacity.items()})
    for f in flows:
        assert math.isclose(scaled[f], rates[f] * factor, rel_tol=1e-9), (f, rates, scaled)


@FAST
@given(st.integers(1, 12), st.floats(0.01, 1e6))
def test_k_flows_through_one_link_share_it_equally(k, capacity):
    rates = max_min_rates({f: ["a", f"own{f}"] for f in range(k)},
                          {"a": capacity, **{f"own{f}": capacity * 2 for f in range(k)}})
    assert all(math.isclose(r, capacity / k, rel_tol=1e-12) for r in rates.values())
