"""The calibration's ceiling, from rows as --calibrate makes them."""

from tests.helpers import leaf_spine
from traffic.rate_calibration import RATES, calibration_table, recommended

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
