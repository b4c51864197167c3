"""The fidelity verdict (traffic/measure/fidelity.py) as a user reads it:
the exact fields, the exact advice sentence for given figures, the defaults
when data is missing, and each threshold from both sides. Every figure here
is a literal worked out by hand, never computed with the module's constants."""

import pytest

from harness.fabrics import leaf_spine
from traffic.measure.fidelity import (calibrated_rate, fidelity, headline, mark_host_bound,
                                      mark_rate_to_try, mark_unresolved, size_flags,
                                      verdict_lines)

FABRIC = leaf_spine(2, 2, 1, rate=8)          # every link 8 Mbit/s

CPU_BUSY_ADVICE = ("the CPU was {cpu}% busy and ovs-vswitchd used "
                   "{ovs}% of its core: when forwarding is the bottleneck, packets wait before "
                   "the link queues, where this check cannot see them; lower rates would be safer")
PACE = ("the rank processes, not the links, set the pace; lower link rates or fewer ranks "
        "measure the fabric instead")


def window(shortfalls=(), cpu=40.0, ovs=30.0):
    """One monitor summary as traffic/measure/monitor.py's summarise gives it."""
    return {"shortfalls": list(shortfalls), "cpu_busy_pct": cpu, "ovs_core_pct": ovs}


# --- fidelity: the host's verdict from the monitor's windows -------------------------

def test_a_clean_run_gives_every_field_and_no_advice():
    verdict = fidelity([window(cpu=41.26, ovs=33.34), window(cpu=57.83, ovs=12.0)], FABRIC)
    assert verdict == {"trustworthy": True, "host_kept_up": True,
                       "saturated_intervals_below_rate": 0, "worst": [],
                       "max_cpu_busy_pct": 57.8, "max_ovs_core_pct": 33.3}


def test_no_summaries_at_all_reads_cpu_and_ovs_0_percent():
    assert fidelity([], FABRIC) == {"trustworthy": True, "host_kept_up": True,
                                    "saturated_intervals_below_rate": 0, "worst": [],
                                    "max_cpu_busy_pct": 0.0, "max_ovs_core_pct": 0.0}


def test_cpu_and_ovs_are_reported_to_one_decimal():
    verdict = fidelity([window(cpu=96.26, ovs=88.84)], FABRIC)
    assert verdict["max_cpu_busy_pct"] == 96.3
    assert verdict["max_ovs_core_pct"] == 88.8


def test_shortfalls_make_the_run_untrustworthy_with_the_five_worst_listed_worst_first():
    windows = [window([("a-eth1", 0.81), ("b-eth1", 0.30), ("c-eth1", 0.72)], cpu=97.26, ovs=88.84),
               window([("d-eth1", 0.20), ("e-eth1", 0.65), ("f-eth1", 0.85), ("g-eth1", 0.50)],
                      cpu=90.0, ovs=91.0)]
    verdict = fidelity(windows, FABRIC)
    assert verdict == {
        "trustworthy": False, "host_kept_up": False, "saturated_intervals_below_rate": 7,
        "worst": [("d-eth1", 0.20), ("b-eth1", 0.30), ("g-eth1", 0.50), ("e-eth1", 0.65),
                  ("c-eth1", 0.72)],
        "max_cpu_busy_pct": 97.3, "max_ovs_core_pct": 91.0,
        "advice": ("the host could not keep queued links at their rate (worst: 20% of what was "
                   "owed; CPU 97%, ovs-vswitchd 91% of a core): try link rates of 1.28 Mbit/s "
                   "or less, or `run_topology.py --calibrate`")}


def test_the_rate_to_try_is_never_below_a_tenth_of_a_megabit():
    # 8 Mbit/s x 0.1 x 0.8 = 0.64; 8 x 0.01 x 0.8 = 0.064, floored at 0.1
    above = fidelity([window([("a-eth1", 0.1)])], FABRIC)["advice"]
    assert "try link rates of 0.64 Mbit/s or less" in above
    floor = fidelity([window([("a-eth1", 0.01)])], FABRIC)["advice"]
    assert floor == ("the host could not keep queued links at their rate (worst: 1% of what was "
                     "owed; CPU 40%, ovs-vswitchd 30% of a core): try link rates of 0.1 Mbit/s "
                     "or less, or `run_topology.py --calibrate`")


