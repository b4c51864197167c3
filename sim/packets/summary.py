"""A packet run as the figures the scenarios report: per-flow throughput
(Gbit/s of payload delivered: mean, min, max, Jain's fairness), the
bottleneck queue (the egress with the largest mean queue: its peak and mean
bytes), PFC pauses sent and the fraction of time the senders' NICs were held
in XOFF, InfiniBand credit stalls, drops and retransmitted bytes, ECN marks,
and the completion time (None when some flow had not finished by the end).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

import numpy as np

from sim.packets import columns as lo
from sim.packets.engine import Run


def jain(x: np.ndarray) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one has it all."""
    x = np.asarray(x, dtype=float)
    return float(x.sum() ** 2 / (len(x) * (x ** 2).sum())) if (x ** 2).sum() > 0 else 1.0


def throughputs(run: Run, flows: Optional[np.ndarray] = None) -> np.ndarray:
    """Each flow's delivered payload over its own time (to its completion,
    or to the end of the run), Gbit/s."""
    FL = run.flows if flows is None else run.flows[flows]
    end = np.where(FL[:, lo.F_DONE] >= 0, FL[:, lo.F_DONE] + 1, run.slots)
    bits = FL[:, lo.F_DELIV] * run.payload_bytes * 8.0
    return bits / (end * run.slot_ps * 1e-3)


def completion_us(run: Run) -> Optional[float]:
    done = run.flows[:, lo.F_DONE]
    if (done < 0).any():
        return None
    return float((done.max() + 1) * run.slot_ps * 1e-6)


def bottleneck(run: Run) -> int:
    return int(np.argmax(run.links[:, lo.L_QSUM]))


def figures(run: Run, flows: Optional[np.ndarray] = None) -> Dict[str, float]:
    """The report's figures for a run (over `flows` for the throughput)."""
    LK, FL, w = run.links, run.flows, run.wiring
    gbps = throughputs(run, flows)
    b = bottleneck(run)
    senders = np.unique(FL[:, lo.F_SRC])
    uplinks = w.host_link[senders]
    return {
        "gbps_mean": float(gbps.mean()), "gbps_min": float(gbps.min()),
        "gbps_max": float(gbps.max()), "jain": jain(gbps),
        "queue_peak_kb": LK[b, lo.L_QPEAK] * run.wire_bytes / 1e3,
        "queue_mean_kb": LK[b, lo.L_QSUM] / max(run.slots, 1) * run.wire_bytes / 1e3,
        "pauses": int(LK[:, lo.L_PAUSES].sum()),
        "paused_frac": float(LK[uplinks, lo.L_XOFF].sum() / (len(uplinks) * max(run.slots, 1))),
        "credit_stalls": int(LK[:, lo.L_STALLS].sum()),
        "drops": int(LK[:, lo.L_DROPS].sum()),
        "retx_mb": float(FL[:, lo.F_RTX].sum() * run.payload_bytes / 1e6),
        "ecn_marks": int(LK[:, lo.L_ECN].sum()),
        "timeouts": int(run.totals[lo.S_TIMEOUTS]),
        "completion_us": completion_us(run),
        "overflow": int(run.totals[lo.S_OVERFLOW]),
    }


COLUMNS = (("gbps_mean", "Gb/s mean", "{:.1f}"), ("gbps_min", "min", "{:.1f}"),
           ("gbps_max", "max", "{:.1f}"), ("jain", "Jain", "{:.3f}"),
           ("queue_peak_kb", "queue peak KB", "{:.0f}"), ("queue_mean_kb", "mean KB", "{:.0f}"),
           ("pauses", "PAUSEs", "{}"), ("paused_frac", "XOFF frac", "{:.3f}"),
           ("credit_stalls", "credit stalls", "{}"), ("drops", "drops", "{}"),
           ("retx_mb", "retx MB", "{:.2f}"), ("ecn_marks", "ECN marks", "{}"),
           ("completion_us", "done us", "{:.0f}"))


def table(title: str, rows: Iterable[tuple], extra: Iterable[tuple] = ()) -> str:
    """Rows of (preset, figures) as a fixed-width table; `extra` adds
    (key, header, format) columns."""
    cols = list(COLUMNS) + list(extra)
    lines: List[str] = [title, "  ".join([f"{'preset':<11}"] + [f"{h:>9}" for _, h, _ in cols])]
    for name, fig in rows:
        cells = [("-" if fig.get(k) is None else fmt.format(fig[k])) for k, _, fmt in cols]
        lines.append("  ".join([f"{name:<11}"] + [f"{c:>9}" for c in cells]))
    return "\n".join(lines)
