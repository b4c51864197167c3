"""The fidelity verdict: did the host keep up with the fabric it emulates?

Trustworthy unless a link with a queue sent less than the queue owed it at
the link's rate (traffic/measure/monitor.py finds those shortfalls). High CPU
is reported as the likely cause, with a lower rate to try. HOST-BOUND: the
links kept their rates, but a size took far longer than the alpha-beta model
with the CPU busy, or over 1.25x the simulated time with the CPU saturated,
so the rank processes, not the links, set the pace. Over 1.25x the simulated
time with the CPU not saturated, a size is flagged *slower-than-simulated*:
more than the simulator ever misses a trusted size by, so not a figure of
the fabric (one Open vSwitch thread forwarding at 80-85% of a core read
1.55x; split over two daemons the same fabric ran 20% faster).

Per size, two flags say a figure is not one to quote, whatever the host did
(`size_flags`, `mark_unresolved`): *over-rate*, busbw beat the link rate,
which no real link allows; *below-resolution*, what the shaper may pass
unpaid (lab/shaping.py: an idle HTB bucket plus one frame, per dependent
step) is more than a fifth of the time the size's bytes need at the link
rate, so the shaping, not the fabric, shapes the figure. Either makes the
run's verdict say which sizes to read.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import List, Optional

from lab.shaping import unpaid_bytes

OVS_BUSY = 95.0         # % of a core: the forwarding thread is saturated
CPU_BUSY_WARN = 95.0
HOST_BOUND_RATIO, HOST_BOUND_CPU = 2.0, 80.0   # slower than the model, with the CPU busy
SIM_HOST_BOUND = 1.25   # measured/simulated past the simulator's worst on trusted sizes (0.21)
UNPAID_SHARE = 0.2      # at most this share of a size's serialisation may go unpaid
SLOWER = "slower-than-simulated"   # a size's flag: far behind the simulator, CPU not saturated
TRY_SHARE = 0.8         # a rate to try: this share of what the host sustained (or was owed)
HEADLINE_CHARS = 120    # the verdict's first sentence stays within this
PACE = ("the rank processes, not the links, set the pace; lower link rates or fewer ranks "
        "measure the fabric instead")
QUOTE_FROM = "; quote sizes from about {kb:.0f} KB up, or lower the MTU"


def fidelity(summaries: List[dict], fabric) -> dict:
    """Trustworthy unless a saturated link ran below its rate; high CPU is
    reported as the likely cause, with a lower rate to try."""
    shortfalls = [s for w in summaries for s in w["shortfalls"]]
    cpu = max((w["cpu_busy_pct"] for w in summaries), default=0.0)
    ovs = max((w["ovs_core_pct"] for w in summaries), default=0.0)
    rate = min(l.spec.rate_mbit for l in fabric.links)
    verdict = {"trustworthy": not shortfalls, "host_kept_up": not shortfalls, "saturated_intervals_below_rate": len(shortfalls),
               "worst": sorted(shortfalls, key=lambda s: s[1])[:5],
               "max_cpu_busy_pct": round(cpu, 1), "max_ovs_core_pct": round(ovs, 1)}
    if shortfalls:
        worst = min(s[1] for s in shortfalls)
        verdict["advice"] = (f"the host could not keep queued links at their rate (worst: "
                             f"{worst:.0%} of what was owed; CPU {cpu:.0f}%, ovs-vswitchd {ovs:.0f}% of a "
                             f"core): try link rates of {max(rate * worst * 0.8, 0.1):.3g} "
                             f"Mbit/s or less, or `run_topology.py --calibrate`")
    elif cpu > CPU_BUSY_WARN or ovs > OVS_BUSY:
        verdict["advice"] = (f"the CPU was {cpu:.0f}% busy and "
                             f"ovs-vswitchd used {ovs:.0f}% of its core: when forwarding is "
                             "the bottleneck, packets wait before the link queues, where this "
                             "check cannot see them; lower rates would be safer")
    return verdict


def mark_host_bound(verdict: dict, runs: List[dict], sim_faithful: bool = True) -> dict:
    """Add the HOST-BOUND verdict when a size ran far slower than its model
    while the CPU was busy; or slower than the simulator beside it by more
    than the simulator ever misses a trusted size, with the CPU saturated
    (the links kept their rates, so only the time shows it). Not
    `sim_faithful` (flowlet: the simulator keeps each transfer on one hashed
    path), the simulator's time judges nothing."""
    slow = max((r["measured_over_predicted"] or 0 for r in runs), default=0)
    behind = [r for r in runs if sim_faithful
              and (r.get("measured_over_simulated") or 0) > SIM_HOST_BOUND]
    saturated = [r for r in behind if r.get("cpu_busy_pct", 0) > CPU_BUSY_WARN]
    why = None
    if slow > HOST_BOUND_RATIO and verdict["max_cpu_busy_pct"] > HOST_BOUND_CPU:
        why = (f"a size took {slow:.1f}x the alpha-beta time while the CPU was "
               f"{verdict['max_cpu_busy_pct']:.0f}% busy")
    elif saturated:
        worst = max(saturated, key=lambda r: r["measured_over_simulated"])
        why = (f"{worst['size_bytes']} B took {worst['measured_over_simulated']:.2f}x the "
               f"simulated time while the CPU was {worst['cpu_busy_pct']:.0f}% busy")
    elif behind:
        _mark_slower(verdict, behind)
    if why:
        verdict["host_bound"] = True
        verdict["advice"] = "; ".join(filter(None, [verdict.get("advice"), (
            f"{why}: {PACE}")]))
    return verdict


