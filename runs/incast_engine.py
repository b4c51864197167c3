"""An incast in the packet engine alone, at a fabric's own numbers
(`run_topology.py FABRIC --engine sim --incast N`, or `--incast N` on a file
whose `experiment.engine` is sim): no lab, no root.

The receiver and the senders are the lab's incast's (`incast_plan`). The
preset is the one the fabric's network technology names for the options
the file sets (`Technology.packet_preset`: `network: {technology: roce,
ecn: false}` is roce-pfc). The links are the file's server links: their
rate, the payload the file's MTU leaves the preset's packets
(sim/packets/presets.py `on_link`: header_bytes stays the preset's), their
delay as the host cable's propagation, and for a preset with a static
drop-tail queue (tcp) their `queue_packets`; the switch's shared buffer,
thresholds and timers are the preset's, and so is its switch latency unless
the file sets `network.switch_latency_us`.

The engine steps every link once per frame time, so its cost grows with
the rate and the senders, not with what happens: a run is held to
WORK_BUDGET link-slots (about 10 s of the engine on this 2-core host) and
simulates only the first part of `--seconds` where all of it would take
longer, and says so (16 senders at 400 Gbit/s and a 9000-byte MTU: the first
91 ms under RoCE, 196 ms under tcp, each some 6 s of the engine here).

Where the engine's one-switch incast is not the fabric's, it refuses in one
sentence (ValueError): a technology without a packet model, senders on
another switch or links of different rates (`not_comparable`), a sender in
the receiver's own server or two sharing a NIC, links that lose frames.
"""

from __future__ import annotations

from typing import Optional

from networks import all_networks
from runs.incast_beside import not_comparable
from sim.packets.presets import CREDITS, KERNEL_TCP, LOSSY, PFC, on_link, preset
from traffic.measure.incast import incast_plan

# link-slots a run may take: slots x (links + PER_SLOT), measured at 4-6
# million a second on this host (16 to 255 senders, every preset)
WORK_BUDGET = 50e6
PER_SLOT = 12       # what a slot costs beyond its links, in links (measured: 1 sender)


def engine_plan(fabric, senders: int, seconds: int) -> dict:
    """What the engine would run for `--incast senders` on `fabric`: the
    receiver, the senders, the technology and its preset, the numbers the
    preset is given, the link, and the seconds it simulates. ValueError, one
    sentence, where it cannot."""
    tech = fabric.network.configured(fabric.network_settings)
    name = tech.packet_preset()
    if not name:
        modelled = [t.name for t in all_networks().values() if t.packet_preset()]
        raise ValueError(f"--incast {senders} with --engine sim: the network technology "
                         f"{tech.name} ({tech.title}) has no model in the packet engine, which "
                         f"models {', '.join(modelled)}")
    receiver, sources = incast_plan(fabric, senders)
    why = (not_comparable(fabric, {"receiver": receiver, "senders": sources})
           or shared_links(fabric, receiver, sources))
    if why:
        raise ValueError(f"--incast {senders} with --engine sim: {why}")
    spec = next(link.spec for link in fabric.links if link.kind == "server_leaf")
    if spec.loss_percent > 0:
        raise ValueError(f"{fabric.source}: links.server_leaf.loss_percent is "
                         f"{spec.loss_percent:g}, and the packet engine loses frames only at "
                         "full queues: set it to 0 for --incast with --engine sim")
    overrides = {**on_link(name, spec.rate_mbit / 1000, fabric.mtu, spec.queue_packets),
                 **timing(fabric, name, spec.delay_ms)}
    p = preset(name).with_values(**overrides)
    payload, frame = int(p.value("mtu_bytes")), int(p.value("mtu_bytes") + p.value("header_bytes"))
    slot_s = frame * 8 / (spec.rate_mbit * 1e6)
    budget_s = WORK_BUDGET / (2 * (len(sources) + 1) + PER_SLOT) * slot_s
    return {"receiver": receiver, "senders": sources, "technology": tech.name,
            "network": tech.describe(), "preset": name, "preset_summary": p.summary,
            "rate_mbit": spec.rate_mbit, "payload_bytes": payload, "frame_bytes": frame,
            "seconds": seconds, "simulated_s": round(min(seconds, budget_s), 6),
            "capped": budget_s < seconds, "overrides": overrides}


