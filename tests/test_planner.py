"""The capacity planner: the article's figures, exact switch counts at the Clos
limits, internal consistency of the port arithmetic, the alpha-beta AllReduce
model and the command line. Pure arithmetic: no root, no network."""

import json
import math
import tracemalloc
from pathlib import Path

import pytest

import planner as P


def designs(result):
    return {d.name: d for d in result["designs"]}


# --- the article's figures --------------------------------------------------------

def test_training_arithmetic_matches_the_article():
    t = P.training_arithmetic(1e24, 2e15)
    assert t["flops_per_day"] == pytest.approx(1.728e20)
    assert t["flops_per_day"] == pytest.approx(1.7e20, rel=0.02)
    assert t["seconds_one_gpu"] == pytest.approx(5e8)
    assert t["years_one_gpu"] == pytest.approx(15.84, rel=1e-3)
    assert t["years_one_gpu"] == pytest.approx(16, rel=0.05)
    assert t["days_one_gpu"] == pytest.approx(5e8 / 86400)


def test_training_on_many_gpus_scales_linearly_and_by_utilisation():
    t = P.training_arithmetic(1e24, 2e15, gpus=200_000)
    assert t["seconds_all_gpus"] == pytest.approx(2500.0)
    assert t["days_all_gpus"] == pytest.approx(2500.0 / 86400)
    half = P.training_arithmetic(1e24, 2e15, gpus=200_000, utilisation=0.5)
    assert half["seconds_all_gpus"] == pytest.approx(5000.0)
    assert half["seconds_one_gpu"] == t["seconds_one_gpu"]


def test_full_mesh_of_200000_needs_about_2e10_cables():
    d = designs(P.plan(200_000))["full-mesh"]
    assert d.endpoints == 200_000
    assert d.cables == 19_999_900_000
    assert d.cables == pytest.approx(2e10, rel=0.01)
    assert d.ports_per_endpoint == 199_999
    assert d.switches == 0 and d.switch_ports == 0 and d.max_hops == 0
    assert not d.fits and "199,999 ports" in d.reason
    assert d.bisection_gbps == pytest.approx(100_000 ** 2 * 400.0)
    assert d.max_endpoints == 65


def test_full_mesh_fits_when_the_port_budget_allows():
    d = designs(P.plan(64, radix=64, gpus_per_server=1, nics_per_server=1))["full-mesh"]
    assert d.fits and d.reason == ""
    assert d.cables == 64 * 63 // 2 and d.ports_per_endpoint == 63


def test_single_switch_does_not_fit_200000_at_radix_64():
    d = designs(P.plan(200_000, radix=64))["single-switch"]
    assert not d.fits and d.reason
    assert d.switches == 1 and d.switch_ports == 200_000 and d.cables == 200_000
    assert d.max_hops == 1 and d.max_endpoints == 64
    assert d.bisection_gbps == pytest.approx(100_000 * 400.0)


def test_single_switch_fits_when_small():
    d = designs(P.plan(64, radix=64, gpus_per_server=8, nics_per_server=8))["single-switch"]
    assert d.fits and d.reason == "" and d.switch_ports == 64


# --- Clos limits and exact counts ---------------------------------------------------

def test_clos2_at_its_limit_of_2048_endpoints_at_radix_64():
    d = designs(P.plan(2048, radix=64))["clos-2"]
    assert d.max_endpoints == 2048 == 64 ** 2 // 2
    assert d.fits and d.reason == ""
    assert d.switches_by_tier == {"leaf": 64, "spine": 32}
    assert d.switches == 96
    assert d.cables == 2048 + 64 * 32
    assert d.switch_ports == 96 * 64          # every port in use at the limit
    assert d.max_hops == 3 and d.oversubscription == 1.0


def test_clos2_one_endpoint_past_its_limit_does_not_fit():
    d = designs(P.plan(2049, radix=64, gpus_per_server=1, nics_per_server=1))["clos-2"]
    assert not d.fits
    assert "2,048" in d.reason and "radix" in d.reason
    assert d.needed_radix == 66


def test_clos3_at_its_limit_of_65536_endpoints_at_radix_64():
    d = designs(P.plan(65_536, radix=64))["clos-3"]
    assert d.max_endpoints == 65_536 == 64 ** 3 // 4
    assert d.fits and d.reason == ""
    assert d.switches_by_tier == {"leaf": 2048, "agg": 2048, "core": 1024}
    assert d.switches == 5 * 64 ** 2 // 4 == 5120
    assert d.switch_ports == 5120 * 64        # every port in use at the limit
    assert d.max_hops == 5


