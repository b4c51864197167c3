"""The calibration's ceiling: from rows as --calibrate makes them (the table's wording),
and from rows calibrate_rates itself builds out of measured busbw/link, host
verdicts and #wrong on both sides of each threshold (the rule)."""

from harness.fabrics import leaf_spine
from runs.rate_calibration import RATES, calibration_table, recommended
from runs.record import RunRecord

FABRIC = leaf_spine(2, 2, 2, rate=20)


def row(rate, busbw, trustworthy=True, cpu=40.0):
    return {"rate_mbit": rate, "size_bytes": 1 << 20, "busbw_over_link": busbw, "wrong": 0,
            "trustworthy": trustworthy, "kept_up": trustworthy and busbw >= 0.85,
            "past": not trustworthy or busbw < 0.425,
            "cpu_busy_pct": cpu, "ovs_core_pct": 30.0, "latency_p99_us": 900.0}


def test_rates_double_from_5_mbit_to_past_what_a_small_host_can_do():
    assert RATES[:5] == (5, 10, 20, 40, 80) and RATES[-1] >= 1000


def test_the_ceiling_is_the_last_rate_kept_up_with_before_the_first_that_was_not():
    rows = [row(5, 0.93), row(10, 0.94), row(20, 0.91), row(40, 0.6, trustworthy=False, cpu=99)]
    assert recommended(rows) == 20
    text = calibration_table(FABRIC, rows)
    assert ("# Ceiling: 20 Mbit/s per link for this fabric on this host (at 40 Mbit/s it did "
            "not keep up: busbw/link 0.60, links held below their rate, CPU 99% busy)") in text
    assert text.splitlines()[-2].split()[:3] == ["40", "0.60", "NO"]


def test_a_dip_below_the_mark_at_one_rate_does_not_hide_a_higher_ceiling():
    rows = [row(5, 0.93), row(10, 0.8), row(20, 0.9), row(40, 0.3)]
    assert recommended(rows) == 20
    assert "(at 40 Mbit/s it did not keep up: busbw/link 0.30, CPU 40% busy)" in \
        calibration_table(FABRIC, rows)


def test_a_host_that_never_keeps_up_gets_advice_not_a_ceiling():
    text = calibration_table(FABRIC, [row(5, 0.5)])
    assert recommended([row(5, 0.5)]) is None and "# No rate tried here reached" in text


def test_a_host_that_kept_up_at_every_rate_tried_says_the_ceiling_is_above():
    rows = [row(5, 0.93), row(10, 0.94)]
    assert "# Ceiling: above 10 Mbit/s, the highest rate tried" in calibration_table(FABRIC, rows)


# --- the rule on rows that calibrate_rates itself makes from measurements ----------------

class _NoLab:
    """Stands for the lab: calibrate_rates enters it, the fake run reads it."""

    def __init__(self, fabric, run_dir, datapath="auto"):
        self.fabric = fabric

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def measured_rows(monkeypatch, tmp_path, measured, rates=RATES):
    """Rows made by calibrate_rates from what a run measured at each rate:
    {rate: (busbw/link, host kept up, host-bound, #wrong)}; the experiments
    it asked for are returned too."""
    from runs import rate_calibration as R
    asked = []

    def run(lab, exp, run_dir):
        rate = lab.fabric.spec["links"]["server_leaf"]["rate_mbit"]
        asked.append((rate, exp.minbytes, exp.maxbytes))
        busbw, kept_up, bound, wrong = measured[rate]
        return RunRecord(
            experiment={}, ranks=[], gpus_per_server=1, alpha_s=1e-4, beta_s_per_byte=1e-6,
            link_rate_mbit=rate,
            runs=[{"size_bytes": exp.maxbytes, "busbw_over_link": busbw, "wrong": wrong,
                   "cpu_busy_pct": 97.04 if bound else 41.26, "ovs_core_pct": 12.5,
                   "latency": {"p99_us": 812.0}}],
            fidelity={"trustworthy": kept_up, "host_kept_up": kept_up, "host_bound": bound})
    monkeypatch.setattr(R, "Lab", _NoLab)
    monkeypatch.setattr(R, "run_experiment", run)
    return R.calibrate_rates(FABRIC, tmp_path, rates=rates), asked