def timing(fabric, name: str, delay_ms: float) -> dict:
    """The file's own times where it sets them: a switch crossed
    (`network.switch_latency_us`), a server link's delay (as its cable)."""
    out = {}
    if "switch_latency_us" in fabric.network_settings:
        out["switch_latency_ns"] = fabric.switch_latency_us * 1000
    if delay_ms > 0:
        out["host_cable_m"] = delay_ms * 1e6 / preset(name).value("ns_per_m")
    return out


def shared_links(fabric, receiver: str, senders) -> Optional[str]:
    """Why the senders do not each have a link of their own into the
    switch (a sender in the receiver's server, two sharing a NIC), or None."""
    home = fabric.endpoint(receiver)
    seen = {(home.leaf, home.port): receiver}
    for name in senders:
        end = fabric.endpoint(name)
        if end.server == home.server:
            return (f"{name} is in {receiver}'s own server ({home.server}), so it would send "
                    "over the server's scale-up links, not through the switch")
        other = seen.setdefault((end.leaf, end.port), name)
        if other != name:
            return (f"{other} and {name} share a NIC ({end.leaf} port {end.port}), and the "
                    "packet engine's incast gives every sender a link of its own")
    return None


def engine_incast(fabric, senders: int, seconds: int) -> dict:
    """The incast run in the packet engine (summary.json's `incast`: no
    lab, the engine's plan and figures)."""
    from sim.packets import scenarios
    plan = engine_plan(fabric, senders, seconds)
    out = scenarios.incast(plan["preset"], senders=senders, per_sender_bytes=None,
                           horizon_us=plan["simulated_s"] * 1e6, overrides=plan["overrides"])
    return {"lab": None, "engine": {**plan, **engine_figures(out)}}


def engine_figures(out) -> dict:
    """A run's figures as the lab's incast has them (share of the payload
    rate, per-flow Mbit/s, Jain, losses, the queue in frames), and the
    preset's own where it has them: PFC's pauses, InfiniBand's credit
    stalls, ECN marks, a lossy transport's timeouts, TCP's fast retransmits."""
    from sim.packets.summary import throughputs
    fig, run = out.figures, out.run
    p = run.preset
    mbit = [float(g) * 1000 for g in throughputs(run)]
    sent = max(fig["tx_pkts"], 1)
    record = {"goodput_share": round(fig["line_frac"], 4),
              "flow_mbit_s": {"min": round(min(mbit), 3),
                              "mean": round(sum(mbit) / len(mbit), 3),
                              "max": round(max(mbit), 3)},
              "jain": round(fig["jain"], 4), "packets_sent": int(fig["tx_pkts"]),
              "lost": fig["drops"], "loss_fraction": round(fig["drop_frac"], 5),
              "retransmit_fraction": round(fig["retx_mb"] * 1e6 / run.payload_bytes / sent, 5),
              "queue_mean_packets": round(float(fig["queue_mean_kb"]) * 1e3 / run.wire_bytes, 1),
              "queue_peak_packets": round(float(fig["queue_peak_kb"]) * 1e3 / run.wire_bytes),
              "base_rtt_ms": round(float(fig["base_rtt_ms"]), 4), "wall_s": round(run.wall_s, 2)}
    if p.flow_control == PFC:
        record.update(pauses=fig["pauses"], paused_fraction=round(fig["paused_frac"], 4))
    if p.flow_control == CREDITS:
        record["credit_stalls"] = fig["credit_stalls"]
    if p.ecn:
        record["ecn_marks"] = fig["ecn_marks"]
    if p.flow_control == LOSSY:
        record["timeouts"] = fig["timeouts"]
    if p.transport == KERNEL_TCP:
        record["fast_retransmits"] = fig["fast_retransmits"]
    return record
