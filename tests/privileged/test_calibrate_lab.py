"""--calibrate: the same fabric at rising link rates (each rate's lab is
torn down before the next is built)."""

import pytest

from tests.helpers import leaf_spine



@pytest.mark.slow
def test_calibration_reports_each_rate_and_recommends_one(tmp_path, clean_host):
    from traffic.rate_calibration import calibrate_rates, calibration_table
    fabric = leaf_spine(1, 2, 1, rate=20)
    rows = calibrate_rates(fabric, tmp_path, rates=(5, 10))
    assert [r["rate_mbit"] for r in rows] == [5, 10]
    for r in rows:
        assert r["wrong"] == 0 and 0.3 < r["busbw_over_link"] < 1.0 and isinstance(r["trustworthy"], bool)
    text = calibration_table(fabric, rows)
    assert text.splitlines()[1].split()[:3] == ["#", "rate", "(Mbit/s)"]
    assert "# Recommended: links of 10 Mbit/s or less" in text or "# Recommended: links of 5" in text

