"""The fidelity rule on hand-made samples: a link that had bytes queued and
sent less than they allowed was held back by the host."""

from lab.shaping import ACK_CLASS_BURST, unpaid_bytes
from harness.fabrics import leaf_spine
from traffic.measure.fidelity import fidelity, mark_host_bound, mark_unresolved, size_flags
from traffic.measure.monitor import Monitor, summarise

FABRIC = leaf_spine(2, 2, 1, rate=8)          # 8 Mbit/s = 1 MB/s
LINK = "leaf1-eth2"                           # leaf1 -> spine1


def samples(sent_in_100ms, queued_bytes):
    def s(t, tx, backlog):
        return {"t": t, "t_err": 0.0, "cpu": (100 * t, 1000 * t), "ovs_cpu_s": 0.5 * t,
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


def test_a_reading_above_the_rate_within_the_shapers_burst_is_a_saturated_link():
    # 8 Mbit/s for 100 ms is 100 kB; HTB may pass its bucket and a frame more
    # (these samples' times are exact: t_err 0)
    mon = Monitor(FABRIC)
    extra = unpaid_bytes(8, FABRIC.mtu)
    within = summarise(mon, samples(sent_in_100ms=100_000 + extra, queued_bytes=0))
    assert within["links"][LINK]["peak_util"] == 1.0
    beyond = summarise(mon, samples(sent_in_100ms=100_000 + extra + 1_000, queued_bytes=0))
    assert beyond["links"][LINK]["peak_util"] > 1.0       # a real excess stays visible


# --- which sizes are figures to quote --------------------------------------------------

def run(size, busbw_over_link, steps=6, serialisation_s=1.0, rate=20, mtu=9000):
    flags = size_flags(busbw_over_link, steps, serialisation_s, rate, mtu)
    return {"size_bytes": size, "busbw_over_link": busbw_over_link, **flags}


def test_a_size_faster_than_its_link_is_flagged_whatever_else():
    assert "over-rate" in run(1 << 20, 1.01)["flags"]
    assert run(1 << 20, 1.0)["flags"] == []


def test_on_multi_gpu_servers_busbw_counts_nvlink_and_may_pass_the_nic_rate():
    flags = size_flags(2.5, 6, 1.0, 20, 9000, local=4)
    assert "over-rate" not in flags["flags"]


def test_a_size_whose_unpaid_frames_are_a_fifth_of_its_time_is_below_resolution():
    # 20 Mbit/s, MTU 9000: an idle bucket passes 2 x 9014 B, and the ACK class
    # its 2000 B: 8 ms unpaid per step
    unpaid = 6 * (2 * 9014 + ACK_CLASS_BURST) * 8 / 20e6
    assert run(1 << 15, 0.9, serialisation_s=unpaid / 0.21)["flags"] == ["below-resolution"]
    assert run(1 << 15, 0.9, serialisation_s=unpaid / 0.19)["flags"] == []


def test_the_verdict_names_flagged_sizes_and_is_not_trustworthy():
    runs = [run(32768, 1.3, serialisation_s=0.02), run(2 << 20, 0.9, serialisation_s=1.0)]
    verdict = mark_unresolved({"trustworthy": True, "host_kept_up": True}, runs, 20, 9000)
    assert verdict["flagged_sizes"] == [32768] and not verdict["trustworthy"]
    assert "32768 B are too small to measure at 20 Mbit/s" in verdict["advice"]
    assert "busbw beat the link rate at 32768 B" in verdict["advice"]
    clean = mark_unresolved({"trustworthy": True, "host_kept_up": True}, runs[1:], 20, 9000)
    assert clean["trustworthy"] and clean["flagged_sizes"] == []


def timed(size, over_predicted, over_simulated, cpu):
    return {"size_bytes": size, "measured_over_predicted": over_predicted,
            "measured_over_simulated": over_simulated, "cpu_busy_pct": cpu}


def test_far_behind_the_simulator_with_the_cpu_saturated_is_host_bound():
    """The links kept their rates and the alpha-beta model was not twice
    beaten, but the simulator beside the run says 1.61x, at 96% CPU (the
    SuperPOD unit at 4 Mbit/s per NIC): the host, not the fabric."""
    base = {"trustworthy": True, "max_cpu_busy_pct": 96.0}
    verdict = mark_host_bound(dict(base), [timed(16 << 20, 1.5, 1.61, 96.0)])
    assert verdict["host_bound"]
    assert "16777216 B took 1.61x the simulated time while the CPU was 96% busy" in \
        verdict["advice"]
    # as far behind with the CPU not saturated: not provably the host (next test); close
    # to the simulator at 96%: not the host
    assert not mark_host_bound(dict(base), [timed(16 << 20, 1.5, 1.61, 80.0)]).get("host_bound")
    assert not mark_host_bound(dict(base), [timed(16 << 20, 1.1, 1.12, 96.0)]).get("host_bound")
    # a run the simulator could not follow (None) is judged by the model alone
    assert not mark_host_bound(dict(base), [timed(16 << 20, 1.5, None, 96.0)]).get("host_bound")


def test_far_behind_the_simulator_with_cpu_to_spare_is_not_a_figure_to_quote():
    """1.55x the simulated time at 76% CPU, the links at their rates (the
    4x4 fabric on one host, whose one ovs-vswitchd thread forwarded at 85% of
    a core; split over two, it ran 20% faster): flagged, the verdict says
    which sizes and why, and is not trustworthy; a size close to the
    simulator keeps no flag."""
    base = {"trustworthy": True, "max_cpu_busy_pct": 76.0}
    runs = [{**timed(1 << 20, 1.4, 1.57, 73.0), "ovs_core_pct": 80.0, "flags": []},
            {**timed(4 << 20, 1.4, 1.55, 76.0), "ovs_core_pct": 85.0, "flags": []},
            {**timed(16 << 20, 1.0, 1.10, 76.0), "ovs_core_pct": 85.0, "flags": []}]
    verdict = mark_unresolved(mark_host_bound(dict(base), runs), runs, 25, 9000)
    assert [r["flags"] for r in runs] == [["slower-than-simulated"]] * 2 + [[]]
    assert not verdict.get("host_bound") and not verdict["trustworthy"]
    assert verdict["flagged_sizes"] == [1 << 20, 4 << 20]
    assert verdict["advice"] == (
        "1048576, 4194304 B took up to 1.57x the simulated time with the links at their rates "
        "(CPU 73%, ovs-vswitchd 80% of a core): more than the simulator misses by, so the "
        "host's forwarding or the rank processes likely set the pace; lower link rates "
        "(--calibrate) tell")
    assert "too small" not in verdict["advice"]
