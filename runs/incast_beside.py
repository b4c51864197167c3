"""An incast measured on the lab with real TCP, beside the packet engine's
prediction of the same incast (`run_topology.py --incast N`).

The engine is given what the lab has: the bottleneck's rate, its frame
(the MTU and Ethernet's 14 bytes, as HTB counts a frame) and TCP's payload
in it (MSS: the MTU less 52 bytes of IP, TCP and timestamp option), the
drop-tail queue's length in frames, Reno, and the same senders for the
same seconds. Its round trip is its own (a frame's wire time each way and
the receiver's turn-around), beside the lab's idle ping. It
models one switch, so it stands beside the lab only when the senders share
the receiver's switch; otherwise the record says why there is none.

Each side's figures are the same quantities: goodput over the link's
payload rate, per-flow spread (Jain's index), losses and retransmissions
per segment sent, the bottleneck queue in frames.
"""

from __future__ import annotations

from typing import Optional

from traffic.measure.incast import run_incast

TCP_IP_HEADERS = 52          # IPv4 20 + TCP 20 + timestamps option 12 (Linux's default)
ETHERNET = 14                # what HTB counts of a frame beyond the IP packet
PRESET = "tcp"


def incast_beside(lab, senders: int, seconds: int) -> dict:
    """The lab's incast, the engine's beside it (or why none), and what bent
    the lab's figures."""
    measured = run_incast(lab, senders, seconds)
    record = {"lab": {**measured, **lab_figures(measured)}}
    why = not_comparable(lab.fabric, measured)
    record["engine"] = None
    if why is None:
        try:
            record["engine"] = engine_figures(measured)
        except ValueError as exc:           # a number the engine cannot take
            why = f"the packet engine refused the lab's numbers: {exc}"
    if why:
        record["engine_none"] = why
    record["bent"] = bent(measured)
    return record


def lab_figures(m: dict) -> dict:
    """The comparable figures of a lab incast."""
    b = m["bottleneck"]
    mss = b["frame_bytes"] - ETHERNET - TCP_IP_HEADERS
    payload = b["rate_mbit"] * mss / b["frame_bytes"]
    rates = [f["mbit_s"] for f in m["flows"]]
    sent = max(m["segments_sent"], 1)
    return {"goodput_share": round(m["goodput_mbit_s"] / payload, 4),
            "flow_mbit_s": {"min": min(rates), "mean": round(sum(rates) / len(rates), 3),
                            "max": max(rates)},
            "jain": round(jain(rates), 4), "lost": m["lost"],
            "loss_fraction": round(m["lost"] / sent, 5),
            "retransmit_fraction": round(m["retransmits"] / sent, 5),
            "queue_mean_packets": b["queue_mean_packets"],
            "queue_peak_packets": b["queue_peak_packets"]}


def jain(x) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one has it all."""
    square = sum(v * v for v in x)
    return sum(x) ** 2 / (len(x) * square) if square > 0 else 1.0


def engine_overrides(m: dict) -> dict:
    """The engine's numbers for the lab's incast."""
    b = m["bottleneck"]
    mss = b["frame_bytes"] - ETHERNET - TCP_IP_HEADERS
    return {"link_gbps": b["rate_mbit"] / 1000, "mtu_bytes": mss,
            "header_bytes": b["frame_bytes"] - mss, "queue_limit_pkts": b["queue_packets"]}


def engine_figures(m: dict) -> dict:
    """The packet engine's incast with the lab's numbers, as lab_figures."""
    from sim.packets import scenarios
    from sim.packets.summary import throughputs
    out = scenarios.incast(PRESET, senders=len(m["senders"]), per_sender_bytes=None,
                           horizon_us=m["seconds"] * 1e6, overrides=engine_overrides(m))
    fig, run = out.figures, out.run
    mbit = [g * 1000 for g in throughputs(run)]
    sent = max(fig["tx_pkts"], 1)
    return {"goodput_share": round(fig["line_frac"], 4),
            "flow_mbit_s": {"min": round(min(mbit), 3), "mean": round(sum(mbit) / len(mbit), 3),
                            "max": round(max(mbit), 3)},
            "jain": round(fig["jain"], 4), "lost": fig["drops"],
            "loss_fraction": round(fig["drop_frac"], 5),
            "retransmit_fraction": round(fig["retx_mb"] * 1e6 / run.payload_bytes / sent, 5),
            "queue_mean_packets": round(float(fig["queue_mean_kb"]) * 1e3 / run.wire_bytes, 1),
            "queue_peak_packets": round(float(fig["queue_peak_kb"]) * 1e3 / run.wire_bytes),
            "timeouts": fig["timeouts"], "fast_retransmits": fig["fast_retransmits"],
            "base_rtt_ms": round(fig["base_rtt_ms"], 3), "wall_s": round(run.wall_s, 2),
            "overrides": engine_overrides(m)}


def not_comparable(fabric, m: dict) -> Optional[str]:
    """Why the engine's one-switch incast is not this one, or None."""
    leaf = fabric.endpoint(m["receiver"]).leaf
    away = [s for s in m["senders"] if fabric.endpoint(s).leaf != leaf]
    if away:
        return (f"{len(away)} of the senders are not on {m['receiver']}'s switch, and the "
                "packet engine's incast is one switch")
    rates = {l.spec.rate_mbit for l in fabric.links if l.kind == "server_leaf"}
    if len(rates) > 1:
        return "the servers' links differ in rate, and the packet engine's incast has one rate"
    return None


def bent(m: dict) -> list:
    """What the host did to the lab's figures: links held back by it, a
    flow iperf3 reported failed, the CPU busy throughout."""
    notes = []
    if m["shortfalls"]:
        notes.append(f"{len(m['shortfalls'])} link interval(s) sent less than their queue "
                     "owed: the host, not the link, held them back")
    failed = [f["src"] for f in m["flows"] if "error" in f]
    if failed:
        notes.append(f"iperf3 failed from {', '.join(failed)}")
    if m["cpu_busy_pct"] > 90:
        notes.append(f"the host's CPU was {m['cpu_busy_pct']:.0f}% busy")
    return notes
