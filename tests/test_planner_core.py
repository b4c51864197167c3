"""Independent reference tests for the planner core (designs, costmodel, calibration's
fit, steptime, simulate, training, inputs).

Every expectation here is a closed form written in the test (2-tier Clos of
radix R holds R^2/2 endpoints, 3-tier R^3/4, ring AllReduce 2(n-1)a +
2(n-1)/n S b, ...), a number worked out by hand (the working is in the
comments), or the exact one-sentence refusal the planner prints. Nothing is
computed with the planner's own functions or constants."""

from types import SimpleNamespace

import pytest

import networks
from planner import calibration as CAL
from planner import costmodel as C
from planner import designs as D
from planner import inputs as I
from planner import steptime as ST
from planner import compute as TR
from planner.inputs import PlanError


def approx(expected, rel=1e-6):
    """pytest.approx without its absolute tolerance of 1e-12, which would swallow
    the differences between the tiny times (1e-10 s) compared here."""
    return pytest.approx(expected, rel=rel, abs=0)


def refused(fn, *args, message, **kw):
    with pytest.raises(PlanError) as e:
        fn(*args, **kw)
    assert str(e.value) == message
    return e.value


def by_name(result):
    return {d.name: d for d in result["designs"]}


# --------------------------------------------------------------------------
# designs.py: 16,384 GPUs, 8 a server, 8 NICs, radix 64, 400 Gbit/s, 1:1.
# E = 2,048 servers x 8 = 16,384 endpoints.

def test_16k_gpus_at_radix_64_by_hand():
    r = D.plan(16384)
    assert r["servers"] == 2048 and r["endpoints"] == 16384
    assert r["inputs"] == {"gpus": 16384, "radix": 64, "gpus_per_server": 8,
                           "nics_per_server": 8, "link_gbps": 400.0, "oversubscription": 1.0,
                           "gpu_flops": 2e15, "total_flops": 1e24, "utilisation": 1.0}
    assert r["training"]["gpus"] == 16384
    d = by_name(r)
    assert [x.name for x in r["designs"]] == ["full-mesh", "single-switch", "clos-2", "clos-3"]

    fm = d["full-mesh"]
    assert not fm.fits
    assert fm.reason == "each endpoint would need 16,383 ports; a port budget of 64 allows 64"
    assert fm.endpoints == 16384 and fm.switches == 0 and fm.switches_by_tier == {}
    assert fm.switch_ports == 0
    assert fm.cables == 16384 * 16383 // 2 == 134209536
    assert fm.ports_per_endpoint == 16383 and fm.max_hops == 0
    assert fm.bisection_gbps == 8192 * 8192 * 400.0
    assert fm.oversubscription == 1.0 and fm.max_endpoints == 65
    assert fm.needed_radix == 16384          # 16,383 ports, rounded up to even

    ss = d["single-switch"]
    assert not ss.fits
    assert ss.reason == "16,384 endpoints need a 16,384-port switch; the radix is 64"
    assert ss.switches == 1 and ss.switches_by_tier == {"switch": 1}
    assert ss.switch_ports == 16384 and ss.cables == 16384 and ss.ports_per_endpoint == 1
    assert ss.max_hops == 1 and ss.bisection_gbps == 8192 * 400.0
    assert ss.oversubscription == 1.0 and ss.max_endpoints == 64 and ss.needed_radix == 16384

    c2 = d["clos-2"]   # 32 down, 32 up: 512 leaves, 512*32/64 = 256 spines
    assert not c2.fits
    assert c2.switches_by_tier == {"leaf": 512, "spine": 256} and c2.switches == 768
    assert c2.cables == 16384 + 16384 and c2.switch_ports == 16384 + 2 * 16384
    assert c2.ports_per_endpoint == 1 and c2.max_hops == 3
    assert c2.bisection_gbps == 8192 * 400.0 and c2.oversubscription == 1.0
    assert c2.max_endpoints == 2048          # 64^2 / 2
    assert c2.needed_radix == 182            # 180*90 = 16,200 < 16,384 <= 182*91 = 16,562
    assert c2.reason == ("16,384 endpoints exceed the largest clos-2 at radix 64 and 1:1 "
                         "oversubscription (2,048 endpoints); it needs a higher radix (182) "
                         "or another tier")

    c3 = d["clos-3"]   # 512 leaves, 16,384/32 = 512 aggs, 512*32/64 = 256 cores
    assert c3.fits and c3.reason == ""
    assert c3.switches_by_tier == {"leaf": 512, "agg": 512, "core": 256}
    assert c3.switches == 1280
    assert c3.cables == 16384 + 16384 + 512 * 32 == 49152
    assert c3.switch_ports == 16384 + 2 * 32768 == 81920
    assert c3.max_hops == 5 and c3.bisection_gbps == 8192 * 400.0
    assert c3.max_endpoints == 65536         # 64^3 / 4
    assert c3.needed_radix == 42             # 40^3/4 = 16,000 < 16,384 <= 42*21*21 = 18,522
    assert c3.to_dict()["switches_by_tier"] == {"leaf": 512, "agg": 512, "core": 256}
    assert c3.to_dict()["name"] == "clos-3" and c3.to_dict()["needed_radix"] == 42


def test_small_cluster_fits_every_design():
    """16 GPUs, one a server and one NIC: E = 16 at radix 64."""
    r = D.plan(16, radix=64, gpus_per_server=1, nics_per_server=1, link_gbps=100.0)
    d = by_name(r)
    assert r["servers"] == 16 and r["endpoints"] == 16
    assert all(x.fits and x.reason == "" for x in r["designs"])
    assert d["full-mesh"].cables == 120 and d["full-mesh"].ports_per_endpoint == 15
    assert d["full-mesh"].bisection_gbps == 8 * 8 * 100.0
    assert d["full-mesh"].needed_radix == 16
    assert d["single-switch"].needed_radix == 16
    assert d["clos-2"].switches_by_tier == {"leaf": 1, "spine": 1}   # ceil(16/32), ceil(32/64)
    assert d["clos-2"].cables == 16 + 32 and d["clos-2"].switch_ports == 16 + 64
    assert d["clos-3"].switches_by_tier == {"leaf": 1, "agg": 1, "core": 1}
    assert d["clos-3"].cables == 16 + 32 + 32
    assert d["clos-2"].needed_radix == 6     # 4*2 = 8 < 16 <= 6*3 = 18
    assert d["clos-3"].needed_radix == 4     # 4*2*2 = 16


def test_odd_endpoint_full_mesh_bisection_and_fit_boundary():
    """E = 65 at radix 64: a full mesh fits (64 ports each), 32*33 links cut;
    E = 66 does not."""
    d = by_name(D.plan(65, radix=64, gpus_per_server=1, nics_per_server=1, link_gbps=1.0))
    assert d["full-mesh"].fits and d["full-mesh"].bisection_gbps == 32 * 33
    assert d["single-switch"].bisection_gbps == 32 and not d["single-switch"].fits
    assert d["single-switch"].reason == "65 endpoints need a 65-port switch; the radix is 64"
    d = by_name(D.plan(66, radix=64, gpus_per_server=1, nics_per_server=1))
    assert not d["full-mesh"].fits
    assert d["full-mesh"].reason == "each endpoint would need 65 ports; a port budget of 64 allows 64"
    d = by_name(D.plan(64, radix=64, gpus_per_server=1, nics_per_server=1))
    assert d["single-switch"].fits


def test_clos_fit_boundaries_from_both_sides():
    one = dict(radix=64, gpus_per_server=1, nics_per_server=1)
    assert by_name(D.plan(2048, **one))["clos-2"].fits
    assert not by_name(D.plan(2049, **one))["clos-2"].fits
    assert by_name(D.plan(65536, **one))["clos-3"].fits
    assert not by_name(D.plan(65537, **one))["clos-3"].fits


def test_servers_round_up_and_nics_make_endpoints():
    """17 GPUs, 8 a server, 2 NICs: 3 servers, 6 endpoints."""
    r = D.plan(17, gpus_per_server=8, nics_per_server=2)
    assert r["servers"] == 3 and r["endpoints"] == 6


def test_oversubscription_2_at_radix_64_is_42_down_22_up():
    r = D.plan(4096, radix=64, gpus_per_server=1, nics_per_server=1, link_gbps=100.0,
               oversubscription=2.0)
    c2 = by_name(r)["clos-2"]
    assert c2.oversubscription == approx(42 / 22)
    assert c2.max_endpoints == 64 * 42 == 2688
    # leaves ceil(4096/42) = 98, up cables 98*22 = 2,156, spines ceil(2156/64) = 34
    assert c2.switches_by_tier == {"leaf": 98, "spine": 34}
    assert c2.cables == 4096 + 2156
    assert c2.bisection_gbps == approx(2048 * 100.0 * 22 / 42)
    # needed: R*floor(2R/3) >= 4096: 78*52 = 4,056 < 4096 <= 80*53 = 4,240
    assert c2.needed_radix == 80
    assert c2.reason == ("4,096 endpoints exceed the largest clos-2 at radix 64 and 1.91:1 "
                         "oversubscription (2,688 endpoints); it needs a higher radix (80) "
                         "or another tier")   # 64*63 = 4,032 < 4,096
    c3 = by_name(r)["clos-3"]
    # aggs ceil(2156/32) = 68, cores ceil(68*32/64) = 34
    assert c3.switches_by_tier == {"leaf": 98, "agg": 68, "core": 34}
    assert c3.cables == 4096 + 2156 + 68 * 32
    assert c3.max_endpoints == 64 * 32 * 42


def test_oversubscription_3_is_exact_three_quarters_down():
    """64*3/4 = 48 exactly: 48 down, 16 up."""
    c2 = by_name(D.plan(96, radix=64, gpus_per_server=1, nics_per_server=1,
                        oversubscription=3.0))["clos-2"]
    assert c2.oversubscription == 3.0 and c2.max_endpoints == 64 * 48
    assert c2.switches_by_tier == {"leaf": 2, "spine": 1}
    # radix 12 at 3:1: 12*3/4 = 9 down, 3 up
    c2 = by_name(D.plan(96, radix=12, gpus_per_server=1, nics_per_server=1,
                        oversubscription=3.0))["clos-2"]
    assert c2.oversubscription == 3.0 and c2.max_endpoints == 108