def _mark_slower(verdict: dict, behind: List[dict]) -> None:
    """Sizes far behind the simulator with the links at their rates and the
    CPU not saturated: neither the fabric nor, provably, the host; not
    figures to quote (on this host the same fabric split over two
    Open vSwitch daemons ran 20% faster: docs/benchmarks.md)."""
    for r in behind:
        r.setdefault("flags", []).append(SLOWER)
    worst = max(behind, key=lambda r: r["measured_over_simulated"])
    verdict["advice"] = "; ".join(filter(None, [verdict.get("advice"), (
        f"{_sizes([r['size_bytes'] for r in behind])} B took up to "
        f"{worst['measured_over_simulated']:.2f}x the simulated time with the links at their "
        f"rates (CPU {worst.get('cpu_busy_pct', 0):.0f}%, ovs-vswitchd "
        f"{worst.get('ovs_core_pct', 0):.0f}% of a core): more than the simulator misses "
        "by, so the host's forwarding or the rank processes likely set the pace; lower link "
        "rates (--calibrate) tell")]))


def size_flags(busbw_over_link: float, steps: int, serialisation_s: float,
               rate_mbit: float, mtu: int, local: int = 1) -> dict:
    """Whether one size's figures can be quoted: the flags (over-rate,
    below-resolution) and the unpaid time they were judged by. On servers of
    several GPUs (`local` > 1) busbw counts NVLink bytes too and may exceed
    the NIC's rate honestly, so only one-GPU servers are held to it (the
    links' own utilisation is, everywhere)."""
    unpaid_s = steps * unpaid_bytes(rate_mbit, mtu) * 8 / (rate_mbit * 1e6)
    flags = []
    if busbw_over_link > 1.0 and local == 1:
        flags.append("over-rate")
    if unpaid_s > UNPAID_SHARE * serialisation_s:
        flags.append("below-resolution")
    return {"flags": flags, "shaper_unpaid_bound_s": unpaid_s,
            "serialisation_s": serialisation_s}


def mark_unresolved(verdict: dict, runs: List[dict], rate_mbit: float, mtu: int) -> dict:
    """Flagged sizes are not trustworthy figures: the verdict lists them,
    with the smallest size this rate resolves and what would resolve more."""
    verdict["flagged_sizes"] = [r["size_bytes"] for r in runs if r["flags"]]
    if verdict["flagged_sizes"]:
        verdict["trustworthy"] = False
    # below the shaper's resolution, or faster than the link (SLOWER: mark_host_bound's)
    flagged = [r for r in runs if set(r["flags"]) - {SLOWER}]
    if not flagged:
        return verdict
    frame_ms = (mtu + 14) * 8 / (rate_mbit * 1e3)
    over = [r["size_bytes"] for r in flagged if "over-rate" in r["flags"]]
    # serialisation grows with the size, the unpaid bound does not
    need = max(r["size_bytes"] * r["shaper_unpaid_bound_s"] / (UNPAID_SHARE * r["serialisation_s"])
               for r in flagged if r["serialisation_s"] > 0) if any(
        r["serialisation_s"] > 0 for r in flagged) else None
    why = (f"{_sizes([r['size_bytes'] for r in flagged])} B are too small to measure at {rate_mbit:g} "
           f"Mbit/s: an idle shaped link lets its first frames out unpaid ({frame_ms:.2g} ms "
           f"per {mtu + 14}-byte frame), which a real link charges"
           + (f"; busbw beat the link rate at {_sizes(over)} B" if over else "")
           + (QUOTE_FROM.format(kb=need / 1024) if need else ""))
    verdict["advice"] = "; ".join(filter(None, [verdict.get("advice"), why]))
    if need:
        verdict["quote_from_bytes"] = int(need)
    return verdict


