"""An incast on the lab with real kernel TCP (`run_topology.py --incast N`):
N servers send to one at once, each an iperf3 TCP flow for `--seconds`,
all converging on the one link into the receiver (its switch's egress
port, a drop-tail queue of the link's `queue_packets`).

What it measures, each from the place that knows it: per-flow goodput
(the bytes iperf3's receiver got, over the incast's span from the first
client's start to the last one's end, the same span for every flow, so the
flows' rates add up to no more than the link carried); the segments each
sender's kernel sent and retransmitted and the receiver's kernel got (their
namespaces' /proc/net/snmp): what was sent and never arrived is what the
network lost; the bottleneck's queue (tc's counters on that egress,
sampled by the monitor every 0.1 s).

tc's drop count on that queue is kept, but it is not the losses: Open
vSwitch's userspace datapath hands frames to the port in batches
(sendmmsg), and when the queue refuses one it sends the rest of the batch
again from there, so a frame tc counted as dropped can still arrive
(measured: 414 drops counted, 269 segments lost, one duplicate delivered). The flows run Reno (`-C
reno`), the congestion control the packet engine's `tcp` preset models,
so the two can be set side by side (runs/incast_beside.py); the base round trip
(an idle ping) is measured first, for the same reason.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from typing import List, Sequence, Tuple

from lab.processes import communicate_progressing, stop_process
from lab.progress_wait import STALL_S
from lab.reachability import wait_listening
from traffic.measure.monitor import Monitor

FIRST_PORT = 5301           # the receiver's iperf3 servers listen on 5301..5300+N
CONGESTION = "reno"         # the packet engine's tcp preset is Reno
PINGS = 5


def incast_plan(fabric, senders: int) -> Tuple[str, List[str]]:
    """(receiver, senders): the last server receives; the senders are the
    servers nearest to it, on its own leaf first, then the others in order.
    ValueError, one sentence, when the fabric has too few servers."""
    ends = list(fabric.endpoints)
    if not 1 <= senders <= len(ends) - 1:
        raise ValueError(f"--incast {senders}: this fabric has {len(ends)} servers, so an "
                         f"incast into one of them takes 1 to {len(ends) - 1} senders")
    receiver = ends[-1]
    others = ends[:-1]
    others.sort(key=lambda e: e.leaf != receiver.leaf)      # stable: its own leaf first
    return receiver.name, [e.name for e in others[:senders]]


def bottleneck(fabric, receiver: str):
    """(the switch-side interface into `receiver`, that link): its egress
    queue is where the incast piles up."""
    switches = {s.name for s in fabric.switches}
    for link in fabric.links:
        if link.kind == "server_leaf" and receiver in (link.a, link.b):
            return (link.b_intf, link) if link.b in switches else (link.a_intf, link)
    raise ValueError(f"server {receiver} has no link to a switch of its own")


def base_rtt_ms(lab, src: str, dst_ip: str) -> float:
    """The smallest of a few idle pings: the round trip with no queue."""
    proc = lab.popen(src, ["ping", "-n", "-q", "-c", str(PINGS), "-i", "0.2", dst_ip],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = communicate_progressing(proc, f"ping from {src}", stall_s=STALL_S)
    found = re.search(r"= ([\d.]+)/", out or "")
    if not found:
        raise RuntimeError(f"ping from {src} to {dst_ip} found no round trip: {out.strip()}")
    return float(found.group(1))


def run_incast(lab, senders: int, seconds: int) -> dict:
    """The incast on `lab`: flows, the bottleneck's queue and drops, the
    host's CPU meanwhile (a figure bent by the host says so: runs/incast_beside.py)."""
    fabric = lab.fabric
    receiver, sources = incast_plan(fabric, senders)
    intf, link = bottleneck(fabric, receiver)
    ip = fabric.endpoint(receiver).ip
    rtt = base_rtt_ms(lab, sources[0], ip)
    before = [tcp_counters(lab, s) for s in [receiver, *sources]]
    monitor = Monitor(fabric, source=lab.counters).start()
    try:
        t0 = time.monotonic()
        flows = _flows(lab, receiver, ip, sources, seconds)
        t1 = time.monotonic()
    finally:
        monitor.stop()
    counted = [_delta(a, tcp_counters(lab, s)) for a, s in zip(before, [receiver, *sources])]
    for flow, tcp in zip(flows, counted[1:]):
        flow.update(segments=tcp["segments"] + tcp["retransmits"], retransmits=tcp["retransmits"],
                    mbit_s=round(flow["bytes"] * 8 / (t1 - t0) / 1e6, 3))
    window = monitor.window(t0, t1)
    at = window["links"][intf]
    sent = sum(f["segments"] for f in flows)
    return {"receiver": receiver, "senders": sources, "seconds": seconds,
            "elapsed_s": round(t1 - t0, 3), "congestion_control": CONGESTION,
            "base_rtt_ms": rtt,
            "bottleneck": {"interface": intf, "link": f"{link.a}-{link.b}",
                           "rate_mbit": link.spec.rate_mbit,
                           "queue_packets": link.spec.queue_packets,
                           "frame_bytes": fabric.mtu + 14, "tc_drops": at["drops"],
                           "mean_util": round(at["mean_util"], 4),
                           **_queue(monitor.samples, intf, t0, t1)},
            "flows": flows,
            "goodput_mbit_s": round(sum(f["bytes"] for f in flows) * 8 / (t1 - t0) / 1e6, 3),
            "segments_sent": sent, "segments_received": counted[0]["received"],
            "lost": sent - counted[0]["received"],
            "retransmits": sum(f["retransmits"] for f in flows),
            "cpu_busy_pct": round(window.get("cpu_busy_pct", 0.0), 1),
            "ovs_core_pct": round(window.get("ovs_core_pct", 0.0), 1),
            "shortfalls": window["shortfalls"]}