def test_huge_oversubscription_keeps_one_port_up():
    """At 1e12:1 a leaf of 64 ports would round to 64 down: it keeps one up."""
    c2 = by_name(D.plan(64, radix=64, gpus_per_server=1, nics_per_server=1,
                        oversubscription=1e12))["clos-2"]
    assert c2.oversubscription == 63.0 and c2.max_endpoints == 64 * 63
    assert c2.switches_by_tier == {"leaf": 2, "spine": 1}


def test_more_oversubscription_is_offered_only_where_it_helps():
    """clos-2 at radix 64 with all but one port down holds 64*63 = 4,032."""
    one = dict(radix=64, gpus_per_server=1, nics_per_server=1)
    c2 = by_name(D.plan(4032, **one))["clos-2"]
    # needed: 88*44 = 3,872 < 4,032 <= 90*45 = 4,050
    assert c2.reason == ("4,032 endpoints exceed the largest clos-2 at radix 64 and 1:1 "
                         "oversubscription (2,048 endpoints); it needs a higher radix (90), "
                         "more oversubscription or another tier")
    c2 = by_name(D.plan(4033, **one))["clos-2"]
    assert c2.reason == ("4,033 endpoints exceed the largest clos-2 at radix 64 and 1:1 "
                         "oversubscription (2,048 endpoints); it needs a higher radix (90) "
                         "or another tier")
    c3 = by_name(D.plan(100000, **one))["clos-3"]
    # 72*36*36 = 93,312 < 100,000 <= 74*37*37 = 101,306; 64*32*63 = 129,024 >= 100,000
    assert c3.reason == ("100,000 endpoints exceed the largest clos-3 at radix 64 and 1:1 "
                         "oversubscription (65,536 endpoints); it needs a higher radix (74), "
                         "more oversubscription or another tier")


def _ref_radix(endpoints, capacity):
    """Smallest even radix >= 4 whose closed-form capacity holds `endpoints`."""
    R = 4
    while capacity(R) < endpoints:
        R += 2
    return R