def calibrated_rate(results: Path, fabric_name: str) -> Optional[float]:
    """The ceiling the newest `--calibrate` of this fabric found (its
    `<time>-<name>-calibration/calibration.json` under `results`): the
    highest rate the host kept up with; None without such a record."""
    for folder in sorted(Path(results).glob(f"*-{fabric_name}-calibration"), reverse=True):
        try:
            rows = json.loads((folder / "calibration.json").read_text())
        except (OSError, ValueError):
            continue
        kept = [r["rate_mbit"] for r in rows if isinstance(r, dict) and r.get("kept_up")]
        if kept:
            return max(kept)
    return None


def mark_rate_to_try(verdict: dict, runs: List[dict], rate_mbit: float,
                     calibrated: Optional[float] = None) -> dict:
    """A HOST-BOUND verdict's rate to try: the ceiling `--calibrate` found
    for this fabric where it is below the run's rate, else TRY_SHARE of the
    most per link the host sustained in this run (the best size's busbw/link
    times the link rate: the host moved that much while it set the pace)."""
    if not verdict.get("host_bound"):
        return verdict
    if calibrated and calibrated < rate_mbit:
        verdict["try_rate_mbit"], verdict["try_rate_from"] = calibrated, "--calibrate"
        return verdict
    best = max((r.get("busbw_over_link") or 0 for r in runs), default=0) * rate_mbit
    verdict["try_rate_mbit"] = float(f"{max(min(best, rate_mbit) * TRY_SHARE, 0.1):.2g}")
    verdict["try_rate_from"] = "this run"
    return verdict


def headline(verdict: dict, rate_mbit: float) -> str:
    """The verdict's first sentence, short (HEADLINE_CHARS at most): what
    to do, with the rate to try where the host held the figures back."""
    if verdict.get("host_bound"):
        rate = verdict.get("try_rate_mbit")
        where = {"--calibrate": " (--calibrate's ceiling)"}.get(verdict.get("try_rate_from"), "")
        return ("HOST-BOUND: the ranks, not the links, set the pace"
                + (f"; try links of {rate:g} Mbit/s{where}." if rate else "."))
    if not verdict.get("host_kept_up", verdict["trustworthy"]):
        worst = min((w[1] for w in verdict.get("worst", [])), default=0.5)
        return (f"UNTRUSTWORTHY: links fell below their rate; try links of "
                f"{max(rate_mbit * worst * TRY_SHARE, 0.1):.3g} Mbit/s or less.")
    if verdict.get("flagged_sizes"):
        start = verdict.get("quote_from_bytes")
        return ("links kept their rates; quote "
                + (f"sizes from about {start / 1024:.0f} KB up." if start else
                   "only the sizes with no note."))
    return "trustworthy: every saturated link ran at its configured rate."


def verdict_lines(verdict: dict, rate_mbit: float, width: int = 100) -> List[str]:
    """The verdict as the fabric table ends: the headline, then its details
    wrapped to `width`: the advice less what the headline said already (the
    pace the ranks set, the size to quote from), so that each is said once."""
    lines = [f"# Fidelity: {headline(verdict, rate_mbit)}"]
    details = verdict.get("advice", "")
    if verdict.get("host_bound"):
        details = details.replace(f": {PACE}", "")
    if verdict.get("quote_from_bytes") and not verdict.get("host_bound") and \
            verdict.get("host_kept_up", verdict["trustworthy"]):
        details = details.replace(QUOTE_FROM.format(kb=verdict["quote_from_bytes"] / 1024),
                                  "; a smaller MTU resolves smaller sizes")
    if details:
        lines += textwrap.wrap(details, width, initial_indent="#   ",
                               subsequent_indent="#   ", break_on_hyphens=False)
    return lines


def _sizes(sizes: List[int]) -> str:
    return ", ".join(str(s) for s in sizes)
