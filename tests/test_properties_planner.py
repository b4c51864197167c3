"""The planner's designs (planner/designs.py) count ports and cables that
add up, for any GPU count, radix, server shape and oversubscription: every
GPU reaches a NIC and every NIC a switch port; at each tier the ports a
switch uses down equal the ports it uses up times that tier's
oversubscription; no tier uses more ports than its switches have, nor has
a switch more than it needs; every cable has two ends; and a design fits
exactly when the endpoints are within its closed-form limit."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

import planner as P

FAST = settings(max_examples=200, deadline=None)


@st.composite
def clusters(draw):
    gpus = draw(st.one_of(st.integers(2, 5000), st.integers(2, P.MAX_GPUS)))
    radix = 2 * draw(st.one_of(st.integers(2, 64), st.integers(2, P.MAX_RADIX // 2)))
    per_server = draw(st.integers(1, 16))
    nics = draw(st.integers(1, per_server))
    over = draw(st.one_of(st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0, 7.0]),
                          st.floats(1.0, radix - 1.0)))
    return gpus, radix, per_server, nics, over


def designs(cluster):
    gpus, radix, per_server, nics, over = cluster
    result = P.plan(gpus, radix=radix, gpus_per_server=per_server, nics_per_server=nics,
                    oversubscription=over)
    return result, {d.name: d for d in result["designs"]}


@FAST
@given(clusters())
def test_every_gpu_reaches_a_nic_and_every_nic_a_port(cluster):
    gpus, radix, per_server, nics, _ = cluster
    result, by_name = designs(cluster)
    servers, E = result["servers"], result["endpoints"]
    assert servers * per_server >= gpus > (servers - 1) * per_server
    assert E == servers * nics
    for d in by_name.values():
        assert d.endpoints == E
    assert by_name["single-switch"].switch_ports == E
    assert by_name["full-mesh"].ports_per_endpoint == E - 1


@FAST
@given(clusters())
def test_every_cable_has_two_ends(cluster):
    """Ends on switches plus ends on endpoints is twice the cables, for
    every design (a full mesh has only endpoint ends)."""
    _, by_name = designs(cluster)
    for d in by_name.values():
        assert d.switch_ports + d.endpoints * d.ports_per_endpoint == 2 * d.cables, d.name
        assert d.switches == sum(d.switches_by_tier.values())
        if d.name != "single-switch" or d.fits:     # one switch too small: E > R ports
            assert d.switch_ports <= d.switches * cluster[1], d.name


@FAST
@given(clusters())
def test_a_leaf_splits_its_ports_down_and_up_by_the_oversubscription(cluster):
    """Clos leaves: d ports down and u = R - d up with d = floor(R o / (1 + o)),
    at least one each way; d = u x the reported oversubscription; just
    enough leaves for the endpoints; their up-ports are the cables above."""
    _, radix, _, _, over = cluster
    result, by_name = designs(cluster)
    E = result["endpoints"]
    for name in ("clos-2", "clos-3"):
        d = by_name[name]
        leaves = d.switches_by_tier["leaf"]
        down_per_leaf = max(1, min(radix - 1, math.floor(radix * over / (1 + over) + 1e-9)))
        up_per_leaf = radix - down_per_leaf
        assert math.isclose(down_per_leaf, up_per_leaf * d.oversubscription, rel_tol=1e-12)
        assert leaves * down_per_leaf >= E > (leaves - 1) * down_per_leaf
        fabric_cables = d.cables - E
        if name == "clos-2":
            assert fabric_cables == leaves * up_per_leaf
        else:
            assert fabric_cables - leaves * up_per_leaf == d.switches_by_tier["agg"] * (radix // 2)
        # a leaf uses E / leaves ports down on average and all u up: within its radix
        assert E + leaves * up_per_leaf <= leaves * radix


@FAST
@given(clusters())
def test_the_tiers_above_the_leaves_have_the_ports_they_use_and_no_spare_switch(cluster):
    """clos-2: spines hold every leaf up-link. clos-3: aggregation switches
    use R/2 ports down and R/2 up (1:1), cores hold every aggregation up-link.
    Each tier has the fewest switches that hold its ports."""
    _, radix, _, _, _ = cluster
    result, by_name = designs(cluster)
    E = result["endpoints"]
    two = by_name["clos-2"]
    leaf_up = two.cables - E
    spines = two.switches_by_tier["spine"]
    assert spines * radix >= leaf_up > (spines - 1) * radix
    assert two.switch_ports == E + 2 * leaf_up

    three = by_name["clos-3"]
    leaves, aggs, cores = (three.switches_by_tier[k] for k in ("leaf", "agg", "core"))
    assert leaves == two.switches_by_tier["leaf"]
    leaf_up = leaves * (radix - round(radix * three.oversubscription
                                      / (1 + three.oversubscription)))
    agg_down = agg_up = aggs * (radix // 2)
    assert agg_down >= leaf_up > agg_down - radix // 2
    assert three.cables == E + leaf_up + agg_up
    assert cores * radix >= agg_up > (cores - 1) * radix
    assert three.switch_ports == E + 2 * (leaf_up + agg_up)


@FAST
@given(clusters())
def test_a_design_fits_exactly_within_its_closed_form_limit(cluster):
    """full mesh: E - 1 <= R; one switch: E <= R; clos-2: R x d endpoints
    (every spine has a port per leaf); clos-3: R pods of R/2 leaves, R x R/2
    x d. Where it fits, the needed radix is no larger than the one given."""
    _, radix, _, _, _ = cluster
    result, by_name = designs(cluster)
    E = result["endpoints"]
    two, three = by_name["clos-2"], by_name["clos-3"]
    d = round(radix * two.oversubscription / (1 + two.oversubscription))
    limits = {"full-mesh": radix + 1, "single-switch": radix, "clos-2": radix * d,
              "clos-3": radix * (radix // 2) * d}
    for name, limit in limits.items():
        design = by_name[name]
        assert design.max_endpoints == limit, name
        assert design.fits == (E <= limit) == (design.reason == ""), name
        assert design.needed_radix % 2 == 0 and design.needed_radix >= P.MIN_RADIX
        if design.fits:
            assert design.needed_radix <= max(radix, P.MIN_RADIX), name
    if two.fits:
        assert two.switches_by_tier["leaf"] <= radix
        assert two.switches_by_tier["spine"] <= radix - d
    if three.fits:
        assert three.switches_by_tier["leaf"] <= radix * (radix // 2)


@FAST
@given(clusters())
def test_the_needed_radix_is_the_smallest_even_one_that_fits(cluster):
    gpus, _, per_server, nics, over = cluster
    result, by_name = designs(cluster)
    for name in ("clos-2", "clos-3"):
        needed = by_name[name].needed_radix
        if needed > P.MAX_RADIX:
            continue
        assert designs((gpus, needed, per_server, nics, over))[1][name].fits, (name, needed)
        if needed - 2 >= P.MIN_RADIX:
            below = designs((gpus, needed - 2, per_server, nics, over))[1][name]
            assert not below.fits, (name, needed)
