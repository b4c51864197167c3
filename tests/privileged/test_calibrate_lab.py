"""--calibrate: the same fabric at rising link rates (each rate's lab is
torn down before the next is built), up to the first the host cannot keep up
with, and the ceiling it prints: the highest rate whose row kept up, exactly
as the rows say."""

import pytest

from harness.fabrics import leaf_spine


@pytest.mark.slow
def test_calibration_reports_each_rate_and_its_ceiling(tmp_path, clean_host):
    from runs.rate_calibration import GOOD_BUSBW, calibrate_rates, calibration_table, recommended
    fabric = leaf_spine(1, 2, 1, rate=20)
    rates = (5, 10)
    rows = calibrate_rates(fabric, tmp_path, rates=rates)
    # a rate past what the host can do ends the calibration there, and only such a rate:
    # one row when 5 Mbit/s was past, both rates otherwise
    assert [r["rate_mbit"] for r in rows] == list(rates[:1 if rows[0]["past"] else 2])
    for r in rows:
        assert r["wrong"] == 0 and 0 < r["busbw_over_link"] <= 1.0
        assert r["kept_up"] == (r["trustworthy"] and r["busbw_over_link"] >= GOOD_BUSBW)
        if r["busbw_over_link"] < GOOD_BUSBW / 2:      # clearly past the host
            assert r["past"], r
        if r["past"]:
            assert not r["kept_up"], r
    best = recommended(rows)
    assert best == max((r["rate_mbit"] for r in rows if r["kept_up"]), default=None), rows
    text = calibration_table(fabric, rows).splitlines()
    assert text[1].split()[:3] == ["#", "rate", "(Mbit/s)"]
    # one line per row, saying whether the host kept up at that rate
    assert [(float(l.split()[0]), l.split()[2]) for l in text[2:-1]] == \
        [(r["rate_mbit"], "yes" if r["kept_up"] else "NO") for r in rows]
    failed = next((r for r in rows if not r["kept_up"] and r["rate_mbit"] > (best or 0)), None)
    last = text[-1]
    if best is None:
        assert last.startswith(f"# No rate tried here reached busbw/link {GOOD_BUSBW} "), last
        assert "Recommended" not in "\n".join(text)
    elif failed is None:
        assert last == (f"# Ceiling: above {best:g} Mbit/s, the highest rate tried. "
                        f"Recommended: links of {best:g} Mbit/s or less"), last
    else:
        assert last.startswith(f"# Ceiling: {best:g} Mbit/s per link for this fabric on this "
                               f"host (at {failed['rate_mbit']:g} Mbit/s it did not keep up: "
                               f"busbw/link {failed['busbw_over_link']:.2f}"), last
        assert last.endswith(f"Recommended: links of {best:g} Mbit/s or less"), last
