"""The lines a run prints besides the nccl-tests and fabric tables: the
network technology it prices (and that part of summary.json), what --check
found, the uplink bytes per leaf, the intra-/inter-node split, the iperf3
check and the cross traffic. Each function returns text, or the data
--check --json and summary.json give."""

from __future__ import annotations

from dataclasses import asdict
from typing import Dict, List, Optional, Sequence, Tuple

from topologies.fabric import describe_links, emulation_warning
from collectives.metrics import imbalance
from collectives.registry import REDUCING
from runs.experiment import LAB_SECONDS, SIZE_SECONDS, expected, step_plan
from runs.record import RunRecord
from traffic.engines import ENGINES


def network_summary(fabric) -> dict:
    """The fabric's network technology as summary.json gives it."""
    tech = fabric.network
    return {"technology": tech.name, "title": tech.describe(fabric.network_settings),
            "options": fabric.network_settings, "switch_latency_us": fabric.switch_latency_us,
            "message_us": tech.message_us, "lossless": tech.lossless,
            "congestion_control": tech.congestion_control}


def network_line(fabric) -> str:
    """The console's line naming the technology a run prices."""
    tech = fabric.network
    return (f"network  {tech.describe(fabric.network_settings)}, routing {fabric.policy}: "
            f"{fabric.switch_latency_us:g} us a switch, {tech.message_us:g} us a message more "
            f"than verbs, lossless: {tech.lossless} (docs/networks.md)")


def ecn_line(fabric, note: str) -> str:
    """The console's line saying what the lab does (or would do) about ECN,
    where the fabric's technology marks congestion (lab/ecn.py's note)."""
    return f"ecn      {fabric.network.title}: {note}"


def warnings_of(fabric, exp, incast=None, calibrated: Optional[float] = None) -> List[str]:
    """Fabric.warnings, and where a lab is to be built (an experiment of an
    engine that needs one, or an incast), whether its links are past what
    this host can emulate (`calibrated`: the ceiling `--calibrate` found)."""
    builds = incast or (exp is not None and ENGINES[exp.engine].needs_lab)
    in_memory = exp is not None and exp.scale_up == "memory"
    host = emulation_warning(fabric, calibrated, in_memory) if builds else None
    return list(fabric.warnings) + ([host] if host else [])


