"""Traffic on a live lab and the counters that say where it went: flow
generators in a server's namespace, interface and Open vSwitch counters, and
the CPU a process spent."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

TICKS = 100.0      # clock ticks a second in /proc/<pid>/stat (USER_HZ)


def flows_command(*args: str) -> List[str]:
    """The command line of programs/flows.py for a server's namespace."""
    return [sys.executable, "-m", "programs.flows", *args]


def read_counter(intf: str, name: str = "tx_bytes") -> int:
    """A counter of an interface in this thread's network namespace (a
    sandboxed lab's, while one is up here)."""
    from lab.counters import interface_counters
    return interface_counters(name)[intf]


def settled(read, quiet: float = 0.3, cap: float = 15.0):
    """`read()` once it has stopped changing for `quiet` seconds (what was
    still queued or inside the switch has arrived), however slow the host."""
    last, since, deadline = read(), time.monotonic(), time.monotonic() + cap
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def uplink_bytes(lab, leaf, run_traffic) -> Dict[str, int]:
    """Bytes `leaf` sent to each spine while `run_traffic()` ran (and until
    its last packets had left)."""
    spine_of = {l.a_intf: l.b for l in lab.fabric.uplinks(leaf)}
    before = {i: read_counter(i) for i in spine_of}
    run_traffic()
    after = settled(lambda: {i: read_counter(i) for i in spine_of})
    return {spine_of[i]: after[i] - before[i] for i in spine_of}


def udp_flows(lab, src, dst, sports="40000:40015", packets=60):
    """16 UDP flows, paced so the sender's shaped link does not drop them."""
    ip = lab.fabric.endpoint(dst).ip
    proc = lab.popen(src, flows_command("udp", "--dst", ip, "--sports", sports,
                                        "--packets", str(packets), "--pps", "200"), text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["packets_sent"] == 16 * packets


def tcp_flows(lab, src, dst, sports="41000:41015", nbytes=200_000):
    """16 TCP flows of `nbytes` each, every byte checked at the sink."""
    ip = lab.fabric.endpoint(dst).ip
    sink = lab.popen(dst, flows_command("sink", "--port", "5001", "--connections", "16"),
                     text=True)
    assert json.loads(sink.stdout.readline()) == {"listening": 5001}
    sender = lab.popen(src, flows_command("tcp", "--dst", ip, "--sports", sports,
                                          "--bytes", str(nbytes)), text=True)
    _, err = sender.communicate(timeout=60)
    assert sender.returncode == 0, err
    received = json.loads(sink.communicate(timeout=60)[0])["received"]
    lo, hi = (int(p) for p in sports.split(":"))
    assert received == {str(p): nbytes for p in range(lo, hi + 1)}


def group_bucket_packets(switch: str, group_id: int) -> List[int]:
    """Packets per bucket of one select group, from Open vSwitch."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-group-stats", switch],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if f"group_id={group_id}," in line:
            return [int(n) for n in re.findall(r"bucket\d+:packet_count=(\d+)", line)]
    return []


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process `pid` has spent; 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(stat[11]) + int(stat[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return 0.0