def test_a_busy_cpu_alone_is_advised_on_past_95_percent_not_at_it():
    assert "advice" not in fidelity([window(cpu=95.0, ovs=10.0)], FABRIC)
    verdict = fidelity([window(cpu=95.1, ovs=10.0)], FABRIC)
    assert verdict["trustworthy"] and verdict["host_kept_up"]
    assert verdict["advice"] == CPU_BUSY_ADVICE.format(cpu=95, ovs=10)


def test_a_busy_ovs_thread_alone_is_advised_on_past_95_percent_not_at_it():
    assert "advice" not in fidelity([window(cpu=10.0, ovs=95.0)], FABRIC)
    verdict = fidelity([window(cpu=10.0, ovs=95.6)], FABRIC)
    assert verdict["advice"] == CPU_BUSY_ADVICE.format(cpu=10, ovs=96)


# --- mark_host_bound: slower than the model or the simulator ----------------------------

def timed(size, over_predicted, over_simulated, **extra):
    return {"size_bytes": size, "measured_over_predicted": over_predicted,
            "measured_over_simulated": over_simulated, "flags": [], **extra}


def test_no_runs_leave_the_verdict_as_it_was():
    verdict = {"trustworthy": True, "host_kept_up": True, "max_cpu_busy_pct": 99.0}
    assert mark_host_bound(dict(verdict), []) == verdict


def test_far_slower_than_the_model_with_the_cpu_busy_is_host_bound():
    verdict = mark_host_bound({"trustworthy": True, "max_cpu_busy_pct": 85.0},
                              [timed(1 << 20, 1.3, None, cpu_busy_pct=85.0),
                               timed(4 << 20, 2.46, None, cpu_busy_pct=85.0)])
    assert verdict == {"trustworthy": True, "max_cpu_busy_pct": 85.0, "host_bound": True,
                       "advice": "a size took 2.5x the alpha-beta time while the CPU was 85% "
                                 "busy: " + PACE}


def test_the_model_ratio_must_pass_2x_and_the_cpu_80_percent():
    def bound(ratio, cpu):
        return mark_host_bound({"max_cpu_busy_pct": cpu}, [timed(1 << 20, ratio, None)])
    assert bound(2.0, 90.0) == {"max_cpu_busy_pct": 90.0}
    assert bound(2.01, 80.0) == {"max_cpu_busy_pct": 80.0}
    assert bound(2.01, 80.1)["advice"] == ("a size took 2.0x the alpha-beta time while the CPU "
                                           "was 80% busy: " + PACE)
    # a size the model could not time (None) counts as not slow
    assert bound(None, 99.0) == {"max_cpu_busy_pct": 99.0}


def test_host_bound_advice_follows_the_advice_already_given():
    verdict = fidelity([window([("a-eth1", 0.5)], cpu=97.26, ovs=88.84)], FABRIC)
    verdict = mark_host_bound(verdict, [timed(1 << 20, 2.46, None, cpu_busy_pct=97.0)])
    assert verdict["host_bound"] is True
    assert verdict["advice"] == (
        "the host could not keep queued links at their rate (worst: 50% of what was owed; "
        "CPU 97%, ovs-vswitchd 89% of a core): try link rates of 3.2 Mbit/s or less, or "
        "`run_topology.py --calibrate`; a size took 2.5x the alpha-beta time while the CPU was "
        "97% busy: " + PACE)


def test_behind_the_simulator_names_the_worst_saturated_size():
    runs = [timed(1 << 20, 1.2, 1.40, cpu_busy_pct=96.0),
            timed(4 << 20, 1.2, 1.90, cpu_busy_pct=97.4),
            timed(16 << 20, 1.2, 1.60, cpu_busy_pct=99.0)]
    verdict = mark_host_bound({"max_cpu_busy_pct": 99.0}, runs)
    assert verdict == {"max_cpu_busy_pct": 99.0, "host_bound": True,
                       "advice": "4194304 B took 1.90x the simulated time while the CPU was 97% "
                                 "busy: " + PACE}
    assert [r["flags"] for r in runs] == [[], [], []]