def _flows(lab, receiver: str, ip: str, sources: Sequence[str], seconds: int) -> List[dict]:
    """One iperf3 server per sender on the receiver, then every client at
    once; each flow's record from both ends' JSON."""
    servers, clients = [], []
    try:
        for i in range(len(sources)):
            servers.append(lab.popen(receiver, ["iperf3", "-s", "-1", "-J", "-p",
                                                str(FIRST_PORT + i)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True))
        for i, proc in enumerate(servers):
            wait_listening(lab, receiver, FIRST_PORT + i, proc)
        for i, src in enumerate(sources):
            clients.append(lab.popen(src, ["iperf3", "-c", ip, "-p", str(FIRST_PORT + i),
                                           "-t", str(seconds), "-C", CONGESTION, "-J"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True))
        sent = [communicate_progressing(proc, f"iperf3 from {src} to {receiver}",
                                        stall_s=STALL_S + seconds)[0]
                for src, proc in zip(sources, clients)]
        got = [communicate_progressing(proc, f"iperf3 server on {receiver}",
                                       stall_s=STALL_S)[0] for proc in servers]
    finally:
        for proc in servers + clients:
            stop_process(proc, grace=2, ask=False)
    return [flow_record(src, s, g) for src, s, g in zip(sources, sent, got)]


def flow_record(src: str, client_json: str, server_json: str) -> dict:
    """A flow's bytes the receiver got; an `error` when iperf3 said one
    (its rate: over the incast's whole span, the same for every flow)."""
    record = {"src": src, "bytes": 0}
    try:
        client, server = json.loads(client_json or "{}"), json.loads(server_json or "{}")
    except ValueError as exc:
        return {**record, "error": f"iperf3 printed no JSON ({exc})"}
    if "error" in client or "end" not in server:
        return {**record, "error": client.get("error") or server.get("error", "no result")}
    return {**record, "bytes": int(server["end"]["sum_received"]["bytes"])}


def tcp_counters(lab, server: str) -> dict:
    """The server's namespace's TCP segment counters (/proc/net/snmp): what
    its kernel sent (OutSegs, which leaves out retransmissions: measured
    here, a receiver's InSegs matched the senders' OutSegs + RetransSegs
    less their losses), retransmitted and received, whichever socket."""
    proc = lab.popen(server, ["cat", "/proc/net/snmp"], stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, text=True)
    out, _ = communicate_progressing(proc, f"TCP counters of {server}", stall_s=STALL_S)
    rows = [line.split()[1:] for line in (out or "").splitlines() if line.startswith("Tcp:")]
    if len(rows) < 2:
        raise RuntimeError(f"{server}'s /proc/net/snmp has no TCP counters")
    counters = dict(zip(rows[0], rows[1]))
    return {"segments": int(counters["OutSegs"]), "retransmits": int(counters["RetransSegs"]),
            "received": int(counters["InSegs"])}


def _delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in before}


def _queue(samples: List[dict], intf: str, t0: float, t1: float) -> dict:
    """The bottleneck queue over the incast, in packets, from the samples."""
    held = [s["queues"].get(intf, {}).get("qlen", 0) for s in samples if t0 <= s["t"] <= t1]
    return {"queue_mean_packets": round(sum(held) / len(held), 1) if held else 0.0,
            "queue_peak_packets": max(held, default=0), "queue_samples": len(held)}