def check_summary(fabric, exp, compare: Sequence[str] = (), incast=None,
                  calibrated: Optional[float] = None, plan=None,
                  ecn: Optional[dict] = None, engine_incast: Optional[dict] = None) -> str:
    """What `run_topology.py --check` prints for a valid fabric: its network
    technology's line (and `ecn`, what a lab would do about ECN as
    EcnPlan.to_dict gives it, where the technology marks), ending with
    what is unwise in it (`warnings_of`), one `warning:` line each;
    `incast` (receiver, senders, seconds): the incast that replaces the sweep;
    `engine_incast`: the packet engine's plan of one, with no lab
    (runs/incast_engine.py); `plan`: each sweep's experiment where the run
    makes more than `exp` and `compare` say (nccl-tests' types, ops, roots,
    cycles and in-place)."""
    lines = _fabric_lines(fabric, ecn)
    if engine_incast:
        lines.append("  experiment: " + engine_incast_line(engine_incast))
        lines += [f"  warning: {w}" for w in warnings_of(fabric, None, None, calibrated)]
        return "\n".join(lines)
    if incast:
        receiver, senders, seconds = incast
        lines.append(f"  experiment: an incast with real TCP (Reno), {len(senders)} senders "
                     f"({senders[0]} .. {senders[-1]}) into {receiver} for {seconds} s, beside "
                     "the packet engine's")
        lines += [f"  warning: {w}" for w in warnings_of(fabric, None, incast, calibrated)]
        return "\n".join(lines)
    if exp is None:
        lines.append("  experiment: none (one server has no peer to exchange with)")
    elif exp.step is not None and exp.step.get("trace"):
        spec = exp.step["trace"]
        scaled = f" x {spec['replicas']} replicas" if spec["replicas"] > 1 else ""
        lines.append(f"  experiment: a recorded job's iteration, {spec['path']}{scaled}; "
                     f"engine {exp.engine}, {exp.iters} iterations after {exp.warmup} warm-up "
                     "(docs/traces.md)")
    elif exp.step is not None:
        step = step_plan(exp)
        lines.append(f"  experiment: a training step, {len(step.layers)} layers, "
                     f"{sum(l.params for l in step.layers):,} parameters, "
                     f"{step.gradient_bytes:,} B of {step.dtype} gradients in "
                     f"{len(step.buckets)} bucket(s), {step.mode}, overlap "
                     f"{'on' if step.overlap else 'off'}, {step.compute_s:.3f} s of compute; "
                     f"engine {exp.engine}, {exp.iters} steps after {exp.warmup} warm-up")
    else:
        lines.append(f"  experiment: {exp.collective} ({exp.algorithm}), engine {exp.engine}, "
                     f"{exp.datatype}{f' {exp.op}' if exp.collective in REDUCING else ''}, "
                     f"{exp.minbytes} to {exp.maxbytes} B x{exp.stepfactor:g}, {exp.iters} "
                     f"iterations after {exp.warmup} warm-up, {exp.channels} connection(s) "
                     "per peer" + (", NVLink in memory" if exp.scale_up == "memory" else "")
                     + "".join(f", {name}={value}" for name, value in (
                         ("NCCL_ALGO", exp.nccl_algo), ("NCCL_PROTO", exp.nccl_proto)) if value)
                     + (f"; then the same with {', '.join(compare)}" if compare else ""))
        if exp.fail:
            lines.append(f"  failures: {', '.join(exp.fail)} (LINK@SECONDS+DURATION into the "
                         "sweep)")
    parts = expected(fabric, exp, 1 + len(compare), plan)
    if parts is not None:
        lines.append(_expected_line(parts, exp))
    lines += [f"  warning: {w}" for w in warnings_of(fabric, exp, None, calibrated)]
    return "\n".join(lines)


def _fabric_lines(fabric, ecn: Optional[dict]) -> list:
    """--check's lines on the fabric itself: valid, its shape, links,
    routing, network technology (and ECN where a lab would mark)."""
    lines = [f"{fabric.source}: valid", f"  {fabric.shape()}"]
    for kind, text in describe_links(fabric).items():
        lines.append(f"  {kind.replace('_', '-')} links: {text}")
    lines.append(f"  routing: {fabric.policy}; servers {fabric.endpoints[0].ip} .. "
                 f"{fabric.endpoints[-1].ip}")
    return lines + [f"  {line}" for line in [network_line(fabric)]
                    + ([ecn_line(fabric, ecn["note"])] if ecn else [])]


def check_record(fabric, exp, compare: Sequence[str] = (), incast=None,
                 calibrated: Optional[float] = None, plan=None,
                 ecn: Optional[dict] = None, engine_incast: Optional[dict] = None) -> dict:
    """What `--check --json` prints: the check_summary's facts as data."""
    if engine_incast:
        return {**check_record(fabric, None), "experiment": None,
                "expected_seconds": None, "warnings": warnings_of(fabric, None, None, calibrated),
                "incast": {"lab": None, "engine": engine_incast}}
    if incast:
        receiver, senders, seconds = incast
        return {**check_record(fabric, None, ecn=ecn), "experiment": None,
                "expected_seconds": seconds,
                "warnings": warnings_of(fabric, None, incast, calibrated),
                "incast": {"receiver": receiver, "senders": senders, "seconds": seconds}}
    return {"source": str(fabric.source), "valid": True, "fabric": fabric.name,
            "shape": fabric.shape(), "links": describe_links(fabric), "policy": fabric.policy,
            "servers": [h.ip for h in fabric.endpoints[:1] + fabric.endpoints[-1:]],
            "network": network_summary(fabric), "ecn": ecn,
            "experiment": None if exp is None else asdict(exp), "compare": list(compare),
            "expected_seconds": (expected(fabric, exp, 1 + len(compare), plan) or {}).get(
                "seconds"),
            "warnings": warnings_of(fabric, exp, None, calibrated)}