def test_behind_the_simulator_means_past_1_25x():
    at = [timed(1 << 20, 1.0, 1.25, cpu_busy_pct=99.0)]
    assert mark_host_bound({"max_cpu_busy_pct": 99.0}, at) == {"max_cpu_busy_pct": 99.0}
    assert at[0]["flags"] == []
    past = [timed(1 << 20, 1.0, 1.26, cpu_busy_pct=99.0)]
    assert mark_host_bound({"max_cpu_busy_pct": 99.0}, past)["host_bound"] is True


def test_saturated_means_past_95_percent_at_95_the_size_is_only_flagged():
    runs = [timed(1 << 20, 1.0, 1.50, cpu_busy_pct=95.0, ovs_core_pct=60.0)]
    verdict = mark_host_bound({"max_cpu_busy_pct": 95.0}, runs)
    assert "host_bound" not in verdict
    assert runs[0]["flags"] == ["slower-than-simulated"]
    assert verdict["advice"] == (
        "1048576 B took up to 1.50x the simulated time with the links at their rates (CPU 95%, "
        "ovs-vswitchd 60% of a core): more than the simulator misses by, so the host's "
        "forwarding or the rank processes likely set the pace; lower link rates (--calibrate) "
        "tell")


def test_a_run_without_cpu_or_ovs_figures_reads_them_as_0_percent():
    runs = [timed(1 << 20, 1.0, 1.50)]
    verdict = mark_host_bound({"max_cpu_busy_pct": 0.0}, runs)
    assert "host_bound" not in verdict
    assert runs[0]["flags"] == ["slower-than-simulated"]
    assert verdict["advice"] == (
        "1048576 B took up to 1.50x the simulated time with the links at their rates (CPU 0%, "
        "ovs-vswitchd 0% of a core): more than the simulator misses by, so the host's "
        "forwarding or the rank processes likely set the pace; lower link rates (--calibrate) "
        "tell")


def test_without_a_faithful_simulator_its_time_judges_nothing():
    runs = [timed(1 << 20, 1.0, 1.90, cpu_busy_pct=99.0)]
    assert mark_host_bound({"max_cpu_busy_pct": 99.0}, runs, sim_faithful=False) == \
        {"max_cpu_busy_pct": 99.0}
    assert runs[0]["flags"] == []


def test_slower_than_simulated_advice_follows_the_advice_already_given():
    verdict = fidelity([window(cpu=70.0, ovs=97.0)], FABRIC)
    runs = [timed(1 << 20, 1.0, 1.50, cpu_busy_pct=70.0, ovs_core_pct=97.0)]
    verdict = mark_host_bound(verdict, runs)
    assert verdict["advice"] == CPU_BUSY_ADVICE.format(cpu=70, ovs=97) + (
        "; 1048576 B took up to 1.50x the simulated time with the links at their rates (CPU 70%, "
        "ovs-vswitchd 97% of a core): more than the simulator misses by, so the host's "
        "forwarding or the rank processes likely set the pace; lower link rates (--calibrate) "
        "tell")


# --- size_flags: which sizes are figures to quote ---------------------------------------

def test_the_unpaid_bound_is_what_the_shaper_passes_per_step_at_the_link_rate():
    # 20 Mbit/s, MTU 9000: bucket 9014 B + a frame 9014 B + ACK class 2000 B = 20028 B
    # per step; 6 steps x 20028 B x 8 / 20e6 bit/s = 0.0480672 s
    flags = size_flags(0.9, 6, 1.0, 20, 9000)
    assert flags["flags"] == []
    assert flags["shaper_unpaid_bound_s"] == pytest.approx(0.0480672, rel=1e-12)
    assert flags["serialisation_s"] == 1.0


def test_below_resolution_means_more_than_a_fifth_not_exactly_a_fifth():
    # 0.2 x 0.24033599999999997 is exactly the 0.0480672 s unpaid (in floats)
    assert size_flags(0.9, 6, 0.24033599999999997, 20, 9000)["flags"] == []
    assert size_flags(0.9, 6, 0.2404, 20, 9000)["flags"] == []
    assert size_flags(0.9, 6, 0.2403, 20, 9000)["flags"] == ["below-resolution"]


