"""--calibrate: the same fabric at rising link rates (its own module: its
labs reuse the switch names of the other modules' labs)."""

import pytest

from tests.fabrics import leaf_spine

pytestmark = pytest.mark.privileged


def test_calibration_reports_each_rate_and_recommends_one(tmp_path, clean_host):
    from traffic.calibrate import calibrate, calibration_table
    fabric = leaf_spine(1, 2, 1, rate=20)
    rows = calibrate(fabric, tmp_path, rates=(5, 10))
    assert [r["rate_mbit"] for r in rows] == [5, 10]
    for r in rows:
        assert r["wrong"] == 0 and 0.3 < r["busbw_over_link"] < 1.0 and "trustworthy" in r
    text = calibration_table(fabric, rows)
    assert text.splitlines()[1].split()[:3] == ["#", "rate", "(Mbit/s)"]
    assert "# Recommended: links of 10 Mbit/s or less" in text or "# Recommended: links of 5" in text