def engine_incast_line(e: dict) -> str:
    """--check's line for an incast in the packet engine alone."""
    n = len(e["senders"])
    return (f"an incast in the packet engine (no lab), {n} sender{'s' if n > 1 else ''} "
            f"({e['senders'][0]} .. {e['senders'][-1]}) into {e['receiver']}: {e['network']} "
            f"as its {e['preset']} preset, links {e['rate_mbit']:g} Mbit/s with "
            f"{e['payload_bytes']} B of payload in {e['frame_bytes']} B frames, for "
            + engine_span(e) + (f": {engine_capped(e)}" if e["capped"] else ""))


def _expected_line(parts: dict, exp) -> str:
    n, sizes = parts["sweeps"], parts["sizes"]
    head = f"  expected: about {_duration(parts['seconds'])} in all: "
    if exp.step is not None:
        what = "the recorded compute, and every operation's bus bytes" \
            if exp.step.get("trace") else "compute, and the gradients"
        return (head + f"{_duration(parts['wire_s'])} of steps ({what} at "
                f"the NIC rate); besides, {LAB_SECONDS:g} s to build, probe and tear down, "
                f"{exp.idle_seconds:g} s of idle latency")
    return (head + f"{n} sweep{'s' if n > 1 else ''} of the sizes, {sizes} "
            f"size{'s' if sizes > 1 else ''} in all, {_duration(parts['wire_s'])} of them "
            f"nccl-tests' bus bytes at the NIC rate; besides, {LAB_SECONDS:g} s to build, "
            f"probe and tear down, {exp.idle_seconds:g} s of idle latency a sweep, "
            f"{SIZE_SECONDS:g} s a size")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def pairs_text(pairs: List[Tuple[str, str]], limit: int = 5) -> str:
    text = ", ".join(f"{a}->{b}" for a, b in pairs[:limit])
    return text + (f" and {len(pairs) - limit} more" if len(pairs) > limit else "")


def uplinks_text(fabric, uplink_bytes: Dict[str, Dict[str, int]], when: str) -> str:
    spine_of = {l.a_intf: l.b for leaf in fabric.leaves for l in fabric.uplinks(leaf.name)}
    lines = [f"uplinks  bytes each leaf sent towards each spine {when}"]
    for leaf, counters in uplink_bytes.items():
        cells = "  ".join(f"{spine_of[i]}:{v / 1e6:7.2f} MB" for i, v in counters.items())
        lines.append(f"         {leaf:>7}  {cells}  "
                     f"(max/mean {imbalance(list(counters.values())):.2f})")
    return "\n".join(lines)


def split_text(result: RunRecord) -> str:
    """Intra-node (NVLink-class) against inter-node (network) traffic; ""
    for one-GPU servers that sent nothing over NVLink-class links."""
    if result.gpus_per_server == 1 and not any(
            r["wire_bytes"]["intra_node"] for r in result.runs):
        return ""
    memory = any("intra_node_in_memory" in r["wire_bytes"] for r in result.runs)
    lines = ["traffic  per size: payload the schedule sends inside servers / between servers; "
             + ("bytes handed over in memory at the NVLink rate (--scale-up memory) / put on "
                "links into servers" if memory else
                "bytes put on NVLink-class links / on links into servers")]
    for r in result.runs:
        p, w = r["payload_bytes"], r["wire_bytes"]
        intra = w["intra_node_in_memory"] if memory else w["intra_node"]
        lines.append(f"         {r['size_bytes']:>10}  payload {p['intra'] / 1e6:8.2f} / "
                     f"{p['inter'] / 1e6:8.2f} MB   wire {intra / 1e6:8.2f} / "
                     f"{w['network_to_servers'] / 1e6:8.2f} MB")
    return "\n".join(lines)