@pytest.mark.parametrize("design,capacity", [
    ("clos-2", lambda R: R * R // 2),
    ("clos-3", lambda R: R ** 3 // 4),
    ("single-switch", lambda R: R),
    ("full-mesh", lambda R: R + 1),
])
def test_min_radix_matches_the_closed_form_capacity(design, capacity):
    for E in list(range(2, 140)) + [799, 800, 801, 2048, 2049, 4000, 16384, 65536, 65537]:
        got = D.min_radix(design, E, gpus_per_server=1, nics_per_server=1)
        assert type(got) is int
        assert got == _ref_radix(E, capacity), (design, E)


@pytest.mark.parametrize("design,gpus,want", [
    ("full-mesh", 2, 4), ("full-mesh", 5, 4), ("full-mesh", 6, 6), ("full-mesh", 7, 6),
    ("full-mesh", 16, 16), ("full-mesh", 17, 16), ("full-mesh", 18, 18),
    ("single-switch", 3, 4), ("single-switch", 4, 4), ("single-switch", 5, 6),
    ("single-switch", 6, 6), ("single-switch", 7, 8),
    ("clos-2", 8, 4), ("clos-2", 9, 6), ("clos-2", 18, 6), ("clos-2", 19, 8),
    ("clos-2", 800, 40), ("clos-2", 2048, 64), ("clos-2", 2049, 66),
    ("clos-3", 16, 4), ("clos-3", 17, 6), ("clos-3", 65536, 64), ("clos-3", 65537, 66),
    ("clos-3", 10_000_000, 342),   # 340*170*170 = 9,826,000 < 1e7 <= 342*171*171 = 10,000,422
])
def test_min_radix_literals(design, gpus, want):
    assert D.min_radix(design, gpus, gpus_per_server=1, nics_per_server=1) == want


def test_min_radix_defaults_and_oversubscription():
    # 16,384 GPUs, 8 a server, 8 NICs: 16,384 endpoints
    assert D.min_radix("clos-2", 16384) == 182
    # 2 NICs per 8 GPUs: 4,096 endpoints: 90*45 = 4,050 < 4,096 <= 92*46 = 4,232
    assert D.min_radix("clos-2", 16384, 8, 2) == 92
    # 3:1, R*floor(3R/4) >= 13: R=4 holds 12, R=6 holds 6*4 = 24
    assert D.min_radix("clos-2", 12, 1, 1, 3.0) == 4
    assert D.min_radix("clos-2", 13, 1, 1, 3.0) == 6


def test_min_radix_refusals():
    refused(D.min_radix, "torus", 16, message="design must be one of full-mesh, single-switch, "
                                                 "clos-2, clos-3, got 'torus'")
    refused(D.min_radix, "clos-2", 1, message="gpus must be a whole number from 2 to 10,000,000, got 1")
    refused(D.min_radix, "clos-2", 10_000_001,
            message="gpus must be a whole number from 2 to 10,000,000, got 10000001")
    assert D.min_radix("single-switch", 10_000_000, 1, 1) == 10_000_000
    refused(D.min_radix, "clos-2", 16, 73, 1,
            message="gpus_per_server must be a whole number from 1 to 72, got 73")
    refused(D.min_radix, "clos-2", 16, 0, 1,
            message="gpus_per_server must be a whole number from 1 to 72, got 0")
    assert D.min_radix("single-switch", 144, 72, 1) == 4
    refused(D.min_radix, "clos-2", 16, 8, 9,
            message="nics_per_server must be a whole number from 1 to gpus_per_server (8), got 9")
    refused(D.min_radix, "clos-2", 16, 8, 8, 0.5,
            message="oversubscription must be a number of at least 1, got 0.5")


def test_max_endpoints_of_an_unknown_design_is_refused():
    refused(D.max_endpoints_of, "torus", 64, 1.0,
            message="design must be one of full-mesh, single-switch, clos-2, clos-3, got 'torus'")


def test_plan_refusals():
    even = "an even whole number from 4 to 1,024 (ports per switch)"
    refused(D.plan, 16, radix=63, message=f"radix must be {even}, got 63")
    refused(D.plan, 16, radix=2, message=f"radix must be {even}, got 2")
    refused(D.plan, 16, radix=1026, message=f"radix must be {even}, got 1026")
    assert D.plan(16, radix=4)["inputs"]["radix"] == 4
    assert D.plan(16, radix=1024)["inputs"]["radix"] == 1024
    refused(D.plan, 1, message="gpus must be a whole number from 2 to 10,000,000, got 1")
    refused(D.plan, 16, gpus_per_server=73,
            message="gpus_per_server must be a whole number from 1 to 72, got 73")
    refused(D.plan, 16, nics_per_server=9,
            message="nics_per_server must be a whole number from 1 to gpus_per_server (8), got 9")
    refused(D.plan, 16, link_gbps=0, message="link_gbps must be a number greater than 0, got 0")
    refused(D.plan, 16, oversubscription=0.99,
            message="oversubscription must be a number of at least 1, got 0.99")
    refused(D.plan, 16, training=TR.TrainingRun(gpu_flops=0),
            message="gpu_flops must be a number greater than 0, got 0")
    refused(D.plan, 16, training=TR.TrainingRun(total_flops=-1),
            message="total_flops must be a number greater than 0, got -1")
    refused(D.plan, 16, training=TR.TrainingRun(utilisation=1.5),
            message="utilisation must be a number greater than 0 and at most 1, got 1.5")


def test_plan_passes_its_training_arguments_through():
    r = D.plan(1000, gpus_per_server=1, nics_per_server=1,
               training=TR.TrainingRun(total_flops=1e21, gpu_flops=1e15, utilisation=0.5))
    assert r["inputs"]["gpu_flops"] == 1e15 and r["inputs"]["total_flops"] == 1e21
    assert r["inputs"]["utilisation"] == 0.5
    assert r["training"]["seconds_all_gpus"] == approx(2000.0)   # 1e21 / (1e15*1000*0.5) = 1e21 / 5e17


# --------------------------------------------------------------------------
# calibration.py: the fit (the closed forms are sim's: tests/test_closed_form.py)

def test_fit_recovers_exact_alpha_beta():
    # t = 2e-6 * steps + 1e-9 * bytes
    pts = [(2, 1000, 2 * 2e-6 + 1000e-9), (10, 1e6, 10 * 2e-6 + 1e-3), (4, 5e5, 8e-6 + 5e-4)]
    a, b = CAL.fit_alpha_beta(pts)
    assert a == approx(2e-6, rel=1e-9) and b == approx(1e-9, rel=1e-9)


def test_fit_least_squares_by_hand():
    """(1,0,1), (0,1,2), (1,1,4): normal equations [[2,1],[1,2]] (a,b) = (5,6):
    a = 4/3, b = 7/3."""
    a, b = CAL.fit_alpha_beta([(1, 0, 1), (0, 1, 2), (1, 1, 4)])
    assert a == approx(4 / 3, rel=1e-12) and b == approx(7 / 3, rel=1e-12)


def test_fit_clamps_a_negative_alpha_to_zero():
    """(1,1,1.0), (2,1,0.9): unconstrained a = -0.1, b = 1.1. With a = 0,
    b = (1 + 0.9)/2 = 0.95 (sse 0.005); with b = 0, a = 2.8/5 = 0.56
    (sse 0.242): a = 0 wins."""
    a, b = CAL.fit_alpha_beta([(1, 1, 1.0), (2, 1, 0.9)])
    assert a == 0.0 and b == approx(0.95, rel=1e-12)


def test_fit_clamps_a_negative_beta_to_zero():
    """Mirror image: (1,1,1.0), (1,2,0.9) gives (0.95, 0)."""
    a, b = CAL.fit_alpha_beta([(1, 1, 1.0), (1, 2, 0.9)])
    assert a == approx(0.95, rel=1e-12) and b == 0.0


def test_fit_proportional_columns_choose_alpha_zero():
    """One point (2, 100, 1): b = 100/10,000 = 0.01 or a = 2/4 = 0.5, both exact:
    alpha = 0 wins the tie."""
    assert CAL.fit_alpha_beta([(2, 100, 1.0)]) == (0.0, approx(0.01, rel=1e-12))
    # two proportional points (1,10,2), (2,20,4): b = (20+80)/(100+400) = 0.2
    assert CAL.fit_alpha_beta([(1, 10, 2.0), (2, 20, 4.0)]) == (0.0, approx(0.2, rel=1e-12))


def test_fit_with_only_steps_or_only_bytes():
    # steps only: a = (3e-6 + 12e-6)/5 = 3e-6
    a, b = CAL.fit_alpha_beta([(1, 0, 3e-6), (2, 0, 6e-6)])
    assert a == approx(3e-6, rel=1e-12) and b == 0.0
    a, b = CAL.fit_alpha_beta([(0, 10, 1e-8), (0, 20, 2e-8)])
    assert a == 0.0 and b == approx(1e-9, rel=1e-12)
    # bytes only but all times zero: (0, 0)
    assert CAL.fit_alpha_beta([(0, 10, 0.0)]) == (0.0, 0.0)
    assert CAL.fit_alpha_beta([(10, 0, 0.0)]) == (0.0, 0.0)


def test_fit_prefers_the_better_candidate_when_not_tied():
    """Steps only, but a second point with bytes makes the columns independent:
    (1,0,1), (1,1,0): unconstrained a = 1, b = -1; candidates (0, 0) with sse 1
    (bt/bb = 0), and (1/2, 0) with sse 0.5: the latter."""
    assert CAL.fit_alpha_beta([(1, 0, 1.0), (1, 1, 0.0)]) == (approx(0.5), 0.0)


def test_fit_refusals():
    triple = "(steps, bytes, seconds) triple"
    refused(CAL.fit_alpha_beta, None, message=f"points must hold at least one {triple}")
    refused(CAL.fit_alpha_beta, [], message=f"points must hold at least one {triple}")
    refused(CAL.fit_alpha_beta, [(1, 2)], message=f"points[0] must be a {triple}, got (1, 2)")
    refused(CAL.fit_alpha_beta, [(1, 1, 1), 5], message=f"points[1] must be a {triple}, got 5")
    refused(CAL.fit_alpha_beta, [(0, 0, 1)],
            message="points must have at least one point with steps or bytes above 0")
    refused(CAL.fit_alpha_beta, [(1, 1, 1), (-1, 1, 1)],
            message="points[1] steps must be a number of at least 0, got -1")
    refused(CAL.fit_alpha_beta, [(1, -1, 1)],
            message="points[0] bytes must be a number of at least 0, got -1")
    refused(CAL.fit_alpha_beta, [(1, 1, 1), (1, 1, "x")],
            message="points[1] seconds must be a number of at least 0, got 'x'")


# --------------------------------------------------------------------------
# costmodel.py: the plan's AllReduce, priced by sim/closed_form.py

def test_predict_allreduce_16_gpus_by_hand():
    """16 GPUs, 8 a server, 8 NICs, 400 Gbit/s, NVLink 3,600, alpha 5e-6, 1e8 B.
    beta = 8/400e9 = 2e-11, beta_intra = 8/3600e9. Ring: 30*5e-6 + 30/16*1e8*2e-11
    = 1.5e-4 + 3.75e-3. Hier: intra 7*5e-6 + 7/8*1e8*8/3600e9 each; inter
    2*5e-6 + 1.25e7*2e-11 = 1e-5 + 2.5e-4, pipelined: the three latencies
    (3.5e-5 + 1e-5 + 3.5e-5) and the larger of the in-server bytes (both
    phases, 2*7/8*1e8*8/3600e9 = 3.889e-4) and the inter-server 2.5e-4."""
    p = C.predict_allreduce(16, 1e8)
    hier = 8e-5 + 2 * 7 / 8 * 1e8 * 8 / 3600e9
    assert p["gpus"] == 16 and p["nodes"] == 2 and p["gpus_per_node"] == 8
    assert p["nics_per_node"] == 8 and p["gradient_bytes"] == 1e8
    assert p["alpha_s"] == 5e-6 and p["intra_alpha_s"] == 5e-6
    assert p["link_gbps"] == 400.0 and p["intra_gbps"] == 3600.0 and p["efficiency"] == 1.0
    assert p["beta_s_per_byte"] == approx(2e-11, rel=1e-12)
    assert p["intra_beta_s_per_byte"] == approx(8 / 3600e9, rel=1e-12)
    assert p["inter_beta_s_per_byte"] == approx(2e-11, rel=1e-12)
    assert p["ring_seconds"] == approx(3.9e-3, rel=1e-12)
    assert p["hierarchical_seconds"] == approx(hier, rel=1e-12)
    assert p["speedup"] == approx(3.9e-3 / hier, rel=1e-12)


def test_predict_allreduce_shared_nics_efficiency_and_intra_alpha():
    """16 GPUs, 8 a server, 2 NICs: 4 GPUs share a NIC, beta_inter = 4 beta.
    efficiency 0.5, link 100: beta = 8/(100e9*0.5) = 1.6e-10; intra 800 Gbit/s:
    2e-11; intra alpha 1e-6, alpha 2e-6, 8e6 B.
    Hier: intra 7e-6 + 7/8*8e6*2e-11 = 7e-6 + 1.4e-4 each;
    inter 2*2e-6 + 1e6*6.4e-10 = 4e-6 + 6.4e-4; pipelined: 7e-6 + 4e-6 +
    7e-6 = 1.8e-5 of latency, max(2.8e-4, 6.4e-4) of bytes. Ring: 30*2e-6 +
    30/16*8e6*1.6e-10 = 6e-5 + 2.4e-3."""
    links = C.Links(alpha_s=2e-6, link_gbps=100, intra_gbps=800, efficiency=0.5,
                    intra_alpha_s=1e-6)
    p = C.predict_allreduce(16, 8e6, links, gpus_per_server=8, nics_per_server=2)
    assert p["nics_per_node"] == 2 and p["intra_alpha_s"] == 1e-6 and p["alpha_s"] == 2e-6
    assert p["beta_s_per_byte"] == approx(1.6e-10, rel=1e-12)
    assert p["intra_beta_s_per_byte"] == approx(2e-11, rel=1e-12)
    assert p["inter_beta_s_per_byte"] == approx(6.4e-10, rel=1e-12)
    assert p["ring_seconds"] == approx(2.46e-3, rel=1e-12)
    assert p["hierarchical_seconds"] == approx(1.8e-5 + 6.4e-4, rel=1e-12)
    assert p["efficiency"] == 0.5 and p["link_gbps"] == 100.0 and p["intra_gbps"] == 800.0


def test_predict_allreduce_fewer_gpus_than_a_server():
    """4 GPUs, 8 a server, 2 NICs: one node of 4 GPUs, 2 NICs, beta_inter 2 beta."""
    p = C.predict_allreduce(4, 1e6, gpus_per_server=8, nics_per_server=2)
    assert p["nodes"] == 1 and p["gpus_per_node"] == 4 and p["nics_per_node"] == 2
    assert p["inter_beta_s_per_byte"] == approx(4e-11, rel=1e-12)
    # 3 NICs for 2 GPUs: capped at 2
    p = C.predict_allreduce(2, 1e6, gpus_per_server=8, nics_per_server=3)
    assert p["nics_per_node"] == 2 and p["inter_beta_s_per_byte"] == approx(2e-11)
    # one GPU: nothing to do
    p = C.predict_allreduce(1, 1e6)
    assert p["ring_seconds"] == 0.0 and p["hierarchical_seconds"] == 0.0 and p["speedup"] == 1.0


def test_predict_allreduce_zero_time_speedup_is_one():
    p = C.predict_allreduce(16, 0, C.Links(alpha_s=0))
    assert p["ring_seconds"] == 0 and p["hierarchical_seconds"] == 0 and p["speedup"] == 1.0


def test_predict_allreduce_from_a_plan_and_explicit_arguments_win():
    """A plan of 16 GPUs, 4 a server, 2 NICs, 100 Gbit/s: beta 8e-11, 4 nodes,
    beta_inter 2*beta."""
    plan = D.plan(16, gpus_per_server=4, nics_per_server=2, link_gbps=100.0)
    p = C.predict_allreduce(plan, 1e6)
    assert p["gpus"] == 16 and p["nodes"] == 4 and p["gpus_per_node"] == 4
    assert p["nics_per_node"] == 2 and p["link_gbps"] == 100.0
    assert p["inter_beta_s_per_byte"] == approx(1.6e-10, rel=1e-12)
    # the bare inputs dict works the same
    q = C.predict_allreduce(plan["inputs"], 1e6)
    assert q["nodes"] == 4 and q["nics_per_node"] == 2 and q["link_gbps"] == 100.0
    # explicit arguments win
    r = C.predict_allreduce(plan, 1e6, C.Links(link_gbps=200), gpus_per_server=2,
                            nics_per_server=1)
    assert r["nodes"] == 8 and r["gpus_per_node"] == 2 and r["nics_per_node"] == 1
    assert r["link_gbps"] == 200.0 and r["beta_s_per_byte"] == approx(4e-11)


def test_predict_allreduce_defaults_without_a_plan():
    p = C.predict_allreduce(64, 1e6)
    assert p["gpus_per_node"] == 8 and p["nics_per_node"] == 8 and p["link_gbps"] == 400.0
    assert p["intra_gbps"] == 3600.0 and p["nodes"] == 8
    # nics default to the GPUs a server: 4 GPUs, 4 NICs
    p = C.predict_allreduce(64, 1e6, gpus_per_server=4)
    assert p["nics_per_node"] == 4 and p["nodes"] == 16


def test_predict_allreduce_refusals():
    refused(C.predict_allreduce, 0, 1, message="gpus must be a whole number from 1 to 10,000,000, got 0")
    refused(C.predict_allreduce, 10_000_001, 1,
            message="gpus must be a whole number from 1 to 10,000,000, got 10000001")
    refused(C.predict_allreduce, 8, 1, gpus_per_server=73,
            message="gpus_per_server must be a whole number from 1 to 72, got 73")
    refused(C.predict_allreduce, 8, 1, gpus_per_server=0,
            message="gpus_per_server must be a whole number from 1 to 72, got 0")
    refused(C.predict_allreduce, 8, 1, nics_per_server=9,
            message="nics_per_server must be a whole number from 1 to gpus_per_server (8), got 9")
    refused(C.predict_allreduce, 8, 1, C.Links(link_gbps=0),
            message="link_gbps must be a number greater than 0, got 0")
    refused(C.predict_allreduce, 8, 1, C.Links(intra_gbps=-1),
            message="intra_gbps must be a number greater than 0, got -1")
    refused(C.predict_allreduce, 8, 1, C.Links(efficiency=0),
            message="efficiency must be a number greater than 0 and at most 1, got 0")
    refused(C.predict_allreduce, 8, -1,
            message="gradient_bytes must be a number of at least 0, got -1")
    refused(C.predict_allreduce, 8, 1, C.Links(alpha_s=-1),
            message="alpha_s must be a number of at least 0, got -1")
    refused(C.predict_allreduce, 8, 1, C.Links(intra_alpha_s=-1),
            message="intra_alpha_s must be a number of at least 0, got -1")
    assert C.predict_allreduce(10_000_000, 1, gpus_per_server=72)["gpus"] == 10_000_000


def test_nvlink_rate_is_h100_sxm():
    """18 links x 25 GB/s x 8 bits = 3,600 Gbit/s (the published H100 SXM figure)."""
    assert C.NVLINK_GBPS == 18 * 25 * 8


# --------------------------------------------------------------------------
# training.py: the article's arithmetic

def test_training_arithmetic_by_hand():
    t = TR.training_arithmetic(1e24, 2e15, 1000, 0.5)
    assert t["total_flops"] == 1e24 and t["gpu_flops"] == 2e15
    assert t["flops_per_day"] == approx(1.728e20, rel=1e-12)   # 2e15 * 86,400
    assert t["seconds_one_gpu"] == approx(5e8, rel=1e-12)
    assert t["days_one_gpu"] == approx(5e8 / 86400, rel=1e-12)
    assert t["years_one_gpu"] == approx(5e8 / 86400 / 365.25, rel=1e-12)
    assert 15.8 < t["years_one_gpu"] < 15.9          # "about 15.8 years"
    assert t["gpus"] == 1000 and t["utilisation"] == 0.5
    assert t["seconds_all_gpus"] == approx(1e6, rel=1e-12)
    assert t["days_all_gpus"] == approx(1e6 / 86400, rel=1e-12)


def test_training_defaults():
    t = TR.training_arithmetic()
    assert t["total_flops"] == 1e24 and t["gpu_flops"] == 2e15 and t["gpus"] == 1
    assert t["utilisation"] == 1.0 and t["seconds_all_gpus"] == approx(5e8)


def test_training_refusals_and_boundaries():
    refused(TR.training_arithmetic, 0, message="total_flops must be a number greater than 0, got 0")
    refused(TR.training_arithmetic, 1, 0, message="gpu_flops must be a number greater than 0, got 0")
    refused(TR.training_arithmetic, 1, 1, 0,
            message="gpus must be a whole number from 1 to 10,000,000, got 0")
    refused(TR.training_arithmetic, 1, 1, 10_000_001,
            message="gpus must be a whole number from 1 to 10,000,000, got 10000001")
    refused(TR.training_arithmetic, 1, 1, 1, 0,
            message="utilisation must be a number greater than 0 and at most 1, got 0")
    refused(TR.training_arithmetic, 1, 1, 1, 1.01,
            message="utilisation must be a number greater than 0 and at most 1, got 1.01")
    assert TR.training_arithmetic(1, 1, 10_000_000, 1)["gpus"] == 10_000_000
    assert TR.training_arithmetic(1, 1, 1, 1)["seconds_all_gpus"] == 1.0


# --------------------------------------------------------------------------
# inputs.py

def test_number_refusals():
    for bad, shown in [(True, "true"), (False, "false"), (float("nan"), "nan"),
                       (float("inf"), "inf"), ("3", "'3'"), (None, "null"), ([1], "[1]")]:
        refused(I.number, "x", bad, message=f"x must be a number, got {shown}")
    refused(I.number, "x", "3", "a thing", message="x must be a thing, got '3'")
    assert I.number("x", 3) == 3 and I.number("x", -2.5) == -2.5


def test_whole():
    assert I.whole("n", 2e5, 1, 10 ** 6) == 200000 and type(I.whole("n", 2e5, 1, 10 ** 6)) is int
    assert I.whole("n", 1, 1, 3) == 1 and I.whole("n", 3, 1, 3) == 3
    refused(I.whole, "n", 0, 1, 3, message="n must be a whole number from 1 to 3, got 0")
    refused(I.whole, "n", 4, 1, 3, message="n must be a whole number from 1 to 3, got 4")
    refused(I.whole, "n", 2.5, 1, 3, message="n must be a whole number from 1 to 3, got 2.5")
    refused(I.whole, "n", 5000, 1, 1000, message="n must be a whole number from 1 to 1,000, got 5000")
    refused(I.whole, "n", True, 0, 3, message="n must be a whole number from 0 to 3, got true")
    refused(I.whole, "n", 9, 1, 3, "small", message="n must be small, got 9")


def test_positive_at_least_one_non_negative_fraction():
    assert I.positive("p", 1e-300) == 1e-300 and type(I.positive("p", 3)) is float
    refused(I.positive, "p", 0, message="p must be a number greater than 0, got 0")
    refused(I.positive, "p", "a", message="p must be a number greater than 0, got 'a'")
    assert I.at_least_one("o", 1) == 1.0 and type(I.at_least_one("o", 1)) is float
    refused(I.at_least_one, "o", 0.999, message="o must be a number of at least 1, got 0.999")
    refused(I.at_least_one, "o", None, message="o must be a number of at least 1, got null")
    assert I.non_negative("z", 0) == 0 and type(I.non_negative("z", 0)) is int
    refused(I.non_negative, "z", -1e-9, message="z must be a number of at least 0, got -1e-09")
    refused(I.non_negative, "z", "q", message="z must be a number of at least 0, got 'q'")
    assert I.fraction("f", 1) == 1.0 and type(I.fraction("f", 1)) is float
    assert I.fraction("f", 1e-9) == 1e-9
    refused(I.fraction, "f", 0, message="f must be a number greater than 0 and at most 1, got 0")
    refused(I.fraction, "f", 1.0000001,
            message="f must be a number greater than 0 and at most 1, got 1.0000001")
    refused(I.fraction, "f", "1", message="f must be a number greater than 0 and at most 1, got '1'")


def test_between_and_its_figures():
    assert I.between("g", 1, 1, 10) == 1.0 and type(I.between("g", 1, 1, 10)) is float
    assert I.between("g", 10, 1, 10) == 10.0
    refused(I.between, "g", 0.5, 1, 10, message="g must be a number from 1 to 10, got 0.5")
    refused(I.between, "g", 11, 1, 10, message="g must be a number from 1 to 10, got 11")
    refused(I.between, "g", 0, 1e-5, 1e6, message="g must be a number from 1e-05 to 1,000,000, got 0")
    refused(I.between, "g", 0, 2.5, 9999999, message="g must be a number from 2.5 to 9,999,999, got 0")
    refused(I.between, "g", 0, 1, 1e7, message="g must be a number from 1 to 1e+07, got 0")
    refused(I.between, "g", 0, -1e7, -1, message="g must be a number from -1e+07 to -1, got 0")
    refused(I.between, "g", 0, -9999999, -1, message="g must be a number from -9,999,999 to -1, got 0")
    refused(I.between, "g", "x", 1, 2, message="g must be a number from 1 to 2, got 'x'")


def test_radix_validator():
    what = "an even whole number from 4 to 1,024 (ports per switch)"
    assert I.radix("--radix", 4) == 4 and I.radix("--radix", 1024) == 1024
    assert I.radix("--radix", 64.0) == 64 and type(I.radix("--radix", 64.0)) is int
    refused(I.radix, "--radix", 2, message=f"--radix must be {what}, got 2")
    refused(I.radix, "--radix", 1026, message=f"--radix must be {what}, got 1026")
    refused(I.radix, "--radix", 65, message=f"--radix must be {what}, got 65")
    refused(I.radix, "--radix", 5, message=f"--radix must be {what}, got 5")


def test_nics_per_server_validator():
    assert I.nics_per_server(1, 8) == 1 and I.nics_per_server(8, 8) == 8
    refused(I.nics_per_server, 0, 8,
            message="nics_per_server must be a whole number from 1 to gpus_per_server (8), got 0")
    refused(I.nics_per_server, 5, 4,
            message="nics_per_server must be a whole number from 1 to gpus_per_server (4), got 5")


def test_parse_bytes():
    assert I.parse_bytes("1G") == 1073741824 and I.parse_bytes("512M") == 536870912
    assert I.parse_bytes("64K") == 65536 and I.parse_bytes("1048576") == 1048576
    assert I.parse_bytes("1GiB") == 1 << 30 and I.parse_bytes(4096) == 4096
    assert I.parse_bytes("1.4K") == 1434                 # 1433.6 rounds up
    assert I.parse_bytes(3.0) == 3 and type(I.parse_bytes(3.0)) is int
    assert I.parse_bytes(1) == 1 and I.parse_bytes(1 << 50) == 1 << 50
    assert I.parse_bytes("1024T") == 1 << 50
    refused(I.parse_bytes, 0, message="gradient bytes must be from 1 byte to 1 PiB, got 0")
    refused(I.parse_bytes, (1 << 50) + 1,
            message="gradient bytes must be from 1 byte to 1 PiB, got 1125899906842625")
    refused(I.parse_bytes, "lots",
            message="gradient bytes must be a size such as 1048576, 512M or 1G, got 'lots'")
    refused(I.parse_bytes, "lots", "--bucket",
            message="--bucket must be a size such as 1048576, 512M or 1G, got 'lots'")
    refused(I.parse_bytes, "0.3", "--bucket", message="--bucket must be from 1 byte to 1 PiB, got '0.3'")


@pytest.mark.parametrize("flags,message", [
    (["--link-gbps", "2e6"], "--link-gbps must be a number from 1e-05 to 1,000,000, got 2000000.0"),
    (["--link-gbps", "9e-6"], "--link-gbps must be a number from 1e-05 to 1,000,000, got 9e-06"),
    (["--oversubscription", "1024"],
     "--oversubscription must be a number from 1 to 1,023, got 1024.0"),
    (["--gpu-pflops", "2e4"], "--gpu-pflops must be a number from 1e-06 to 10,000, got 20000.0"),
    (["--gpu-pflops", "9e-7"], "--gpu-pflops must be a number from 1e-06 to 10,000, got 9e-07"),
    (["--flops", "2e30"], "--flops must be a number from 1 to 1e+30, got 2e+30"),
    (["--alpha-us", "1000001"], "--alpha-us must be a number from 0 to 1,000,000, got 1000001.0"),
    (["--gpus", "1"], "--gpus must be a whole number from 2 to 10,000,000, got 1"),
    (["--gpus", "10000001"], "--gpus must be a whole number from 2 to 10,000,000, got 10000001"),
    (["--radix", "1026"],
     "--radix must be an even whole number from 4 to 1,024 (ports per switch), got 1026"),
    (["--gpus-per-server", "73"], "--gpus-per-server must be a whole number from 1 to 72, got 73"),
    (["--gradient-bytes", "1025T"], "--gradient-bytes must be from 1 byte to 1 PiB, got '1025T'"),
])
def test_the_command_lines_ranges_refuse_just_outside(flags, message, capsys):
    import planner as P
    assert P.main(["--gpus", "16", *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {message}\n"


@pytest.mark.parametrize("flags", [
    ["--link-gbps", "1e6"], ["--link-gbps", "1e-5"], ["--oversubscription", "1023"],
    ["--gpu-pflops", "1e4"], ["--gpu-pflops", "1e-6"], ["--flops", "1e30"],
    ["--alpha-us", "1e6"], ["--gpus", "2"], ["--radix", "1024"], ["--gpus-per-server", "72"],
    ["--gradient-bytes", "1024T"],
])
def test_the_command_lines_ranges_accept_their_ends(flags, capsys):
    import planner as P
    assert P.main(["--gpus", "16", *flags]) == 0
    assert capsys.readouterr().err == ""


def test_plan_error_is_a_value_error():
    assert issubclass(PlanError, ValueError)


# --------------------------------------------------------------------------
# steptime.py: the --params flags

def step_args(**kw):
    base = dict(params=None, layers=None, tokens_per_gpu=None, bucket=None, sizes=None,
                simulate=False)
    base.update(kw)
    return SimpleNamespace(**base)


def test_step_flags_default_and_imply_simulate():
    a = step_args(params=1e9)
    ST.check_flags(a)
    assert a.layers == 80 and a.tokens_per_gpu == 4096 and a.bucket == 25 * 1024 * 1024
    assert a.simulate is True
    a = step_args(params=1e9, layers=3, tokens_per_gpu=7, bucket="64K")
    ST.check_flags(a)
    assert (a.layers, a.tokens_per_gpu, a.bucket, a.simulate) == (3, 7, 65536, True)


def test_without_params_the_step_flags_are_refused_and_nothing_set():
    a = step_args()
    assert ST.check_flags(a) is None
    assert a.simulate is False and a.layers is None and a.bucket is None
    refused(ST.check_flags, step_args(layers=8), message="--layers goes with --params")
    refused(ST.check_flags, step_args(tokens_per_gpu=8),
            message="--tokens-per-gpu goes with --params")
    refused(ST.check_flags, step_args(bucket="1M"), message="--bucket goes with --params")
    refused(ST.check_flags, step_args(bucket="1M", tokens_per_gpu=3),
            message="--tokens-per-gpu goes with --params")


@pytest.mark.parametrize("kw,message", [
    (dict(params=0), "--params must be a number from 1 to 1e+13, got 0"),
    (dict(params=0.5), "--params must be a number from 1 to 1e+13, got 0.5"),
    (dict(params=2e13), "--params must be a number from 1 to 1e+13, got 2e+13"),
    (dict(params=1e9, sizes=["1M"]),
     "--sizes: with --params the simulated sizes are the gradient buckets'; leave out --sizes"),
    (dict(params=1e9, layers=0), "--layers must be a whole number from 1 to 1000, got 0"),
    (dict(params=1e9, layers=1001), "--layers must be a whole number from 1 to 1000, got 1001"),
    (dict(params=1e9, tokens_per_gpu=0),
     "--tokens-per-gpu must be a whole number from 1 to 1,099,511,627,776, got 0"),
    (dict(params=1e9, tokens_per_gpu=2 ** 40 + 1),
     "--tokens-per-gpu must be a whole number from 1 to 1,099,511,627,776, got 1099511627777"),
    (dict(params=1e9, bucket="1023"), "--bucket must be from 1K to 1G, got 1,023 bytes"),
    (dict(params=1e9, bucket="1073741825"),
     "--bucket must be from 1K to 1G, got 1,073,741,825 bytes"),
    (dict(params=1e9, bucket="lots"),
     "--bucket must be a size such as 1048576, 512M or 1G, got 'lots'"),
    (dict(params=19, layers=20), "--params: 19 parameters cannot fill 20 layers"),
    # 512,000,001 x 2 / 1,024 is just over a million buckets
    (dict(params=512_000_001, bucket="1K"),
     "--bucket: 1,024 bytes cut 5.12e+08 parameters' gradients into more than 1,000,000 "
     "buckets: raise it"),
])
def test_step_flag_refusals(kw, message):
    refused(ST.check_flags, step_args(**kw), message=message)


@pytest.mark.parametrize("kw", [
    dict(params=1), dict(params=1e13), dict(params=1e9, layers=1), dict(params=1e9, layers=1000),
    dict(params=1e9, tokens_per_gpu=1), dict(params=1e9, tokens_per_gpu=2 ** 40),
    dict(params=5e8, bucket="1K"), dict(params=1e9, bucket="1G"),
    dict(params=20, layers=20), dict(params=512_000_000, bucket="1K"),
])
def test_step_flags_accept_their_ends(kw):
    kw.setdefault("layers", 1 if kw["params"] < 80 else None)
    a = step_args(**kw)
    ST.check_flags(a)
    assert a.simulate is True


def test_durations_and_days_as_printed():
    assert ST.duration_text(2.5) == "2.5 s" and ST.duration_text(1.0) == "1 s"
    assert ST.duration_text(1234.6) == "1,235 s" and ST.duration_text(1000.0) == "1,000 s"
    assert ST.duration_text(999.94) == "999.9 s"
    assert ST.duration_text(0.0123456) == "12.35 ms" and ST.duration_text(1e-3) == "1 ms"
    assert ST.duration_text(0.000999) == "999 us" and ST.duration_text(5e-9) == "0.005 us"
    assert ST.duration_text(1e-6) == "1 us" and ST.duration_text(0.0) == "0 us"
    assert ST.days_text(150.4) == "150" and ST.days_text(100) == "100" and ST.days_text(1234.6) == "1,235"
    assert ST.days_text(99.94) == "99.9" and ST.days_text(5.26) == "5.3" and ST.days_text(1) == "1.0"
    assert ST.days_text(0.5) == "0.5" and ST.days_text(0.012345) == "0.0123"


def _row(**kw):
    row = dict(design="clos-2", wiring="rail", algorithm="hierarchical",
               bucket_allreduce_s=0.002, bucket_bandwidth_s=0.0001, comm_s=0.004,
               exposed_s=0.001, step_s=0.0133, overlap_efficiency=0.75, days=162.6,
               days_no_overlap=1234.6)
    row.update(kw)
    return row


TRAINING = dict(params=1000000, layers=2, gradient_type="bfloat16", gradient_bytes=2000000,
                buckets=2, bucket_bytes=1048576, tokens_per_gpu=4096, gpus=16,
                compute_s=0.0123, steps=1234567.4, days_compute_only=150.4)
STEP_INPUTS = {"gpu_flops": 2e15, "utilisation": 0.5, "total_flops": 1e24}
HEADER = ("#  design   wiring             per bucket  comm/step   exposed      step  hidden"
          "      days  no overlap")
CLOSING = ("# days: the run's FLOPs at this step time (with overlap; then without). Pure data "
           "parallelism, every GPU holding the whole model; the AllReduce per bucket is the "
           "simulated ")


def test_format_training_by_hand():
    """The first row is exactly 10x its bandwidth time (0.001 = 10 x 0.0001): not
    latency-bound; the second, 19.94x, is the one the latency line names (1.994 ms
    to three figures: 1.99)."""
    rows = [_row(design="clos-3", wiring="server", bucket_allreduce_s=0.001,
                 bucket_bandwidth_s=0.0001),
            _row(bucket_allreduce_s=0.001994, bucket_bandwidth_s=0.0001)]
    text = ST.format_training(dict(TRAINING, rows=rows), STEP_INPUTS)
    assert text.split("\n") == [
        "Training step with communication: 1,000,000 parameters in 2 layers, bfloat16 "
        "gradients (2,000,000 B) in 2 DDP buckets of up to 1,048,576 B, AllReduced one at a "
        "time as the backward pass makes them; 4,096 tokens per GPU per step on 16 GPUs",
        "# compute 12.3 ms a step (6 x params x tokens at 2 PFLOP/s x 0.5); 1e24 FLOPs = "
        "1,234,567 steps = 150 days on compute alone",
        HEADER,
        "   clos-3   server per leaf          1 ms       4 ms      1 ms   13.3 ms     75%"
        "       163      1,235",
        "   clos-2   rail-optimized       1.994 ms       4 ms      1 ms   13.3 ms     75%"
        "       163      1,235",
        "# latency-bound: a bucket's bytes need 0.1 ms at the NIC's rate and its AllReduce "
        "takes 1.99 ms: the ring's 2(m-1) steps across the servers, each a few hops' latency; "
        "larger buckets, fewer GPUs per ring (more parallelism of other kinds) or a tree cut it",
        CLOSING + "hierarchical one"]


def test_format_training_without_rows_or_latency_bound_rows():
    text = ST.format_training(dict(TRAINING, rows=[]), STEP_INPUTS)
    assert text.split("\n")[-1] == CLOSING + " one"
    assert "latency-bound" not in text
    rows = [_row(algorithm="ring", bucket_allreduce_s=0.0005, bucket_bandwidth_s=0.0001)]
    text = ST.format_training(dict(TRAINING, rows=rows), STEP_INPUTS)
    assert "latency-bound" not in text and text.endswith(CLOSING + "ring one")


# --------------------------------------------------------------------------
# simulate.py

from planner import simulate as SIM  # noqa: E402


def test_clos_designs_that_fit_are_simulated_at_the_plans_radix():
    assert SIM.clos_designs(D.plan(16)) == [("clos-2", 64, ""), ("clos-3", 64, "")]
    # radix 4, 16 endpoints: clos-2 holds 8, clos-3 holds 16
    one = dict(gpus_per_server=1, nics_per_server=1)
    assert SIM.clos_designs(D.plan(16, radix=4, **one)) == [("clos-3", 4, "")]
    # the designs may be dicts (a plan read back from JSON)
    r = D.plan(16, radix=4, **one)
    r["designs"] = [d.to_dict() for d in r["designs"]]
    assert SIM.clos_designs(r) == [("clos-3", 4, "")]


def test_when_no_clos_fits_the_3_tier_one_is_simulated_at_its_needed_radix():
    """32 endpoints at radix 4: clos-3 holds 16; radix 6 holds 6*3*3 = 54."""
    r = D.plan(32, radix=4, gpus_per_server=1, nics_per_server=1)
    assert SIM.clos_designs(r) == [("clos-3", 6, "radix 4 holds neither Clos; simulated at "
                                                "radix 6, the smallest that holds a 3-tier one")]
    # 100,000 endpoints at radix 64: 74 (72*36*36 = 93,312 < 1e5 <= 74*37*37)
    r = D.plan(100000, radix=64, gpus_per_server=1, nics_per_server=1)
    r["designs"] = [d.to_dict() for d in r["designs"]]
    assert SIM.clos_designs(r)[0][:2] == ("clos-3", 74)


def test_shape_of_takes_the_plans_numbers():
    r = D.plan(48, radix=16, gpus_per_server=4, nics_per_server=2, link_gbps=100.0,
               oversubscription=3.0)
    s = SIM.shape_of(r, "clos-2", 16, "rail", 800.0)
    # 12 servers; leaf of 16 at 3:1: 12 down, 4 up
    assert (s.servers, s.gpus, s.nics, s.down, s.up) == (12, 4, 2, 12, 4)
    assert (s.tiers, s.radix, s.wiring) == (2, 16, "rail")
    assert s.nic_bps == 1e11 and s.fabric_bps == 1e11 and s.intra_bps == 8e11
    assert SIM.shape_of(r, "clos-3", 32, "server", 800.0).tiers == 3
    s = SIM.shape_of(r, "clos-3", 32, "server", 800.0)
    assert (s.down, s.up, s.radix, s.wiring) == (24, 8, 32, "server")


class Bare(networks.Technology):
    """A network of zero-latency switches and a free transport, hashed by
    ECMP: the closed forms of bandwidth below, worked by hand."""
    name, title, routing = "bare", "bare", "ecmp"


BARE = Bare()


def test_two_gpus_ring_by_hand():
    """2 servers of 1 GPU, 400 Gbit/s (5e10 B/s), 4e6 B: the ring's 2 steps each
    move 2e6 B: 4e-5 s each, 8e-5 s; algbw 4e6/8e-5 = 50 GB/s, busbw x 2*1/2."""
    r = D.plan(2, gpus_per_server=1, nics_per_server=1)
    sim = SIM.simulate_plan(r, [4000000], 0.0, 3600.0, tech=BARE)
    assert sim["gpus"] == 2 and sim["hop_latency_s"] == 0.0 and sim["intra_gbps"] == 3600.0
    assert sim["seeds"] == 1 and sim["notes"] == []
    rows = sim["rows"]
    assert [(x["design"], x["wiring"], x["algorithm"]) for x in rows] == [
        ("clos-2", "server", "ring"), ("clos-3", "server", "ring")]
    for x in rows:
        assert x["radix"] == 64 and x["size_bytes"] == 4000000
        assert x["seconds"] == approx(8e-5, rel=1e-12)
        assert x["seconds_min"] == x["seconds_max"] == x["seconds"]
        assert x["ideal_seconds"] == approx(8e-5, rel=1e-12)
        assert x["algbw_gbytes"] == approx(50.0, rel=1e-12)
        assert x["busbw_gbytes"] == approx(50.0, rel=1e-12)
        assert x["fabric_factor"] == approx(1.0, rel=1e-12)
    assert rows[0]["switches"] == {"leaf": 1, "spine": 1}
    assert rows[1]["switches"] == {"leaf": 1, "agg": 1, "core": 1}


def test_hop_latency_is_paid_per_step():
    """Same ring with 1 us a hop: each of the 2 steps crosses the leaf (2 links):
    8e-5 + 2 * 2e-6."""
    r = D.plan(2, gpus_per_server=1, nics_per_server=1)
    sim = SIM.simulate_plan(r, [4000000], 1e-6, 3600.0, tech=BARE)
    assert sim["hop_latency_s"] == 1e-6
    assert sim["rows"][0]["seconds"] == approx(8.4e-5, rel=1e-9)
    # the ideal fabric has the same hops, hence the same latency
    assert sim["rows"][0]["ideal_seconds"] == approx(8.4e-5, rel=1e-9)
    assert sim["rows"][0]["fabric_factor"] == approx(1.0, rel=1e-9)
    # the technology's switches are paid on every step: RoCE's 0.6 us at the leaf, twice;
    # a transport's cost on every message out of a server: sockets' 20 us, twice more
    roce = SIM.simulate_plan(r, [4000000], 0.0, 3600.0, tech=networks.network("roce"))
    assert roce["rows"][0]["seconds"] == approx(8e-5 + 2 * 0.6e-6, rel=1e-9)
    tcp = SIM.simulate_plan(r, [4000000], 0.0, 3600.0, tech=networks.network("tcp"))
    assert tcp["rows"][0]["seconds"] == approx(8e-5 + 2 * 20.6e-6, rel=1e-9)


def test_sixteen_gpus_ring_and_hierarchical_by_hand():
    """2 servers of 8, 8 NICs, 8e6 B. Ring over 16: 30 steps of 5e5 B, the slowest at
    the NIC (5e10 B/s): 3e-4 s; busbw = algbw x 30/16 = 8e6/3e-4/1e9 x 30/16 = 50.
    Hierarchical: ReduceScatter 7 steps of 1e6 B at 4.5e11 B/s (3,600 Gbit/s),
    inter-node ring on 1e6 B over 2: 2 steps of 5e5 B at 5e10: 2e-5, AllGather as
    the ReduceScatter: 2 x 7e6/4.5e11 + 2e-5."""
    r = D.plan(16)
    sim = SIM.simulate_plan(r, [8000000], 0.0, 3600.0, tech=BARE)
    got = [(x["design"], x["wiring"], x["algorithm"]) for x in sim["rows"]]
    assert got == [(d, w, a) for d in ("clos-2", "clos-3") for w in ("server", "rail")
                   for a in ("ring", "hierarchical")]
    hier = 2 * 7e6 / 4.5e11 + 2e-5
    for x in sim["rows"]:
        want = 3e-4 if x["algorithm"] == "ring" else hier
        assert x["seconds"] == approx(want, rel=1e-9)
        assert x["busbw_gbytes"] == approx(8e6 / want / 1e9 * 30 / 16, rel=1e-9)
    # server wiring: 16 endpoints on one leaf; rail wiring fills a leaf per rail:
    # 8 leaves x 32 down = 256 endpoints: 8 leaves + 4 spines, or 8 aggs + 4 cores
    sw = {(x["design"], x["wiring"]): x["switches"] for x in sim["rows"]}
    assert sw[("clos-2", "server")] == {"leaf": 1, "spine": 1}
    assert sw[("clos-2", "rail")] == {"leaf": 8, "spine": 4}
    assert sw[("clos-3", "rail")] == {"leaf": 8, "agg": 8, "core": 4}


def test_partial_servers_are_simulated_whole_with_a_note():
    r = D.plan(17, gpus_per_server=8, nics_per_server=1)
    sim = SIM.simulate_plan(r, [1 << 20], 0.0, 3600.0)
    assert sim["gpus"] == 24
    assert sim["notes"] == ["simulated as 24 GPUs: 3 whole servers of 8"]
    # one NIC: server wiring only; 8 GPUs: both algorithms
    assert {x["wiring"] for x in sim["rows"]} == {"server"}
    assert [x["algorithm"] for x in sim["rows"]][:2] == ["ring", "hierarchical"]


def test_the_no_fit_note_comes_first():
    r = D.plan(33, radix=4, gpus_per_server=1, nics_per_server=1)
    sim = SIM.simulate_plan(r, [4096], 0.0, 3600.0)
    assert sim["notes"] == ["radix 4 holds neither Clos; simulated at radix 6, the smallest "
                            "that holds a 3-tier one"]
    assert {x["radix"] for x in sim["rows"]} == {6} and sim["gpus"] == 33


def test_a_size_under_four_bytes_still_moves_one_float():
    """count = max(1, size // 4): 1 B and 4 B move one 4-byte element, and take the
    same time (2 steps of one 4-byte element at 5e10 B/s: 1.6e-10 s); 16 B moves
    two elements a step."""
    r = D.plan(2, gpus_per_server=1, nics_per_server=1)
    t = {s: SIM.simulate_plan(r, [s], 0.0, 3600.0, tech=BARE)["rows"][0]["seconds"]
         for s in (1, 4, 10, 16)}
    assert t[1] == t[4] == approx(1.6e-10, rel=1e-9)
    # 10 B is two whole 4-byte elements (the odd 2 B are not a float): one a step
    assert t[10] == approx(1.6e-10, rel=1e-9)
    assert t[16] == approx(3.2e-10, rel=1e-9)


def test_format_simulation_by_hand():
    rows = [dict(design="clos-2", radix=64, wiring="server", switches={"leaf": 1, "spine": 1},
                 algorithm="ring", size_bytes=4000000, seconds=8e-5, seconds_min=7e-5,
                 seconds_max=9e-5, algbw_gbytes=50.0, busbw_gbytes=93.75,
                 ideal_seconds=4e-5, fabric_factor=2.0),
            dict(design="clos-2", radix=64, wiring="server", switches={"leaf": 1, "spine": 1},
                 algorithm="hierarchical", size_bytes=8, seconds=1.25e-6, seconds_min=1e-6,
                 seconds_max=1.5e-6, algbw_gbytes=0.0064, busbw_gbytes=0.012,
                 ideal_seconds=1.25e-6, fabric_factor=1.0),
            dict(design="clos-3", radix=128, wiring="rail",
                 switches={"leaf": 1200, "agg": 8, "core": 4}, algorithm="ring",
                 size_bytes=4000000, seconds=8e-5, seconds_min=8e-5, seconds_max=8e-5,
                 algbw_gbytes=50.0, busbw_gbytes=93.75, ideal_seconds=8e-5, fabric_factor=1.0)]
    inp = {"gpus_per_server": 8, "nics_per_server": 8, "link_gbps": 400.0,
           "oversubscription": 1.5}
    sim = {"gpus": 16384, "intra_gbps": 3600.0, "hop_latency_s": 1e-6, "seeds": 3,
           "rows": rows, "notes": ["first", "second"], "network_title": "RoCEv2",
           "switch_latency_us": 0.6, "message_us": 0.0, "routing": "ecmp"}
    head = ("#  algorithm               size       time(us)  algbw(GB/s)  busbw(GB/s)"
            "      ideal(us)  fabric x")
    assert SIM.format_simulation(sim, inp).split("\n") == [
        "Simulated AllReduce on 16,384 GPUs (8 per server, 8 NIC(s) of 400 Gbit/s, in-server "
        "450 GB/s; RoCEv2: 0.6 us a switch, 0 us a message, 1 us more per hop, routing ecmp; "
        "oversubscription 1.5:1)",
        "# flow-level: max-min fair sharing, ECMP hashed per switch and flow, median of 3 "
        "draws; payload at line rate, no headers",
        "# note: first", "# note: second",
        "",
        "# clos-2, server per leaf wiring, radix 64 (1 leaf + 1 spine)",
        head + "        ECMP draws (us)",
        "   ring                 4000000           80.0        50.00        93.75"
        "           40.0      2.00        70.0-90.0      ",
        "   hierarchical               8            1.2         0.01         0.01"
        "            1.2      1.00         1.0-1.5       ",
        "",
        "# clos-3, rail-optimized wiring, radix 128 (1,200 leaf + 8 agg + 4 core)",
        head + "        ECMP draws (us)",
        "   ring                 4000000           80.0        50.00        93.75"
        "           80.0      1.00        80.0-80.0      "]
    sim["seeds"] = 1
    sim["notes"] = []
    lines = SIM.format_simulation(sim, inp).split("\n")
    assert lines[1] == ("# flow-level: max-min fair sharing, ECMP hashed per switch and flow, "
                        "seed 0; payload at line rate, no headers")
    assert lines[2] == "" and lines[4] == head
    assert lines[5] == ("   ring                 4000000           80.0        50.00        93.75"
                        "           40.0      2.00")


# --------------------------------------------------------------------------
# steptime.py: the step priced with given per-bucket AllReduce times

def _sim_rows(design, wiring, algorithm, seconds_by_size, radix=64):
    return [{"design": design, "radix": radix, "wiring": wiring, "algorithm": algorithm,
             "size_bytes": size, "seconds": t} for size, t in seconds_by_size.items()]


BUCKETS = {1048576: 1e-3, 951424: 5e-4}    # 2e6 B of bfloat16 gradients in 1 MiB buckets


def test_bucket_sizes_of_a_million_parameters():
    args = SimpleNamespace(params=1e6, layers=2, tokens_per_gpu=1, bucket=1048576)
    assert ST.bucket_sizes(args, D.plan(16)) == [951424, 1048576]   # 2,000,000 - 1,048,576


def test_training_with_comm_hierarchical_by_hand():
    """1e6 params, 1 token a GPU, 16 GPUs at 2e15 x 0.5: compute 6e6/1e15 = 6e-9 s a
    step; 1e24 / (6e6 x 16) steps; per bucket 1e-3 s (1 MiB) and 5e-4 s (the rest);
    bandwidth time of a 1 MiB bucket: 2 x 131,072 B a rail at 5e10 B/s."""
    args = SimpleNamespace(params=1e6, layers=2, tokens_per_gpu=1, bucket=1048576)
    result = D.plan(16, training=TR.TrainingRun(utilisation=0.5))
    rows = (_sim_rows("clos-2", "server", "ring", {1048576: 9.0, 951424: 9.0})
            + _sim_rows("clos-2", "server", "hierarchical", BUCKETS)
            + _sim_rows("clos-3", "rail", "hierarchical", {1048576: 2e-3, 951424: 1e-3}, 128))
    t = ST.training_with_comm(args, result, {"gpus": 16, "rows": rows})
    steps = 1e24 / (6e6 * 16)
    assert t["params"] == 1000000 and t["layers"] == 2 and t["tokens_per_gpu"] == 1
    assert t["gradient_type"] == "bfloat16" and t["bucket_bytes"] == 1048576
    assert t["buckets"] == 2 and t["gradient_bytes"] == 2000000 and t["gpus"] == 16
    assert t["compute_s"] == approx(6e-9, rel=1e-9)
    assert t["steps"] == approx(steps, rel=1e-12)
    assert t["days_compute_only"] == approx(steps * 6e-9 / 86400, rel=1e-9)
    assert [(r["design"], r["radix"], r["wiring"]) for r in t["rows"]] == [
        ("clos-2", 64, "server"), ("clos-3", 128, "rail")]
    for r, (big, small) in zip(t["rows"], [(1e-3, 5e-4), (2e-3, 1e-3)]):
        assert r["algorithm"] == "hierarchical"
        assert r["bucket_bandwidth_s"] == approx(5.24288e-6, rel=1e-12)
        assert r["bucket_allreduce_s"] == big
        assert r["comm_s"] == approx(big + small, rel=1e-12)
        assert r["step_no_overlap_s"] == approx(6e-9 + big + small, rel=1e-9)
        # compute is tiny: the step is the communication and a sliver of compute
        assert big + small <= r["step_s"] <= 6e-9 + big + small + 1e-15
        assert r["exposed_s"] == approx(r["step_s"] - 6e-9, rel=1e-9)
        assert 0 <= r["overlap_efficiency"] <= 1
        assert r["days"] == approx(steps * r["step_s"] / 86400, rel=1e-12)
        assert r["days_no_overlap"] == approx(steps * (6e-9 + big + small) / 86400,
                                                     rel=1e-9)


def test_training_with_comm_ring_with_one_gpu_a_server():
    """1 GPU a server: the ring rows are the ones used, and the whole 1 MiB bucket
    goes through the one NIC: 2 x 1,048,576 B at 5e10 B/s."""
    args = SimpleNamespace(params=1e6, layers=2, tokens_per_gpu=3, bucket=1048576)
    result = D.plan(16, gpus_per_server=1, nics_per_server=1, link_gbps=100.0)
    rows = (_sim_rows("clos-2", "server", "hierarchical", {1048576: 9.0, 951424: 9.0})
            + _sim_rows("clos-2", "server", "ring", BUCKETS))
    t = ST.training_with_comm(args, result, {"gpus": 16, "rows": rows})
    assert t["compute_s"] == approx(6e6 * 3 / 2e15, rel=1e-9)
    assert t["steps"] == approx(1e24 / (6e6 * 3 * 16), rel=1e-12)
    (r,) = t["rows"]
    assert r["algorithm"] == "ring"
    assert r["bucket_bandwidth_s"] == approx(2 * 1048576 / 1.25e10, rel=1e-12)
    assert r["comm_s"] == approx(1.5e-3, rel=1e-12)


def test_a_step_whose_compute_hides_the_communication():
    """Compute of 6 x 1e6 x 1e6 tokens / 2e15 = 3 ms against 1.5 ms of AllReduce: with
    20 layers, so the first bucket (the last 10.5 layers' gradients) is AllReduced
    while the backward pass goes on; without overlap all of it adds."""
    args = SimpleNamespace(params=1e6, layers=20, tokens_per_gpu=10 ** 6, bucket=1048576)
    rows = _sim_rows("clos-2", "server", "hierarchical", BUCKETS)
    t = ST.training_with_comm(args, D.plan(16), {"gpus": 16, "rows": rows})
    (r,) = t["rows"]
    assert t["compute_s"] == approx(3e-3, rel=1e-9)
    assert r["step_no_overlap_s"] == approx(4.5e-3, rel=1e-9)
    assert 3e-3 <= r["step_s"] < 4.5e-3 and r["exposed_s"] < 1.5e-3
    assert r["overlap_efficiency"] > 0
    assert r["days"] < r["days_no_overlap"]


def test_the_step_flags_help_as_printed(capsys):
    """The --help text of the step's flags (argparse rewraps it: compare words)."""
    import planner as P
    try:
        P.main(["--help"])
    except SystemExit:
        pass
    words = " ".join(capsys.readouterr().out.split())
    for text in [
        "--params PARAMS model parameters (e.g. 70e9): also print the training step with "
        "communication and the days the FLOPs take (implies --simulate)",
        "--layers LAYERS with --params: layers, 1 to 1000 (default 80)",
        "--tokens-per-gpu TOKENS_PER_GPU with --params: tokens per GPU per step (default 4096)",
        "--bucket BUCKET with --params: gradient bucket size, 1K to 1G (default 25M, "
        "PyTorch DDP's)",
    ]:
        assert text in words, text


def test_the_step_flags_parse_their_types(capsys):
    """--params takes a number (7.5e8), --layers a whole number; the JSON shows them."""
    import json

    import planner as P
    assert P.main(["--gpus", "16", "--params", "7.5e8", "--layers", "3", "--tokens-per-gpu",
                   "2", "--bucket", "256M", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["training_step"]
    assert t["params"] == 750000000 and t["layers"] == 3 and t["tokens_per_gpu"] == 2
    assert t["bucket_bytes"] == 256 << 20 and t["buckets"] == 6   # 1.5e9 B / 268,435,456


def test_ecmp_draws_median_range_and_ideal_fabric():
    """128 GPUs (16 servers of 8, 8 NICs), radix 8 at 3:1 (6 down, 2 up): only a
    3-tier Clos holds 128 endpoints (radix 8 clos-2 holds 48). The ideal fabric by
    hand: ring over 128 ranks of 1 MiB, 254 steps of 8,192 B at 5e10 B/s =
    4.161536e-5 s; hierarchical: 2 x 7 steps of 131,072 B at 4.5e11 B/s plus 30
    steps of 8,192 B at 5e10 B/s. Switches: server wiring 128 endpoints: 22 leaves,
    44 up cables, 11 aggs, 6 cores; rail wiring fills 24 leaves (144 endpoints):
    48 cables, 12 aggs, 6 cores. Each row's time is the median of the 5 ECMP
    draws (drawn here with the simulator, seed by seed)."""
    from sim.clos import ClosNetwork, ClosShape
    from sim.phases import allreduce_phases, phase_seconds

    r = D.plan(128, radix=8, gpus_per_server=8, nics_per_server=8, oversubscription=3.0)
    sim = SIM.simulate_plan(r, [1 << 20], 0.0, 3600.0, seeds=5, tech=BARE)
    assert sim["seeds"] == 5
    rows = {(x["wiring"], x["algorithm"]): x for x in sim["rows"]}
    assert set(rows) == {(w, a) for w in ("server", "rail") for a in ("ring", "hierarchical")}
    ideal = {"ring": 254 * 8192 / 5e10, "hierarchical": 2 * 7 * 131072 / 4.5e11 + 30 * 8192 / 5e10}
    for (wiring, algorithm), x in rows.items():
        assert x["design"] == "clos-3" and x["radix"] == 8
        assert x["ideal_seconds"] == approx(ideal[algorithm], rel=1e-9)
        shape = ClosShape(servers=16, gpus=8, nics=8, down=6, up=2, tiers=3, radix=8,
                          wiring=wiring, nic_bps=4e11, fabric_bps=4e11, intra_bps=3.6e12)
        phases = allreduce_phases(algorithm, 128, 262144, 8)
        draws = sorted(phase_seconds(ClosNetwork(shape, seed), phases, 1.0, 0.0)
                       for seed in range(5))
        assert x["seconds"] == draws[2]
        assert x["seconds_min"] == draws[0] and x["seconds_max"] == draws[4]
        assert x["fabric_factor"] == approx(draws[2] / ideal[algorithm], rel=1e-9)
        assert x["algbw_gbytes"] == approx((1 << 20) / draws[2] / 1e9, rel=1e-12)
        assert x["busbw_gbytes"] == approx((1 << 20) / draws[2] / 1e9 * 254 / 128,
                                                  rel=1e-12)
    # the fabric costs something here, and the draws differ
    assert rows[("rail", "ring")]["seconds_min"] < rows[("rail", "ring")]["seconds_max"]
    assert rows[("rail", "ring")]["fabric_factor"] > 1
    assert rows[("server", "ring")]["switches"] == {"leaf": 22, "agg": 11, "core": 6}
    assert rows[("rail", "ring")]["switches"] == {"leaf": 24, "agg": 12, "core": 6}


def test_fit_picks_the_least_squared_error_not_the_least_signed_error():
    """(1,1,1), (2,3,4): unconstrained a = -1, b = 2. With a = 0: b = 13/10,
    residuals -0.3, +0.1 (squared error 0.1); with b = 0: a = 9/5, residuals -0.8,
    +0.4 (squared error 0.8, but a more negative signed or cubed sum)."""
    a, b = CAL.fit_alpha_beta([(1, 1, 1.0), (2, 3, 4.0)])
    assert a == 0.0 and b == approx(1.3, rel=1e-12)


def test_fit_with_columns_of_norm_below_one():
    """(0.5,0,1), (0,0.5,2), (0.5,0.5,4): normal equations x4 are
    [[2,1],[1,2]] (a,b) = (10,12): a = 8/3, b = 14/3."""
    a, b = CAL.fit_alpha_beta([(0.5, 0, 1.0), (0, 0.5, 2.0), (0.5, 0.5, 4.0)])
    assert a == approx(8 / 3, rel=1e-12) and b == approx(14 / 3, rel=1e-12)
    # one column only, of norm below one: (0, 0.5, 1): b = 0.5/0.25 = 2; (0.5, 0, 1): a = 2
    assert CAL.fit_alpha_beta([(0, 0.5, 1.0)]) == (0.0, approx(2.0, rel=1e-12))
    assert CAL.fit_alpha_beta([(0.5, 0, 1.0)]) == (approx(2.0, rel=1e-12), 0.0)


def test_two_ecmp_draws_print_their_range_in_microseconds():
    row = dict(design="clos-2", radix=64, wiring="server", switches={"leaf": 1, "spine": 1},
               algorithm="ring", size_bytes=4000000, seconds=0.5, seconds_min=0.25,
               seconds_max=0.75, algbw_gbytes=0.008, busbw_gbytes=0.015,
               ideal_seconds=0.25, fabric_factor=2.0)
    inp = {"gpus_per_server": 8, "nics_per_server": 8, "link_gbps": 400.0,
           "oversubscription": 1.0}
    sim = {"gpus": 16, "intra_gbps": 3600.0, "hop_latency_s": 0.5, "seeds": 2,
           "rows": [row], "notes": [], "network_title": "bare", "switch_latency_us": 0.0,
           "message_us": 0.0, "routing": "ecmp"}
    lines = SIM.format_simulation(sim, inp).split("\n")
    assert lines[0].endswith("in-server 450 GB/s; bare: 0 us a switch, 0 us a message, 500,000 us "
                             "more per hop, routing ecmp; oversubscription 1:1)")
    assert ", median of 2 draws;" in lines[1]
    assert lines[-2].endswith("fabric x        ECMP draws (us)")
    assert lines[-1] == ("   ring                 4000000       500000.0         0.01         0.01"
                         "       250000.0      2.00    250000.0-750000.0  ")


def test_format_training_prints_whole_pflops_without_decimals():
    """1.5e17 FLOP/s is exactly 150 PFLOP/s: printed '150', not '150.0'."""
    text = ST.format_training(dict(TRAINING, rows=[]), dict(STEP_INPUTS, gpu_flops=1.5e17))
    assert "(6 x params x tokens at 150 PFLOP/s x 0.5)" in text.split("\n")[1]


def test_a_bucket_just_over_ten_times_its_bandwidth_time_is_latency_bound():
    """10.5 x 0.0001 s: latency-bound (more than 10x)."""
    rows = [_row(bucket_allreduce_s=0.00105, bucket_bandwidth_s=0.0001)]
    text = ST.format_training(dict(TRAINING, rows=rows), STEP_INPUTS)
    assert "# latency-bound: a bucket's bytes need 0.1 ms at the NIC's rate and its " \
           "AllReduce takes 1.05 ms" in text


def test_step_compute_time_is_exact():
    """6 x 1e6 params x 1 token / (2e15 x 0.5) = 6e-9 s, to the last few bits
    (a TFLOP/s is exactly 1e12 FLOP/s)."""
    args = SimpleNamespace(params=1e6, layers=2, tokens_per_gpu=1, bucket=1048576)
    rows = _sim_rows("clos-2", "server", "hierarchical", BUCKETS)
    half_used = D.plan(16, training=TR.TrainingRun(utilisation=0.5))
    t = ST.training_with_comm(args, half_used, {"gpus": 16, "rows": rows})
    assert t["compute_s"] == approx(6e-9, rel=1e-14)


def test_two_long_allreduces_end_the_step_by_hand():
    """Two 10 ms AllReduces share one fabric: the step is at least their 20 ms. By
    hand: compute 3 ms (forward 1, backward 2 over 20 layers, 0.1 ms a layer); the
    first 1 MiB bucket holds the last 10.49 layers' gradients, ready after 11
    layers' backward, at 1 + 1.1 = 2.1 ms; the fabric is then busy 20 ms: 22.1 ms."""
    args = SimpleNamespace(params=1e6, layers=20, tokens_per_gpu=10 ** 6, bucket=1048576)
    rows = _sim_rows("clos-2", "server", "hierarchical", {1048576: 1e-2, 951424: 1e-2})
    t = ST.training_with_comm(args, D.plan(16), {"gpus": 16, "rows": rows})
    (r,) = t["rows"]
    assert r["step_s"] >= 20e-3
    assert r["step_s"] == approx(22.1e-3, rel=1e-9)
    assert r["step_no_overlap_s"] == approx(23e-3, rel=1e-9)


def test_two_gpus_and_two_nics_a_server_get_both_wirings_and_algorithms():
    r = D.plan(8, gpus_per_server=2, nics_per_server=2)
    sim = SIM.simulate_plan(r, [4096], 0.0, 3600.0)
    assert {(x["wiring"], x["algorithm"]) for x in sim["rows"]} == {
        (w, a) for w in ("server", "rail") for a in ("ring", "hierarchical")}
    args = SimpleNamespace(params=1e6, layers=2, tokens_per_gpu=1, bucket=1048576)
    rows = (_sim_rows("clos-2", "server", "ring", {1048576: 9.0, 951424: 9.0})
            + _sim_rows("clos-2", "server", "hierarchical", BUCKETS))
    (row,) = ST.training_with_comm(args, r, {"gpus": 8, "rows": rows})["rows"]
    assert row["algorithm"] == "hierarchical" and row["comm_s"] == approx(1.5e-3, rel=1e-12)
    # per rail: 1 MiB / 2 GPUs, twice, at 5e10 B/s
    assert row["bucket_bandwidth_s"] == approx(2 * 524288 / 5e10, rel=1e-12)


def test_a_2_tier_clos_is_simulated_with_2_tiers():
    """8 servers of 1 GPU at radix 4 (2 down): 4 leaves. In the 2-tier Clos the
    farthest servers are 3 switches apart; in the 3-tier one (pods of 2 leaves)
    5: with 1 us a hop the 2-tier ring is faster, on the same links."""
    r = D.plan(8, radix=4, gpus_per_server=1, nics_per_server=1)
    rows = {x["design"]: x for x in SIM.simulate_plan(r, [4096], 1e-6, 3600.0)["rows"]}
    assert set(rows) == {"clos-2", "clos-3"}
    assert rows["clos-2"]["seconds"] < rows["clos-3"]["seconds"]
