"""A packet run as the figures the scenarios report: per-flow throughput
(Gbit/s of payload delivered: mean, min, max, Jain's fairness), the
bottleneck queue (the egress with the largest mean queue: its peak and mean
bytes), PFC pauses sent and the fraction of time the senders' NICs were held
in XOFF, InfiniBand credit stalls, drops and retransmitted bytes, ECN marks,
and the completion time (None when some flow had not finished by the end);
and the transports' own: goodput summed and over the line, packets sent and
the drop fraction, TCP's timeouts, fast retransmits, recoveries and RTT.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional

import numpy as np

from sim.packets import columns as lo
from sim.packets.engine import Run
from sim.packets.presets import KERNEL_TCP


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
        **transport_figures(run, gbps),
    }


def transport_figures(run: Run, gbps: np.ndarray) -> Dict[str, float]:
    """What the senders put on the wire and how they recovered: the flows'
    goodput summed and as a fraction of one link's payload rate (at a
    single bottleneck, how much of it was used), packets sent (new and
    resent: drops over it is the drop fraction), TCP's fast retransmits and
    recovery episodes, and its smoothed RTT at the end (mean over the flows
    with a sample)."""
    FL, LK, p = run.flows, run.links, run.preset
    line = p.value("link_gbps") * run.payload_bytes / run.wire_bytes
    sent = int(FL[:, lo.F_TX].sum())
    srtt = run.rates[:, lo.R_SRTT] if run.rates is not None else np.zeros(0)
    srtt = srtt[srtt > 0]
    return {
        "gbps_sum": float(gbps.sum()), "line_frac": float(gbps.sum() / line),
        "tx_pkts": sent, "drop_frac": float(LK[:, lo.L_DROPS].sum() / max(sent, 1)),
        "fast_retransmits": int(FL[:, lo.F_FRTX].sum()),
        "recoveries": int(FL[:, lo.F_RECOVS].sum()),
        "srtt_ms": (float(srtt.mean() * run.slot_ps * 1e-9)
                    if p.transport == KERNEL_TCP and len(srtt) else None),
    }


COLUMNS = (("gbps_mean", "Gb/s mean", "{:.1f}"), ("gbps_min", "min", "{:.1f}"),
           ("gbps_max", "max", "{:.1f}"), ("jain", "Jain", "{:.3f}"),
           ("queue_peak_kb", "queue peak KB", "{:.0f}"), ("queue_mean_kb", "mean KB", "{:.0f}"),
           ("pauses", "PAUSEs", "{}"), ("paused_frac", "XOFF frac", "{:.3f}"),
           ("credit_stalls", "credit stalls", "{}"), ("drops", "drops", "{}"),
           ("retx_mb", "retx MB", "{:.2f}"), ("ecn_marks", "ECN marks", "{}"),
           ("completion_us", "done us", "{:.0f}"))


# the columns a kernel TCP run adds (table's `extra`)
TCP_COLUMNS = (("line_frac", "of line", "{:.3f}"), ("drop_frac", "drop frac", "{:.4f}"),
               ("timeouts", "RTOs", "{}"), ("fast_retransmits", "fast rtx", "{}"),
               ("recoveries", "recoveries", "{}"), ("srtt_ms", "srtt ms", "{:.2f}"))


def table(title: str, rows: Iterable[tuple], extra: Iterable[tuple] = ()) -> str:
    """Rows of (preset, figures) as a fixed-width table; `extra` adds
    (key, header, format) columns."""
    cols = list(COLUMNS) + list(extra)
    lines: List[str] = [title, "  ".join([f"{'preset':<11}"] + [f"{h:>9}" for _, h, _ in cols])]
    for name, fig in rows:
        cells = [("-" if fig.get(k) is None else fmt.format(fig[k])) for k, _, fmt in cols]
        lines.append("  ".join([f"{name:<11}"] + [f"{c:>9}" for c in cells]))
    return "\n".join(lines)