def cross_text(cross: dict) -> str:
    return (f"# Cross traffic {cross['src']} -> {cross['dst']} (iperf3 TCP, whole sweep): "
            + (f"{cross['mbit_s']:.1f} Mbit/s sent over {cross['seconds']:.0f} s, "
               f"{cross['retransmits']} retransmits"
               if "mbit_s" in cross else cross["error"]))


def iperf3_check_text(fabric, traffic: dict) -> str:
    n = len(traffic["pairs"])
    share = traffic["total_mbit_s"] / traffic["server_links_mbit_s"]
    lines = [f"traffic  {n} iperf3 TCP tests x {traffic['streams_per_pair']} flows for "
             f"{traffic['seconds']:g} s: {traffic['total_mbit_s']:.1f} Mbit/s in total, "
             f"{share:.0%} of the {traffic['server_links_mbit_s']:g} Mbit/s the senders' "
             "links allow"]
    for flow in traffic["pairs"]:
        err = f"  ({flow['error']})" if "error" in flow else ""
        lines.append(f"         {flow['src']:>6} -> {flow['dst']:<6} {flow['mbit_s']:8.1f} "
                     f"Mbit/s  {flow['retransmits']} retransmits{err}")
    lines.append(uplinks_text(fabric, traffic["uplink_tx_bytes"], "during the check"))
    return "\n".join(lines)


def cluster_text(cluster: dict) -> str:
    """The machines of a cluster run, each with its build time."""
    machines = ", ".join(f"{i + 1} {m['host']} built in {m['build_s']:.1f} s"
                         + (f" (clock {m['clock_offset_s'] * 1e3:+.1f} ms apart)"
                            if abs(m["clock_offset_s"]) > 0.0005 else "")
                         for i, m in enumerate(cluster["machines"]))
    return (f"cluster  {len(cluster['machines'])} machines: {machines}; "
            f"{cluster['tunnels']} links over VXLAN; controller {cluster['controller']}"
            + (", OpenFlow over TLS" if cluster.get("tls") else ""))


def machines_text(runs: list, hosts: list) -> str:
    """Each machine's busiest CPU and ovs-vswitchd over the sizes of a
    cluster run ('' for a run on one host)."""
    per = [r["machines"] for r in runs if r.get("machines")]
    if not per:
        return ""
    parts = [f"{i + 1} {host} CPU {max(p[i]['cpu_busy_pct'] for p in per):.0f}%, ovs-vswitchd "
             f"{max(p[i]['ovs_core_pct'] for p in per):.0f}% of a core"
             for i, host in enumerate(hosts)]
    return "machines busiest during a size: " + "; ".join(parts)


def failures_text(events: list) -> str:
    """A line per link failure of the sweep: when, how long traffic stopped
    on the probe flows it hit, what the collective's iteration lost."""
    lines = []
    for e in events:
        held = (f"for {e['down_for_s']:.2f} s" if e["down_for_s"] is not None else "")
        p = e.get("probe")
        if p is None:
            seen = "no probe pair crosses it"
        elif p["stopped_ms"] is None:
            seen = (f"{p['flows_hit']} of {p['flows']} probe flows ({p['src']} -> {p['dst']}) "
                    f"never got through; {p['lost_packets']} packets lost")
        elif p["flows_hit"]:
            seen = (f"traffic stopped {p['stopped_ms']:.1f} ms on {p['flows_hit']} of "
                    f"{p['flows']} probe flows ({p['src']} -> {p['dst']}), "
                    f"{p['lost_packets']} packets lost")
        else:
            seen = f"none of {p['flows']} probe flows ({p['src']} -> {p['dst']}) paused"
        c = e.get("collective")
        hit = ("" if c is None else
               f"; the {c['size_bytes']} B iteration it fell in took {c['seconds']:.3f} s"
               + (f", {c['slowdown']:.2f}x the usual" if c["slowdown"] else ""))
        kind = e.get("kind", "down")
        how = {"down": "down", "silent": "silently down (frames lost, carrier up)",
               "flap": f"flapping ({e.get('downs', 0)} times down)"}[kind]
        if kind == "flap":
            held = f"for {e['duration_s']:.2f} s"
        lines.append(f"failure  {e['link']} {how} at {e['down_at_s']:.2f} s {held}: {seen}{hit}")
    return "\n".join(lines)


