"""The fidelity rule on hand-made samples: a link that had bytes queued and
sent less than they allowed was held back by the host."""

from tests.helpers import leaf_spine
from traffic.measure.fidelity import fidelity
from traffic.measure.monitor import Monitor, summarise

FABRIC = leaf_spine(2, 2, 1, rate=8)          # 8 Mbit/s = 1 MB/s
LINK = "leaf1-eth2"                           # leaf1 -> spine1


def samples(sent_in_100ms, queued_bytes):
    def s(t, tx, backlog):
        return {"t": t, "cpu": (100 * t, 1000 * t), "ovs_cpu_s": 0.5 * t,
                "tx": {LINK: tx}, "queues": {LINK: {"backlog": backlog, "qlen": backlog // 9014,
                                                    "drops": 0}}}
    return [s(0.0, 0, queued_bytes), s(0.1, sent_in_100ms, queued_bytes)]


def test_a_link_that_kept_its_rate_is_trustworthy():
    mon = Monitor(FABRIC)
    window = summarise(mon, samples(sent_in_100ms=100_000, queued_bytes=200_000))
    assert window["shortfalls"] == []
    assert abs(window["links"][LINK]["peak_util"] - 1.0) < 1e-9
    verdict = fidelity([window], FABRIC)
    assert verdict["trustworthy"] and "advice" not in verdict


def test_a_queued_link_that_sent_too_little_was_held_back_by_the_host():
    mon = Monitor(FABRIC)
    window = summarise(mon, samples(sent_in_100ms=50_000, queued_bytes=200_000))
    assert window["shortfalls"] == [(LINK, 0.5)]
    verdict = fidelity([window], FABRIC)
    assert not verdict["trustworthy"]
    assert "could not keep queued links at their rate (worst: 50% of what was owed" in verdict["advice"]
    assert "try link rates of 3.2 Mbit/s or less" in verdict["advice"]


def test_an_idle_link_owes_nothing():
    mon = Monitor(FABRIC)
    window = summarise(mon, samples(sent_in_100ms=1_000, queued_bytes=0))
    assert window["shortfalls"] == [] and fidelity([window], FABRIC)["trustworthy"]
    assert window["cpu_busy_pct"] == 90.0 and window["ovs_core_pct"] == 50.0