# --- mark_unresolved: the verdict names the sizes not to quote --------------------------

def small(size, flags, unpaid_s, serialisation_s):
    return {"size_bytes": size, "flags": flags, "shaper_unpaid_bound_s": unpaid_s,
            "serialisation_s": serialisation_s}


def test_flagged_sizes_make_the_verdict_false_and_say_from_which_size_to_quote():
    # need: 10754 B x 0.002 s / (0.2 x 0.01 s) = 10754 B = 10.5 KB, about 11;
    # a 788-byte frame (MTU 774) at 6 Mbit/s is 1.05 ms, 1.1 to two digits
    verdict = fidelity([window(cpu=97.0, ovs=40.0)], FABRIC)
    runs = [small(10754, ["over-rate", "below-resolution"], 0.002, 0.01),
            small(1 << 20, [], 0.002, 2.0)]
    verdict = mark_unresolved(verdict, runs, 6, 774)
    assert verdict["trustworthy"] is False
    assert verdict["host_kept_up"] is True
    assert verdict["flagged_sizes"] == [10754]
    assert verdict["advice"] == CPU_BUSY_ADVICE.format(cpu=97, ovs=40) + (
        "; 10754 B are too small to measure at 6 Mbit/s: an idle shaped link lets its first "
        "frames out unpaid (1.1 ms per 788-byte frame), which a real link charges; busbw beat "
        "the link rate at 10754 B; quote sizes from about 11 KB up, or lower the MTU")


def test_the_frame_time_is_given_to_two_digits():
    # a 787-byte frame (MTU 773) at 6 Mbit/s: 1.0493 ms, 1 to two digits
    verdict = mark_unresolved({"trustworthy": True}, [small(4096, ["below-resolution"], 0.002, 0.0)],
                              6, 773)
    assert verdict["advice"] == (
        "4096 B are too small to measure at 6 Mbit/s: an idle shaped link lets its first frames "
        "out unpaid (1 ms per 787-byte frame), which a real link charges")


def test_sizes_with_no_serialisation_time_give_no_size_to_quote_from():
    runs = [small(1024, ["below-resolution"], 0.008, 0.0), small(2048, ["below-resolution"], 0.008, 0.0)]
    verdict = mark_unresolved({"trustworthy": True, "host_kept_up": True}, runs, 20, 9000)
    assert verdict == {
        "trustworthy": False, "host_kept_up": True, "flagged_sizes": [1024, 2048],
        "advice": "1024, 2048 B are too small to measure at 20 Mbit/s: an idle shaped link lets "
                  "its first frames out unpaid (3.6 ms per 9014-byte frame), which a real link "
                  "charges"}


def test_the_size_to_quote_from_is_judged_by_the_sizes_with_serialisation_time():
    # 1024 B has none; 8192 B x 0.004 s / (0.2 x 0.01 s) = 16384 B = 16 KB
    runs = [small(1024, ["below-resolution"], 0.004, 0.0), small(8192, ["below-resolution"], 0.004, 0.01)]
    verdict = mark_unresolved({"trustworthy": True}, runs, 20, 9000)
    assert verdict["advice"].endswith(
        "3.6 ms per 9014-byte frame), which a real link charges; quote sizes from about 16 KB up, "
        "or lower the MTU")


def test_a_size_only_slower_than_simulated_is_listed_but_adds_no_resolution_advice():
    verdict = {"trustworthy": True, "advice": "earlier"}
    runs = [small(1 << 20, ["slower-than-simulated"], 0.002, 0.5)]
    assert mark_unresolved(verdict, runs, 20, 9000) == {
        "trustworthy": False, "advice": "earlier", "flagged_sizes": [1 << 20]}


def test_no_flagged_size_keeps_the_verdict_trustworthy():
    verdict = mark_unresolved({"trustworthy": True}, [small(1 << 20, [], 0.002, 0.5)], 20, 9000)
    assert verdict == {"trustworthy": True, "flagged_sizes": []}


# --- the verdict as the table prints it: a short headline, the details once ----------

