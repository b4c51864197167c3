"""A short iperf3 traffic check across the leaves (`run_topology.py
--iperf-check`): one TCP test per pair of endpoints on neighbouring leaves,
all at once, and what each leaf sent towards each spine meanwhile."""

from __future__ import annotations

import json
import subprocess
import time
from typing import List, Sequence, Tuple

from lab.processes import communicate_progressing, stop_process
from lab.progress_wait import STALL_S
from lab.reachability import wait_listening
from lab.counters import counter_delta, uplink_counters


def cross_leaf_pairs(fabric) -> List[Tuple[str, str]]:
    """Server i of leaf l sends to server i of the next leaf: every leaf sends
    and receives, and every flow crosses the spines."""
    leaves = fabric.leaves
    if len(leaves) < 2:
        return []
    by_leaf = {leaf.name: [h for h in fabric.endpoints if h.leaf == leaf.name] for leaf in leaves}
    pairs = []
    for i, leaf in enumerate(leaves):
        nxt = leaves[(i + 1) % len(leaves)]
        pairs += [(a.name, b.name) for a, b in zip(by_leaf[leaf.name], by_leaf[nxt.name])]
    return pairs


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
        wait_listening(lab, dst, 5201 + i, servers[i])
    t0 = time.monotonic()
    for i, (src, dst) in enumerate(pairs):
        ip = fabric.endpoint(dst).ip
        clients.append(lab.popen(src, ["iperf3", "-c", ip, "-p", str(5201 + i), "-t", str(seconds),
                                       "-P", str(streams), "-J"], text=True))
    flows = []
    for (src, dst), proc in zip(pairs, clients):
        out, _ = communicate_progressing(proc, f"iperf3 from {src} to {dst}",
                                         stall_s=STALL_S + seconds)
        flows.append(_parse_iperf3(src, dst, out))
    elapsed = time.monotonic() - t0
    for proc in servers:
        # a server whose client failed before connecting would wait for ever
        stop_process(proc, grace=2, ask=False)
    delta = counter_delta(before, uplink_counters(fabric))
    # what the senders' own links allow: the ceiling when nothing else limits
    capacity = sum(fabric.nic_rate_mbit for _ in pairs)
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
