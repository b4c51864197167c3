"""What a run's own figures decide: the fidelity verdict checked against the
runs it judged, whichever way it went."""

from typing import List


def assert_verdict_follows_from_runs(verdict: dict, runs: List[dict]) -> None:
    """The fidelity verdict (traffic/measure/fidelity.py) as the run's own
    figures decide it, whichever way it goes: a size is flagged over-rate
    exactly when its busbw beat the link rate, below-resolution exactly when
    the shaper's unpaid bound is over a fifth of its serialisation time; the
    run is trustworthy exactly when every queued link kept its rate and no
    size is flagged; the advice names the flagged sizes and the shortfall,
    and there is none to give when the verdict is clean (one-GPU servers)."""
    from traffic.measure.fidelity import CPU_BUSY_WARN, OVS_BUSY, SIM_HOST_BOUND, SLOWER, UNPAID_SHARE
    for r in runs:
        size = r["size_bytes"]
        assert ("over-rate" in r["flags"]) == (r["busbw_over_link"] > 1.0), (size, r["flags"])
        assert ("below-resolution" in r["flags"]) == (
            r["shaper_unpaid_bound_s"] > UNPAID_SHARE * r["serialisation_s"]), (size, r["flags"])
        if SLOWER in r["flags"]:
            assert r["measured_over_simulated"] > SIM_HOST_BOUND, (size, r)
        elif not verdict.get("host_bound"):
            assert (r.get("measured_over_simulated") or 0) <= SIM_HOST_BOUND, (size, r)
    assert verdict["host_kept_up"] == (verdict["saturated_intervals_below_rate"] == 0), verdict
    flagged = [r["size_bytes"] for r in runs if r["flags"]]
    assert verdict["flagged_sizes"] == flagged, verdict
    assert verdict["trustworthy"] == (verdict["host_kept_up"] and not flagged), verdict
    advice = verdict.get("advice", "")
    if not verdict["host_kept_up"]:
        assert "could not keep queued links at their rate" in advice, verdict
    small = [str(r["size_bytes"]) for r in runs if set(r["flags"]) - {SLOWER}]
    if small:
        assert f"{', '.join(small)} B are too small to measure" in advice, verdict
    slow = [str(r["size_bytes"]) for r in runs if SLOWER in r["flags"]]
    if slow:
        assert f"{', '.join(slow)} B took up to" in advice, verdict
        assert "the simulated time with the links at their rates" in advice, verdict
    if verdict.get("host_bound"):
        assert "set the pace" in advice, verdict
    busy = verdict["max_cpu_busy_pct"] > CPU_BUSY_WARN or verdict["max_ovs_core_pct"] > OVS_BUSY
    if verdict["trustworthy"] and not verdict.get("host_bound") and not busy:
        assert "advice" not in verdict, verdict          # nothing to advise on a clean run