def test_a_measured_calibration_stops_past_the_host_and_names_the_last_rate_kept_up(
        monkeypatch, tmp_path):
    """busbw/link 0.94, 0.93, 0.85 (the mark itself), then 0.8499 (just
    under), then host-bound: the ceiling is 20 Mbit/s, the run stops at the
    host-bound 80 and never asks for 160."""
    rows, asked = measured_rows(monkeypatch, tmp_path, {
        5: (0.94, True, False, 0), 10: (0.93, True, False, 0), 20: (0.85, True, False, 0),
        40: (0.8499, True, False, 0), 80: (0.7, True, True, 0), 160: (0.9, True, False, 0)})
    assert [r["rate_mbit"] for r in rows] == [5, 10, 20, 40, 80]
    assert [r["kept_up"] for r in rows] == [True, True, True, False, False]
    assert [r["past"] for r in rows] == [False, False, False, False, True]
    assert recommended(rows) == 20
    assert ("at 40 Mbit/s it did not keep up: busbw/link 0.85, CPU 41% busy" in
            calibration_table(FABRIC, rows))
    # about 2 s of ring AllReduce over 4 servers: rate/8 x 2 s / (2 x 3/4), by hand
    assert asked[:3] == [(5, 833333, 833333), (10, 1666666, 1666666), (20, 3333333, 3333333)]


def test_half_the_mark_is_where_a_calibration_stops(monkeypatch, tmp_path):
    """busbw/link 0.425 (half of 0.85) is a dip, not yet past: the next rate
    is tried; 0.4249 is past. Neither is kept up, so the ceiling stays 5."""
    rows, _ = measured_rows(monkeypatch, tmp_path, {
        5: (0.9, True, False, 0), 10: (0.425, True, False, 0), 20: (0.4249, True, False, 0),
        40: (0.95, True, False, 0)})
    assert [(r["rate_mbit"], r["past"], r["kept_up"]) for r in rows] == [
        (5, False, True), (10, False, False), (20, True, False)]
    assert recommended(rows) == 5


def test_links_held_back_or_a_wrong_element_are_not_kept_up(monkeypatch, tmp_path):
    """A good busbw does not make a rate kept up if the links were held below
    their rate (then it is past) or an element came out wrong."""
    rows, _ = measured_rows(monkeypatch, tmp_path, {
        5: (0.93, True, False, 0), 10: (0.95, True, False, 1), 20: (0.95, False, False, 0),
        40: (0.95, True, False, 0)})
    assert [(r["rate_mbit"], r["past"], r["kept_up"], r["trustworthy"]) for r in rows] == [
        (5, False, True, True), (10, False, False, True), (20, True, False, False)]
    assert recommended(rows) == 5
    assert "links held below their rate" not in calibration_table(FABRIC, rows)   # 10 first


def test_the_largest_calibration_size_is_capped(monkeypatch, tmp_path):
    """From 320 Mbit/s (53,333,333 bytes for 2 s) the size is MAX_SIZE, 32 MiB."""
    rows, asked = measured_rows(monkeypatch, tmp_path, {160: (0.9, True, False, 0),
                                                        320: (0.9, True, False, 0)},
                                rates=(160, 320))
    assert asked == [(160, 26666666, 26666666), (320, 32 << 20, 32 << 20)]
    assert [r["size_bytes"] for r in rows] == [26666666, 32 << 20]


def test_each_rate_is_handed_on_as_it_ends(monkeypatch, tmp_path):
    """run_topology.py --calibrate prints a row as its rate ends (through a
    pipe, in a file): the display hears each row, in order, as it is made."""
    from runs import rate_calibration as R

    class Display:
        def __init__(self):
            self.heard = []

        def __call__(self, message):
            pass

        def finished(self, message, row=None):
            self.heard.append((message, row["rate_mbit"], len(asked)))
    display, asked = Display(), []
    measured = {5: (0.94, True, False, 0), 10: (0.4, False, True, 0)}

    def run(lab, exp, run_dir):
        asked.append(lab.fabric.spec["links"]["server_leaf"]["rate_mbit"])
        busbw, kept_up, bound, wrong = measured[asked[-1]]
        return RunRecord(
            experiment={}, ranks=[], gpus_per_server=1, alpha_s=1e-4, beta_s_per_byte=1e-6,
            link_rate_mbit=asked[-1],
            runs=[{"size_bytes": exp.maxbytes, "busbw_over_link": busbw, "wrong": wrong,
                   "cpu_busy_pct": 41.0, "ovs_core_pct": 12.5, "latency": {"p99_us": 812.0}}],
            fidelity={"trustworthy": kept_up, "host_kept_up": kept_up, "host_bound": bound})
    monkeypatch.setattr(R, "Lab", _NoLab)
    monkeypatch.setattr(R, "run_experiment", run)
    rows = R.calibrate_rates(FABRIC, tmp_path, rates=[5, 10, 20], progress=display)
    assert display.heard == [
        ("calibrated 5 Mbit/s: busbw/link 0.94", 5, 1),        # before 10 Mbit/s was asked
        ("calibrated 10 Mbit/s: busbw/link 0.40, not kept up; past what this host can "
         "emulate", 10, 2)]
    assert calibration_table(FABRIC, rows).split("\n")[2:4] == [
        R.calibration_row(r) for r in rows]
