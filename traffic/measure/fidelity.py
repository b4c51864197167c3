"""The fidelity verdict: did the host keep up with the fabric it emulates?

Trustworthy unless a link with a queue sent less than the queue owed it at
the link's rate (traffic/measure/monitor.py finds those shortfalls). High CPU
is reported as the likely cause, with a lower rate to try. HOST-BOUND: the
links kept their rates, but a size took far longer than the alpha-beta model
with the CPU busy, so the rank processes, not the links, set the pace.
"""

from __future__ import annotations

from typing import List

OVS_BUSY = 95.0         # % of a core: the forwarding thread is saturated
CPU_BUSY_WARN = 95.0
HOST_BOUND_RATIO, HOST_BOUND_CPU = 2.0, 80.0   # slower than the model, with the CPU busy


def fidelity(summaries: List[dict], fabric) -> dict:
    """Trustworthy unless a saturated link ran below its rate; high CPU is
    reported as the likely cause, with a lower rate to try."""
    shortfalls = [s for w in summaries for s in w["shortfalls"]]
    cpu = max((w["cpu_busy_pct"] for w in summaries), default=0.0)
    ovs = max((w["ovs_core_pct"] for w in summaries), default=0.0)
    rate = min(l.spec.rate_mbit for l in fabric.links)
    verdict = {"trustworthy": not shortfalls, "saturated_intervals_below_rate": len(shortfalls),
               "worst": sorted(shortfalls, key=lambda s: s[1])[:5],
               "max_cpu_busy_pct": round(cpu, 1), "max_ovs_core_pct": round(ovs, 1)}
    if shortfalls:
        worst = min(s[1] for s in shortfalls)
        verdict["advice"] = (f"the host could not keep queued links at their rate (worst: "
                             f"{worst:.0%} of what was owed; CPU {cpu:.0f}%, ovs-vswitchd {ovs:.0f}% of a "
                             f"core): try link rates of {max(rate * worst * 0.8, 0.1):.3g} "
                             f"Mbit/s or less, or `run_topology.py --calibrate`")
    elif cpu > CPU_BUSY_WARN or ovs > OVS_BUSY:
        verdict["advice"] = (f"links kept their rates, but the CPU was {cpu:.0f}% busy and "
                             f"ovs-vswitchd used {ovs:.0f}% of its core: when forwarding is "
                             "the bottleneck, packets wait before the link queues, where this "
                             "check cannot see them; lower rates would be safer")
    return verdict


def mark_host_bound(verdict: dict, runs: List[dict]) -> dict:
    """Add the HOST-BOUND verdict when a size ran far slower than its model
    while the CPU was busy."""
    slow = max((r["measured_over_predicted"] or 0 for r in runs), default=0)
    if slow > HOST_BOUND_RATIO and verdict["max_cpu_busy_pct"] > HOST_BOUND_CPU:
        verdict["host_bound"] = True
        verdict["advice"] = "; ".join(filter(None, [verdict.get("advice"), (
            f"a size took {slow:.1f}x the alpha-beta time while the CPU was "
            f"{verdict['max_cpu_busy_pct']:.0f}% busy: the rank processes, not the links, "
            "set the pace; lower link rates or fewer ranks measure the fabric instead")]))
    return verdict