def tiers_text(tiers: dict, when: str) -> str:
    """ECMP's spread per tier, one line each ('' when nothing went up a tier)."""
    lines = [f"ECMP     per tier {when}: max/mean of each switch's up-links"]
    for tier, t in tiers.items():
        if t["worst"] is None:
            continue
        lines.append(f"           {tier}: worst {t['worst'][1]:.2f} ({t['worst'][0]}), mean "
                     f"{t['mean']:.2f}; {t['idle_uplinks']} of {t['uplinks']} up-links idle")
    return "\n".join(lines) if len(lines) > 1 else ""


def routing_text(result: RunRecord, when: str) -> str:
    """ECMP's spread per tier, and what the policy did ('' when nothing to say)."""
    lines = [tiers_text(result.tiers, when)]
    routing = result.routing or {}
    if routing.get("pieces"):
        lines.append(f"routing  {routing['policy']}: {routing['reordered']:,} of "
                     f"{routing['pieces']:,} pieces arrived after a later one of their sender")
    placed = routing.get("adaptive")
    if placed:
        lines.append(f"routing  adaptive: {placed['tracked']} TCP connections followed, "
                     f"{placed['placed']} elephants placed, {placed['moves']} moved since")
    return "\n".join(filter(None, lines))


INCAST_ROWS = (("goodput_share", "goodput, share of the link's payload rate", "{:.3f}"),
               ("jain", "per-flow fairness (Jain)", "{:.3f}"),
               ("loss_fraction", "segments lost per segment sent", "{:.4f}"),
               ("retransmit_fraction", "retransmissions per segment sent", "{:.4f}"),
               ("queue_mean_packets", "bottleneck queue, mean frames", "{:.1f}"),
               ("queue_peak_packets", "bottleneck queue, peak frames", "{:.0f}"))


def incast_text(record: dict) -> str:
    """The incast: what the lab measured with real TCP, and the packet
    engine's prediction of the same incast beside it."""
    lab, engine = record["lab"], record.get("engine")
    b = lab["bottleneck"]
    lines = [f"incast   {len(lab['senders'])} senders into {lab['receiver']} for "
             f"{lab['seconds']} s, TCP {lab['congestion_control']}: bottleneck "
             f"{b['interface']} at {b['rate_mbit']:g} Mbit/s, drop-tail {b['queue_packets']} "
             f"frames of {b['frame_bytes']} B; idle round trip {lab['base_rtt_ms']:.2f} ms",
             f"         {'':<42} {'lab (real TCP)':>15} {'packet engine':>15}"]
    for key, label, fmt in INCAST_ROWS:
        cells = [fmt.format(lab[key]), "-" if engine is None else fmt.format(engine[key])]
        lines.append(f"         {label:<42} {cells[0]:>15} {cells[1]:>15}")
    flows = lab["flow_mbit_s"]
    lines.append(f"         lab flows {flows['min']:.2f} .. {flows['max']:.2f} Mbit/s, "
                 f"{lab['goodput_mbit_s']:.1f} in all, {lab['lost']} segments lost "
                 f"({b['tc_drops']} drops counted by tc: the userspace datapath re-sends some), "
                 f"{lab['retransmits']} retransmissions"
                 + ("" if engine is None else
                    f"; engine flows {engine['flow_mbit_s']['min']:.2f} .. "
                    f"{engine['flow_mbit_s']['max']:.2f}, {engine['timeouts']} timeouts, "
                    f"round trip {engine['base_rtt_ms']:.2f} ms idle, "
                    f"{engine['wall_s']:.1f} s to simulate"))
    if engine is None:
        lines.append(f"         packet engine: none ({record['engine_none']})")
    for note in record["bent"]:
        lines.append(f"         note: {note}: the lab's figures are the host's as much as TCP's")
    return "\n".join(lines)