@pytest.mark.parametrize("radix", [64, 128])
@pytest.mark.parametrize("oversubscription", [1.0, 2.0, 3.0])
@pytest.mark.parametrize("name", ["clos-2", "clos-3"])
def test_clos_counts_are_internally_consistent_for_200000_gpus(name, radix, oversubscription):
    result = P.plan(200_000, radix=radix, oversubscription=oversubscription)
    d = designs(result)[name]
    E = result["endpoints"]
    assert E == 200_000
    assert d.switches == sum(d.switches_by_tier.values())
    assert d.switch_ports <= d.switches * radix
    assert d.switch_ports == E + 2 * (d.cables - E)
    down = math.floor(radix * oversubscription / (1 + oversubscription))
    assert d.switches_by_tier["leaf"] * down >= E
    assert d.oversubscription == pytest.approx(down / (radix - down))
    assert d.bisection_gbps == pytest.approx(E / 2 * 400.0 / d.oversubscription)
    assert d.fits == (E <= d.max_endpoints)
    assert d.fits == (d.reason == "")
    assert d.needed_radix % 2 == 0


def test_200000_gpus_at_radix_64_do_not_fit_clos3():
    d = designs(P.plan(200_000, radix=64))["clos-3"]
    assert not d.fits
    assert "65,536" in d.reason and "radix" in d.reason
    assert d.switches_by_tier == {"leaf": 6250, "agg": 6250, "core": 3125}
    assert d.needed_radix == 94


def test_200000_gpus_at_radix_128_fit_clos3():
    d = designs(P.plan(200_000, radix=128))["clos-3"]
    assert d.max_endpoints == 128 ** 3 // 4
    assert d.fits and d.reason == ""


def test_needed_radix_is_the_smallest_that_fits():
    for name in P.DESIGNS:
        for gpus in (2, 100, 2049, 65_537, 200_000):
            r = P.min_radix(name, gpus, gpus_per_server=1, nics_per_server=1)
            assert r % 2 == 0 and r >= 4
            if r <= P.MAX_RADIX:
                assert designs(P.plan(gpus, radix=r, gpus_per_server=1, nics_per_server=1))[name].fits
            if r - 2 >= 4 and r - 2 <= P.MAX_RADIX:
                assert not designs(P.plan(gpus, radix=r - 2, gpus_per_server=1,
                                          nics_per_server=1))[name].fits


def test_scale_up_reduces_the_endpoints():
    one_nic = P.plan(200_000, radix=64, gpus_per_server=8, nics_per_server=1)
    assert one_nic["servers"] == 25_000 and one_nic["endpoints"] == 25_000
    eight = P.plan(200_000, radix=64, gpus_per_server=8, nics_per_server=8)
    assert eight["endpoints"] == 200_000
    assert designs(one_nic)["full-mesh"].cables < designs(eight)["full-mesh"].cables / 60
    assert designs(one_nic)["clos-3"].switches < designs(eight)["clos-3"].switches


def test_servers_round_up():
    result = P.plan(10, gpus_per_server=8, nics_per_server=2)
    assert result["servers"] == 2 and result["endpoints"] == 4


