"""The adopted datapath (lab/datapath.py) in a throwaway namespace with a
private Open vSwitch: two flows converging on a switch port shaped at 20
Mbit/s pass no more than its rate, and that port's HTB sent every byte the
interface did (a datapath that bypassed the qdiscs would fail both)."""

from bench.datapath_bench import measure
from lab import datapath


def test_the_adopted_datapath_is_shaped():
    r = measure(datapath.ADOPTED, 20, 5)
    assert "error" not in r, r.get("error")
    assert r["crossing"]["link_mbit_s"] > 0
    g = r["converging"]
    assert sum(g["goodput_mbit"]) <= 20 * 1.05
    assert min(g["goodput_mbit"]) > 0
    assert g["watched_qdisc_share"] >= 0.99