# the engine-only incast's rows: (key, label, format); a row whose key the
# record lacks (the preset has no such thing) is left out
ENGINE_INCAST_ROWS = (
    ("goodput_share", "goodput, share of the link's payload rate", "{:.3f}"),
    ("flow_mbit_s", "per-flow goodput, Mbit/s: min / mean / max", None),
    ("jain", "per-flow fairness (Jain)", "{:.3f}"),
    ("loss_fraction", "packets dropped per packet sent", "{:.4f}"),
    ("retransmit_fraction", "packets resent per packet sent", "{:.4f}"),
    ("queue_mean_packets", "bottleneck queue, mean frames", "{:.1f}"),
    ("queue_peak_packets", "bottleneck queue, peak frames", "{:.0f}"),
    ("pauses", "PFC pauses sent", "{}"),
    ("paused_fraction", "senders held in XOFF, share of the time", "{:.3f}"),
    ("credit_stalls", "credit stalls (a port waiting for a credit)", "{}"),
    ("ecn_marks", "packets marked ECN", "{}"),
    ("timeouts", "retransmission timeouts", "{}"),
    ("fast_retransmits", "packets resent by fast retransmit", "{}"))


def _mbit(value: float) -> str:
    return f"{value:.2f}" if value < 1000 else f"{value:,.0f}"


def engine_incast_text(record: dict) -> str:
    """An incast run in the packet engine alone (`--engine sim --incast N`):
    the technology and its preset, the links it was given, the figures the
    preset has, and how much of --seconds was simulated."""
    e = record["engine"]
    n = len(e["senders"])
    lines = [f"incast   {n} sender{'s' if n > 1 else ''} into {e['receiver']} in the packet "
             f"engine (no lab): {e['network']} as its {e['preset']} preset "
             f"({e['preset_summary']})",
             f"         links {e['rate_mbit']:g} Mbit/s, {e['payload_bytes']} B of payload in "
             f"{e['frame_bytes']} B frames on the wire; idle round trip "
             f"{_duration_ms(e['base_rtt_ms'])}"]
    for key, label, fmt in ENGINE_INCAST_ROWS:
        if key not in e:
            continue
        value = e[key]
        cell = (" / ".join(_mbit(value[k]) for k in ("min", "mean", "max")) if fmt is None
                else fmt.format(value))
        lines.append(f"         {label:<44} {cell:>22}")
    lines.append(f"         {e['lost']} of {e['packets_sent']} packets dropped; simulated "
                 f"{engine_span(e)} in {e['wall_s']:.1f} s")
    if e["capped"]:
        lines.append(f"         note: {engine_capped(e)}")
    return "\n".join(lines)


def engine_span(e: dict) -> str:
    """How much of --seconds the engine simulates."""
    if not e["capped"]:
        return f"{e['seconds']} s"
    return f"the first {e['simulated_s'] * 1e3:.3g} ms of the {e['seconds']} s asked"


def engine_capped(e: dict) -> str:
    """Why the engine simulates less than --seconds ('' when it does not)."""
    if not e["capped"]:
        return ""
    frame_ns = e["frame_bytes"] * 8 / e["rate_mbit"] * 1e3
    return (f"the engine steps every link once a frame ({frame_ns:.3g} ns at this rate) and a "
            f"run is held to at most about 10 s of that on a 2-core host: all {e['seconds']} s "
            f"would take {e['seconds'] / e['simulated_s']:.0f} times as long")


def _duration_ms(ms: float) -> str:
    return f"{ms:.3g} ms" if ms >= 1 else f"{ms * 1e3:.3g} us"