def test_ten_million_gpus_are_counted_not_enumerated():
    # The counts come from formulas: planning 10,000,000 endpoints allocates a
    # few kilobytes, where a list of them alone would take tens of megabytes.
    # (How fast it answers is measured in bench/scale_bench.py, not asserted.)
    P.plan(2, radix=4)                                  # imports and caches warmed
    tracemalloc.start()
    try:
        result = P.plan(10_000_000, radix=4, gpus_per_server=1, nics_per_server=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    d = designs(result)
    assert d["full-mesh"].cables == 10_000_000 * 9_999_999 // 2
    assert d["clos-2"].switches_by_tier == {"leaf": 5_000_000, "spine": 2_500_000}
    assert d["clos-3"].switches_by_tier == {"leaf": 5_000_000, "agg": 5_000_000, "core": 2_500_000}
    assert (d["clos-2"].needed_radix, d["clos-3"].needed_radix) == (4474, 342)
    assert not any(x.fits for x in d.values())


def test_plan_shape_and_design_order():
    result = P.plan(1000)
    assert set(result) == {"inputs", "servers", "endpoints", "designs", "training"}
    assert [d.name for d in result["designs"]] == list(P.DESIGNS)
    assert result["training"]["gpus"] == 1000
    d = result["designs"][2].to_dict()
    assert d["name"] == "clos-2" and isinstance(d["switches_by_tier"], dict)


@pytest.mark.parametrize("kwargs,word", [
    ({"gpus": 1}, "gpus"),
    ({"gpus": 10_000_001}, "gpus"),
    ({"gpus": 2.5}, "gpus"),
    ({"gpus": True}, "gpus"),
    ({"gpus": "100"}, "gpus"),
    ({"gpus": 100, "radix": 7}, "radix"),
    ({"gpus": 100, "radix": 2}, "radix"),
    ({"gpus": 100, "radix": 2048}, "radix"),
    ({"gpus": 100, "gpus_per_server": 0}, "gpus_per_server"),
    ({"gpus": 100, "gpus_per_server": 73}, "gpus_per_server"),
    ({"gpus": 100, "gpus_per_server": 4, "nics_per_server": 5}, "nics_per_server"),
    ({"gpus": 100, "nics_per_server": 0}, "nics_per_server"),
    ({"gpus": 100, "link_gbps": 0}, "link_gbps"),
    ({"gpus": 100, "link_gbps": float("inf")}, "link_gbps"),
    ({"gpus": 100, "oversubscription": 0.5}, "oversubscription"),
    ({"gpus": 100, "oversubscription": float("nan")}, "oversubscription"),
])
def test_bad_inputs_raise_one_clear_sentence(kwargs, word):
    with pytest.raises(P.PlanError) as info:
        P.plan(**kwargs)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert message.startswith(word + " must be") and "\n" not in message


def test_whole_floats_are_accepted():
    assert P.plan(2e5, radix=64.0)["inputs"]["gpus"] == 200_000


# --- AllReduce ----------------------------------------------------------------------

def test_ring_allreduce_by_hand():
    # 2*3*10us + 2*3/4 * 1e6 B * 1 ns/B = 60 us + 1.5 ms
    assert P.ring_allreduce_seconds(4, 1e6, 1e-5, 1e-9) == pytest.approx(1.56e-3)
    assert P.ring_allreduce_seconds(1, 1e6, 1e-5, 1e-9) == 0.0
    assert P.ring_allreduce_seconds(2, 1000, 0, 1e-9) == pytest.approx(1e-6)


def test_hierarchical_allreduce_by_hand():
    # intra RS: 7*1us + 7/8*8e6*0.1ns = 7 us + 700 us, and the AG the same
    # inter ring on 1e6 B over 4 nodes: 6*10us + 1.5*1e6*1ns = 60 us + 1.5 ms
    # pipelined: 7 + 60 + 7 us of latency, max(700 + 700 us, 1.5 ms) of bytes
    t = P.hierarchical_allreduce_seconds(4, 8, 8e6, 1e-6, 1e-10, 1e-5, 1e-9)
    assert t == pytest.approx(74e-6 + 1.5e-3)
    assert t < 2 * 707e-6 + 1.56e-3          # not the three phases one after the other


def test_hierarchical_degenerates_to_its_parts():
    S = 3e6
    only_intra = P.hierarchical_allreduce_seconds(1, 8, S, 1e-6, 1e-10, 1e-5, 1e-9)
    assert only_intra == pytest.approx(2 * (7e-6 + 7 / 8 * S * 1e-10))
    flat = P.hierarchical_allreduce_seconds(16, 1, S, 1e-6, 1e-10, 1e-5, 1e-9)
    assert flat == pytest.approx(P.ring_allreduce_seconds(16, S, 1e-5, 1e-9))


def test_fit_alpha_beta_recovers_known_values():
    alpha, beta = 5e-6, 8 / 400e9
    points = [(steps, size, steps * alpha + size * beta)
              for steps in (2, 6, 14, 30) for size in (1 << 10, 1 << 20, 1 << 26)]
    a, b = P.fit_alpha_beta(points)
    assert a == pytest.approx(alpha, rel=1e-6)
    assert b == pytest.approx(beta, rel=1e-6)


def test_fit_alpha_beta_keeps_both_non_negative():
    # Steps grow while time falls: the unconstrained alpha would be negative.
    a, b = P.fit_alpha_beta([(1, 1000, 2e-3), (10, 1000, 1e-3), (5, 4000, 4e-3)])
    assert a == 0.0 and b > 0
    # Pure latency: bytes explain nothing.
    a, b = P.fit_alpha_beta([(2, 1000, 2e-5), (4, 0, 4e-5), (8, 10, 8e-5)])
    assert b >= 0 and a == pytest.approx(1e-5, rel=1e-3)


def test_fit_alpha_beta_falls_back_with_one_point_or_proportional_columns():
    assert P.fit_alpha_beta([(6, 1e6, 2e-3)]) == (0.0, pytest.approx(2e-9))
    a, b = P.fit_alpha_beta([(2, 1000, 1e-6), (4, 2000, 2e-6)])
    assert a == 0.0 and b == pytest.approx(1e-9)


def test_fit_alpha_beta_with_constant_steps_is_a_line_fit():
    a, b = P.fit_alpha_beta([(6, 1000, 6e-5 + 1e-6), (6, 2000, 6e-5 + 2e-6)])
    assert a == pytest.approx(1e-5) and b == pytest.approx(1e-9)


@pytest.mark.parametrize("points", [[], None, [(1, 2)], [(0, 0, 1.0)], [(1, -5, 1.0)]])
def test_fit_alpha_beta_rejects_unusable_points(points):
    with pytest.raises(P.PlanError):
        P.fit_alpha_beta(points)


def test_predict_allreduce_from_a_plan():
    result = P.plan(64, link_gbps=400)
    ar = P.predict_allreduce(result, 1 << 30, P.Links(alpha_s=5e-6, intra_gbps=3600))
    beta = 8 / 400e9
    assert ar["beta_s_per_byte"] == pytest.approx(beta)
    assert ar["nodes"] == 8 and ar["gpus_per_node"] == 8
    assert ar["ring_seconds"] == pytest.approx(P.ring_allreduce_seconds(64, 1 << 30, 5e-6, beta))
    # 8 servers of 8: latencies 7 + 14 + 7 steps of 5 us; bytes, the larger of
    # in-server 2*7/8*2^30 B at 3,600 Gbit/s (4.18 ms) and a ring over 8 on 2^27 B
    # at 400 (2*7/8*2^27*2e-11 = 4.70 ms)
    want = 28 * 5e-6 + 2 * 7 / 8 * (1 << 27) * beta
    assert ar["hierarchical_seconds"] == pytest.approx(want)
    assert ar["hierarchical_seconds"] < ar["ring_seconds"]


def test_predict_allreduce_efficiency_and_shared_nics():
    full = P.predict_allreduce(64, 1e9, P.Links(alpha_s=0, link_gbps=100))
    half = P.predict_allreduce(64, 1e9, P.Links(alpha_s=0, link_gbps=100, efficiency=0.5))
    assert half["ring_seconds"] == pytest.approx(2 * full["ring_seconds"])
    shared = P.predict_allreduce(64, 1e9, P.Links(alpha_s=0, link_gbps=100), nics_per_server=1)
    assert shared["inter_beta_s_per_byte"] == pytest.approx(8 * full["inter_beta_s_per_byte"])


# --- report and command line --------------------------------------------------------

def test_format_plan_is_readable():
    result = P.plan(200_000, radix=64)
    result["allreduce"] = P.predict_allreduce(result, 1 << 30)
    text = P.format_plan(result)
    for name in P.DESIGNS:
        assert name in text
    assert "19,999,900,000" in text and "2.0e10" in text
    assert "2.0e15" in text and "1.7e20" in text and "15.8 years" in text
    assert "200,000 GPUs" in text and "hierarchical" in text


def test_format_plan_accepts_the_json_form():
    result = P.plan(1000)
    as_json = json.loads(json.dumps({**result, "designs": [d.to_dict() for d in result["designs"]]}))
    assert P.format_plan(as_json) == P.format_plan(result)


@pytest.mark.parametrize("argv,word", [
    (["--gpus", "1"], "gpus"),
    (["--gpus", "100", "--radix", "7"], "radix"),
    (["--gpus", "lots"], "--gpus"),
    (["--gpus", "100", "--gradient-bytes", "1X"], "gradient"),
    (["--gpus", "100", "--oversubscription", "0.9"], "oversubscription"),
    (["--radix", "64"], "--gpus"),
])
def test_cli_bad_values_give_one_line_and_2(argv, word, capsys):
    assert P.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and word in err


def test_cli_json_parses(capsys):
    argv = ["--gpus", "200000", "--radix", "64", "--nics-per-server", "1", "--gradient-bytes", "512M",
            "--alpha-us", "5", "--gpu-pflops", "2", "--flops", "1e24", "--json"]
    assert P.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["endpoints"] == 25_000
    assert [d["name"] for d in data["designs"]] == list(P.DESIGNS)
    assert data["allreduce"]["gradient_bytes"] == 512 << 20
    assert data["training"]["years_one_gpu"] == pytest.approx(15.84, rel=1e-3)


def test_cli_report(capsys):
    assert P.main(["--gpus", "200000"]) == 0
    assert "clos-3" in capsys.readouterr().out


@pytest.mark.parametrize("text,value", [("1G", 1 << 30), ("512M", 512 << 20), ("1048576", 1 << 20),
                                        ("64K", 1 << 16), ("1GiB", 1 << 30), ("2t", 2 << 40),
                                        ("1.5K", 1536), (65536, 65536),
                                        ("1.2G", 1288490189), ("1.5", 2)])   # rounded to bytes
def test_parse_bytes(text, value):
    assert P.parse_bytes(text) == value


@pytest.mark.parametrize("text,words", [("1X", "a size such as"), ("0.4", "from 1 byte to 1 PiB"),
                                        ("-1", "a size such as"), ("0", "from 1 byte to 1 PiB"),
                                        ("2000T", "from 1 byte to 1 PiB")])
def test_parse_bytes_refuses_what_is_not_a_size_in_range(text, words):
    with pytest.raises(P.PlanError) as info:
        P.parse_bytes(text)
    assert str(info.value).startswith("gradient bytes must be") and words in str(info.value)


# --- on an emulated fabric -----------------------------------------------------------

from topologies.fabric import load_fabric as _load_fabric  # noqa: E402

_MULTI = Path(__file__).parent.parent / "topologies" / "multi-gpu.yaml"


def _synthetic_results(folder, alpha, kappa, sizes=(65536, 262144, 1048576)):
    """A results folder as run_topology.py writes it, with times made from a
    known alpha and kappa."""
    fabric = _load_fabric(_MULTI)
    runs = []
    for size in sizes:
        for algorithm in ("ring", "hierarchical"):
            m = P.fabric_model(fabric, algorithm, size)
            runs.append({"collective": "allreduce", "algorithm": algorithm, "size_bytes": size,
                         "ranks": 16, "time_s": alpha * m["steps"] + kappa * m["bandwidth_s"]})
    folder.mkdir(exist_ok=True)
    (folder / "fabric.json").write_text(json.dumps(fabric.spec))
    (folder / "summary.json").write_text(json.dumps(
        {"source": str(_MULTI), "collectives": {"runs": runs}}))
    return folder


def test_fabric_model_reads_the_schedule_of_the_yaml():
    fabric = _load_fabric(_MULTI)                       # 4 servers x 4 GPUs, 1 NIC each
    ring = P.fabric_model(fabric, "ring", 1 << 20)
    hier = P.fabric_model(fabric, "hierarchical", 1 << 20)
    assert ring["steps"] == 2 * 15 and hier["steps"] == 3 + 2 * 3 + 3
    assert 0 < hier["bandwidth_s"] < ring["bandwidth_s"]


def test_calibration_recovers_alpha_and_kappa(tmp_path):
    folder = _synthetic_results(tmp_path / "run", alpha=0.004, kappa=1.6)
    fabric = _load_fabric(_MULTI)
    cal = P.calibrate_from_run(fabric, json.loads((folder / "summary.json").read_text())
                               ["collectives"]["runs"])
    assert cal["alpha_s"] == pytest.approx(0.004, rel=1e-6)
    assert cal["kappa"] == pytest.approx(1.6, rel=1e-6)


def test_calibration_leaves_out_the_sizes_the_run_flagged(tmp_path, capsys):
    """A size the verdict says not to quote (too small for the link's rate)
    would pull the fit: it is left out, and said so."""
    folder = _synthetic_results(tmp_path / "run", alpha=0.004, kappa=1.6)
    summary = json.loads((folder / "summary.json").read_text())
    runs = summary["collectives"]["runs"]
    runs[0]["flags"], runs[0]["time_s"] = ["below-resolution"], runs[0]["time_s"] * 0.3
    cal = P.calibrate_from_run(_load_fabric(_MULTI), runs)
    assert cal["alpha_s"] == pytest.approx(0.004, rel=1e-6)      # the others still fit exactly
    assert cal["kappa"] == pytest.approx(1.6, rel=1e-6)
    assert cal["skipped"] == [{"algorithm": runs[0]["algorithm"],
                               "size_bytes": runs[0]["size_bytes"],
                               "flags": ["below-resolution"]}]
    assert runs[0]["size_bytes"] not in {p["size_bytes"] for p in cal["points"]
                                         if p["algorithm"] == runs[0]["algorithm"]}
    (folder / "summary.json").write_text(json.dumps(summary))
    assert P.main(["--results", str(folder)]) == 0
    assert "left out of the fit: 1 size(s) the run flagged as not to quote (" \
        in capsys.readouterr().out
    for r in runs:
        r["flags"] = ["over-rate"]
    with pytest.raises(P.PlanError, match="are flagged as not to quote \\(over-rate\\)"):
        P.calibrate_from_run(_load_fabric(_MULTI), runs)


def test_cli_plans_a_yaml_and_calibrates_from_its_results(tmp_path, capsys):
    folder = _synthetic_results(tmp_path / "run", alpha=0.002, kappa=1.25)
    assert P.main(["--results", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Plan for 16 GPUs" in out and "AllReduce on multi-gpu" in out
    assert "alpha 2.00 ms per step, bandwidth term x1.25 (efficiency 80%)" in out
    ratios = [line.split()[-1] for line in out.splitlines() if "KiB" in line or "MiB" in line]
    assert ratios[-6:] == ["1.00"] * 6                                 # measured / calibrated
    assert P.main(["--fabric", str(_MULTI), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["algorithm"] for r in data["fabric"]["predictions"]] == ["ring", "hierarchical"]


def test_cli_refuses_a_folder_that_is_not_results(tmp_path, capsys):
    assert P.main(["--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    # the path is quoted, and shortened with '...' where long: how long depends on the host
    assert err.startswith("error: --results '") and ": expected a results folder" in err
    assert "\n" not in err
    assert P.main(["--fabric", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read the fabric file" in capsys.readouterr().err


def test_cli_refuses_a_fabric_whose_experiment_section_is_wrong(tmp_path, capsys):
    yaml = tmp_path / "bad-experiment.yaml"
    yaml.write_text(_MULTI.read_text() + "experiment:\n  collective: bogus\n")
    assert P.main(["--fabric", str(yaml)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1
    assert "experiment" in err and "collective" in err


def test_cli_refuses_results_of_another_fabric_and_old_or_broken_summaries(tmp_path, capsys):
    folder = _synthetic_results(tmp_path / "run", alpha=0.002, kappa=1.25)
    other = Path(__file__).parent.parent / "topologies" / "default.yaml"
    assert P.main(["--results", str(folder), "--fabric", str(other)]) == 2
    assert "not the same fabric" in capsys.readouterr().err
    (folder / "summary.json").write_text("[]")
    assert P.main(["--results", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --results '") and ": expected a results" in err
    summary = {"collectives": {"runs": [{"collective": "allreduce", "algorithm": "bogus",
                                         "size_bytes": 65536, "time_s": 1.0, "ranks": 16}]}}
    (folder / "summary.json").write_text(json.dumps(summary))
    assert P.main(["--results", str(folder)]) == 2
    assert "cannot be modelled" in capsys.readouterr().err


def test_oversubscription_is_suggested_only_where_it_can_help():
    clos3 = {d.name: d for d in P.plan(200_000, 64, oversubscription=63)["designs"]}["clos-3"]
    assert not clos3.fits and "more oversubscription" not in clos3.reason
    clos3 = {d.name: d for d in P.plan(100_000, 64)["designs"]}["clos-3"]
    assert not clos3.fits and "more oversubscription" in clos3.reason


def test_absurd_gradient_sizes_are_one_sentence(capsys):
    assert P.main(["--gpus", "16", "--gradient-bytes", "9" * 400]) == 2
    assert capsys.readouterr().err.startswith("error: --gradient-bytes must be")
