"""Checks run on a live lab: all-pairs reachability, a short iperf3 traffic
check, and the byte counters of the leaves' uplinks.

Counters are read from the switch-side veths in /sys/class/net: the kernel
counts every frame Open vSwitch put on the link, instantly and for either
datapath (OVSDB's copy lags by seconds).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from topologies.fabric import Fabric


PINGS_PER_SECOND = 4000


class CheckError(Exception):
    """A check could not run to its end (a tool failed or hung)."""


@dataclass
class Reachability:
    ok: int = 0
    total: int = 0
    failures: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.ok == self.total


def all_pairs_reachability(lab, sources: Sequence[str] = (), attempts: int = 2) -> Reachability:
    """Ping every other server from every server (or from `sources`); each
    server runs its pings in sequence, all servers at once. A pair that fails
    is retried, so a first ARP exchange cannot fail it on timing alone."""
    fabric = lab.fabric
    servers = [h for h in fabric.servers]
    sources = list(sources) or [h.name for h in servers]
    pending = {src: [h.ip for h in servers if h.name != src] for src in sources}
    ip_name = {h.ip: h.name for h in servers}
    result = Reachability(total=sum(len(v) for v in pending.values()))
    # all sources together send about PINGS_PER_SECOND echoes: a userspace
    # datapath forwarding each over several switches must keep up
    gap_ms = max(1, round(len(sources) * 1000 / PINGS_PER_SECOND))
    for _ in range(attempts):
        procs = {}
        for src, ips in pending.items():
            if not ips:
                continue
            order = sorted(ips, key=lambda ip: hash((src, ip)))   # no synchronised hot spots
            procs[src] = lab.popen(src, ["sh", "-c", _ping_script(order, gap_ms)], text=True)
        still = {}
        for src, proc in procs.items():
            out, _ = proc.communicate(timeout=30 + len(pending[src]) * (2 + gap_ms / 1000))
            ok = {line.split()[1] for line in out.splitlines() if line.startswith("ok ")}
            still[src] = [ip for ip in pending[src] if ip not in ok]
            result.ok += len(ok & set(pending[src]))
        pending = still
    result.failures = [(src, ip_name[ip]) for src, ips in pending.items() for ip in ips]
    return result


def _ping_script(ips: Sequence[str], gap_ms: int = 1) -> str:
    """One echo each (one retry), printing "ok <ip>" for each answer: fping
    (one process for all, `gap_ms` apart) where it is installed, else ping in
    a loop."""
    listed = " ".join(ips)
    return (f"if command -v fping >/dev/null; then "
            f"fping -a -r 1 -t 1000 -i {gap_ms} {listed} 2>/dev/null | sed 's/^/ok /'; "
            f"else for d in {listed}; do "
            "if ping -n -q -c1 -W1 $d >/dev/null 2>&1; then echo ok $d; "
            "else echo fail $d; fi; done; fi")


def read_counter(intf: str, name: str = "tx_bytes") -> int:
    return int(Path(f"/sys/class/net/{intf}/statistics/{name}").read_text())


def uplink_counters(fabric: Fabric, name: str = "tx_bytes") -> Dict[str, Dict[str, int]]:
    """{leaf: {uplink interface: counter}} for every leaf."""
    return {leaf.name: {l.a_intf: read_counter(l.a_intf, name) for l in fabric.uplinks(leaf.name)}
            for leaf in fabric.leaves}


def counter_delta(before: Dict[str, Dict[str, int]], after: Dict[str, Dict[str, int]]):
    return {leaf: {i: after[leaf][i] - before[leaf][i] for i in after[leaf]} for leaf in after}


def cross_leaf_pairs(fabric: Fabric) -> List[Tuple[str, str]]:
    """Server i of leaf l sends to server i of the next leaf: every leaf sends
    and receives, and every flow crosses the spines."""
    leaves = fabric.leaves
    if len(leaves) < 2:
        return []
    by_leaf = {leaf.name: [h for h in fabric.servers if h.leaf == leaf.name] for leaf in leaves}
    pairs = []
    for i, leaf in enumerate(leaves):
        nxt = leaves[(i + 1) % len(leaves)]
        pairs += [(a.name, b.name) for a, b in zip(by_leaf[leaf.name], by_leaf[nxt.name])]
    return pairs


def wait_listening(lab, server: str, port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    host = lab.host(server)
    while time.monotonic() < deadline:
        if host.cmd(f"ss -Hltn 'sport = :{port}'").strip():
            return
        time.sleep(0.05)
    raise CheckError(f"nothing listens on {server}:{port} after {timeout} s")


def iperf3_check(lab, pairs: Sequence[Tuple[str, str]], seconds: int = 3,
                 streams: int = 4) -> dict:
    """One iperf3 TCP test per pair, all at once, `streams` parallel flows
    each (distinct source ports, so ECMP has entropy to spread)."""
    fabric = lab.fabric
    before = uplink_counters(fabric)
    servers, clients = [], []
    for i, (_, dst) in enumerate(pairs):
        port = 5201 + i
        servers.append(lab.popen(dst, ["iperf3", "-s", "-1", "-p", str(port)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for i, (_, dst) in enumerate(pairs):
        wait_listening(lab, dst, 5201 + i)
    t0 = time.monotonic()
    for i, (src, dst) in enumerate(pairs):
        ip = fabric.server(dst).ip
        clients.append(lab.popen(src, ["iperf3", "-c", ip, "-p", str(5201 + i), "-t", str(seconds),
                                       "-P", str(streams), "-J"], text=True))
    flows = []
    for (src, dst), proc in zip(pairs, clients):
        out, _ = proc.communicate(timeout=seconds + 30)
        flows.append(_parse_iperf3(src, dst, out))
    elapsed = time.monotonic() - t0
    for proc in servers:
        # a server whose client failed before connecting would wait for ever
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=5)
    delta = counter_delta(before, uplink_counters(fabric))
    # what the senders' own links allow: the ceiling when nothing else limits
    capacity = sum(fabric.spec["links"]["server_leaf"]["rate_mbit"] for _ in pairs)
    return {"seconds": seconds, "streams_per_pair": streams, "elapsed_s": round(elapsed, 2),
            "pairs": flows, "total_mbit_s": round(sum(f["mbit_s"] for f in flows), 2),
            "server_links_mbit_s": capacity, "uplink_tx_bytes": delta}


def _parse_iperf3(src: str, dst: str, text: str) -> dict:
    try:
        data = json.loads(text)
        end = data["end"]
        bps = end["sum_received"]["bits_per_second"]
        retrans = end.get("sum_sent", {}).get("retransmits", 0)
        return {"src": src, "dst": dst, "mbit_s": round(bps / 1e6, 2), "retransmits": retrans}
    except (ValueError, KeyError) as exc:
        err = ""
        try:
            err = json.loads(text).get("error", "")
        except ValueError:
            pass
        return {"src": src, "dst": dst, "mbit_s": 0.0, "retransmits": 0,
                "error": err or f"unreadable iperf3 output ({exc.__class__.__name__})"}


def flows_command(*args: str) -> List[str]:
    """The command line of traffic/flows.py for a server's namespace."""
    return [sys.executable, "-m", "traffic.flows", *args]


def group_bucket_packets(switch: str, group_id: int) -> List[int]:
    """Packets per bucket of one select group, from Open vSwitch."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-group-stats", switch],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if f"group_id={group_id}," in line:
            return [int(n) for n in re.findall(r"bucket\d+:packet_count=(\d+)", line)]
    return []
