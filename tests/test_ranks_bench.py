"""bench/ranks_bench.py's rate sweep: its options and its one table, with
the datapaths side by side (no lab)."""

import pytest

from bench import ranks_bench
from lab import datapath


def row(scale_up, nic, variant, passed, **more):
    r = {"scale_up": scale_up, "datapath": variant, "nic_mbit": nic, "passed": passed,
         "time_s": 26.9, "measured_over_simulated": 1.12, "trustworthy": True,
         "host_bound": False, "flags": [], "cpu_pct": 95, "ovs_core_pct": 47, "wrong": 0}
    r.update(more)
    return r


def test_the_before_and_after_datapaths_are_ones_a_lab_can_start():
    assert datapath.BEFORE in ranks_bench.DAEMON_VARIANTS
    assert datapath.ADOPTED in ranks_bench.DAEMON_VARIANTS
    # a variant that changes the ports or the MTU is not one a Lab applies
    assert "afxdp-nonpmd-3000" not in ranks_bench.DAEMON_VARIANTS
    assert "af_packet-1500" not in ranks_bench.DAEMON_VARIANTS


def test_choices_and_rates_are_parsed_or_refused_in_a_sentence():
    assert ranks_bench.parse_choices("af_packet-mlockall, af_packet-keepheap",
                                     ranks_bench.DAEMON_VARIANTS, "--datapaths") == [
        "af_packet-mlockall", "af_packet-keepheap"]
    with pytest.raises(ValueError, match="--datapaths: afxdp-pmd-3000: expected some of"):
        ranks_bench.parse_choices("afxdp-pmd-3000", ranks_bench.DAEMON_VARIANTS, "--datapaths")
    with pytest.raises(ValueError, match="nothing given"):
        ranks_bench.parse_choices(",", ("packets", "memory"), "--scale-up")
    assert ranks_bench.parse_rates("8,2,4") == [2, 4, 8]
    assert ranks_bench.parse_rates("0.5") == [0.5]
    for bad in ("2,x", "0,2", ""):
        with pytest.raises(ValueError, match="--rates"):
            ranks_bench.parse_rates(bad)


def test_the_default_rates_are_the_yamls_scaled_by_the_factors():
    assert ranks_bench.default_rates() == [0.5, 1, 2, 4]


def test_bad_options_exit_2_before_any_lab(capsys):
    assert ranks_bench.main(["--parts", "ceiling", "--datapaths", "nope"]) == 2
    assert "--datapaths: nope" in capsys.readouterr().err
    assert ranks_bench.main(["--parts", "ceiling", "--rates", "-1"]) == 2


def test_one_table_with_a_column_for_the_datapath():
    rows = [row("memory", 2, "af_packet-mlockall", True),
            row("memory", 2, "af_packet-keepheap", True),
            row("memory", 4, "af_packet-mlockall", False, measured_over_simulated=1.61,
                host_bound=True),
            row("memory", 4, "af_packet-keepheap", False, trustworthy=False,
                measured_over_simulated=None, flags=["faster than its link"])]
    lines = ranks_bench.ceiling_table(rows)
    assert "datapath" in lines[0] and "meas/sim" in lines[0] and "ovs" in lines[0]
    assert len(lines) == 5
    assert "af_packet-mlockall" in lines[1] and lines[1].endswith("pass")
    assert "1.12" in lines[1] and "95%" in lines[1] and "47%" in lines[1]
    assert "HOST-BOUND" in lines[3] and "1.61" in lines[3] and lines[3].endswith("FAIL")
    assert "NOT trustworthy" in lines[4] and "faster than its link" in lines[4]


def test_each_datapath_has_its_ceiling_below_its_first_failure():
    rows = [row("memory", 2, "before", True), row("memory", 2, "after", True),
            row("memory", 4, "before", False), row("memory", 4, "after", True),
            row("memory", 8, "after", False),
            row("packets", 0.5, "after", False), row("packets", 1, "after", True)]
    assert ranks_bench.ceilings(rows) == {("memory", "before"): 2, ("memory", "after"): 4,
                                          ("packets", "after"): 0}