def _said_once(lines):
    """No clause of the verdict appears twice across its lines."""
    text = " ".join(l.lstrip("#").strip() for l in lines)
    clauses = [c.strip() for part in text.split(";") for c in part.split(": ") if len(c) > 20]
    return len(clauses) == len(set(clauses))


def test_a_busy_host_bound_run_says_host_bound_once_with_a_rate_from_its_best_size():
    # 1 Gbit/s links, the CPU busy: the best size moved 0.1 of the link rate = 100 Mbit/s
    verdict = fidelity([window(cpu=99.0, ovs=97.0)], FABRIC)
    runs = [timed(1 << 20, 2.46, None, cpu_busy_pct=99.0),
            {**timed(4 << 20, 1.2, None, cpu_busy_pct=99.0), "busbw_over_link": 0.1}]
    verdict = mark_unresolved(mark_host_bound(verdict, runs), [dict(r, flags=[]) for r in runs],
                              1000, 9000)
    verdict = mark_rate_to_try(verdict, runs, 1000)
    assert verdict["try_rate_mbit"] == 80 and verdict["try_rate_from"] == "this run"
    lines = verdict_lines(verdict, 1000)
    assert lines[0] == "# Fidelity: HOST-BOUND: the ranks, not the links, set the pace; try links of 80 Mbit/s."
    assert len(lines[0]) < 120 and all(len(l) <= 100 for l in lines[1:])
    assert " ".join(lines).count("links kept their rates") == 0
    assert _said_once(lines) and "the CPU was 99% busy" in " ".join(lines)
    assert " ".join(lines).count("set the pace") == 1
    assert lines[-1].endswith("a size took 2.5x the alpha-beta time while the CPU was 99% busy")


def test_a_calibration_below_the_run_rate_is_the_rate_to_try(tmp_path):
    old = tmp_path / "20261201-100000-leaf-spine-2x2-calibration"
    new = tmp_path / "20261203-100000-leaf-spine-2x2-calibration"
    for folder, rows in ((old, [(5, True), (10, True)]),
                         (new, [(5, True), (40, True), (80, True), (160, False)])):
        folder.mkdir()
        (folder / "calibration.json").write_text(
            __import__("json").dumps([{"rate_mbit": r, "kept_up": k} for r, k in rows]))
    assert calibrated_rate(tmp_path, "leaf-spine-2x2") == 80
    assert calibrated_rate(tmp_path, "other") is None
    verdict = mark_rate_to_try({"trustworthy": True, "host_bound": True, "advice": "x"},
                               [timed(1 << 20, 3.0, None)], 1000, 80)
    assert headline(verdict, 1000) == ("HOST-BOUND: the ranks, not the links, set the pace; "
                                       "try links of 80 Mbit/s (--calibrate's ceiling).")
    # a ceiling above the run's rate is no advice: the run's own figures give one
    assert mark_rate_to_try({"host_bound": True}, [], 20, 80)["try_rate_from"] == "this run"


def test_each_headline_is_short_and_the_flagged_one_says_where_to_quote_from():
    runs = [small(32768, ["below-resolution"], 0.004, 0.0131),
            small(1 << 20, [], 0.004, 0.42)]
    flagged = mark_unresolved({"trustworthy": True, "host_kept_up": True}, runs, 20, 9000)
    # 32768 B x 0.004 s / (0.2 x 0.0131 s) = 50,027 B = 48.9 KB, about 49
    assert headline(flagged, 20) == "links kept their rates; quote sizes from about 49 KB up."
    text = " ".join(l.lstrip("#").strip() for l in verdict_lines(flagged, 20))
    assert text.count("49 KB") == 1 and text.endswith("a smaller MTU resolves smaller sizes")
    short = fidelity([window([("a-eth1", 0.5)])], FABRIC)
    assert headline(short, 8) == "UNTRUSTWORTHY: links fell below their rate; try links of 3.2 Mbit/s or less."
    clean = fidelity([window()], FABRIC)
    assert verdict_lines(clean, 8) == [
        "# Fidelity: trustworthy: every saturated link ran at its configured rate."]
    for v in (flagged, short, clean):
        assert len(verdict_lines(v, 20)[0]) < 120
