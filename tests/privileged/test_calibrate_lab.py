"""--calibrate: the same fabric at rising link rates (each rate's lab is
torn down before the next is built), up to the first the host cannot keep up
with, and the ceiling it prints."""

import pytest

from tests.helpers import leaf_spine


@pytest.mark.slow
def test_calibration_reports_each_rate_and_its_ceiling(tmp_path, clean_host):
    from traffic.rate_calibration import GOOD_BUSBW, calibrate_rates, calibration_table, recommended
    fabric = leaf_spine(1, 2, 1, rate=20)
    rows = calibrate_rates(fabric, tmp_path, rates=(5, 10))
    assert [r["rate_mbit"] for r in rows] in ([5], [5, 10])
    for r in rows:
        assert r["wrong"] == 0 and 0 < r["busbw_over_link"] <= 1.0
        assert r["kept_up"] == (r["trustworthy"] and r["busbw_over_link"] >= GOOD_BUSBW)
    # it stops at the first rate clearly past what the host can do
    assert not any(r["past"] for r in rows[:-1])
    text = calibration_table(fabric, rows)
    assert text.splitlines()[1].split()[:3] == ["#", "rate", "(Mbit/s)"]
    best = recommended(rows)
    if best:
        assert f"Recommended: links of {best:g} Mbit/s or less" in text
        assert "# Ceiling: " in text
    else:
        assert "# No rate tried here reached" in text
