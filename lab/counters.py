"""Counters read from the kernel: bytes sent on every switch-side interface
(and on a mesh server's GPU-to-GPU links, in the GPUs' namespaces), the
host's CPU time and ovs-vswitchd's.

Byte counters are read where the kernel keeps them: it counts every frame
Open vSwitch put on a link, instantly and for either datapath (OVSDB's copy
lags by seconds). One read of /proc/net/dev gives them all (a SuperPOD unit
has 800 switch ports: one file, not 800)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Dict

from lab import sandbox
from lab.shaping import ACK_CLASS, DATA_CLASS


# /proc/net/dev's columns after the name (it shows the reading process's
# network namespace, where /sys/class/net shows the one sysfs was mounted in:
# the host's, not a sandboxed lab's)
NET_DEV_FIELDS = ("rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo", "rx_frame",
                  "rx_compressed", "rx_multicast", "tx_bytes", "tx_packets", "tx_errors",
                  "tx_dropped", "tx_fifo", "tx_collisions", "tx_carrier", "tx_compressed")


def interface_counters(field: str = "tx_bytes", pid: "int | str" = "thread-self") -> Dict[str, int]:
    """One counter (NET_DEV_FIELDS) of every interface in the network
    namespace of `pid` (this thread's by default)."""
    column = NET_DEV_FIELDS.index(field)
    out = {}
    for line in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        values = fields.split()
        if len(values) > column:
            out[name.strip()] = int(values[column])
    return out


def tx_bytes() -> Dict[str, int]:
    """tx_bytes of every interface in this network namespace."""
    return interface_counters("tx_bytes")


def uplink_counters(fabric) -> Dict[str, Dict[str, int]]:
    """{leaf: {uplink interface: bytes sent}} for every leaf."""
    every = tx_bytes()
    return {leaf.name: {l.a_intf: every[l.a_intf] for l in fabric.uplinks(leaf.name)}
            for leaf in fabric.leaves}


def counter_delta(before: Dict[str, Dict[str, int]], after: Dict[str, Dict[str, int]]):
    return {leaf: {i: after[leaf][i] - before[leaf][i] for i in after[leaf]} for leaf in after}


def cpu_times() -> tuple:
    """(idle, total) jiffies of the whole host, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


def cpu_busy_pct(before: tuple, after: tuple) -> float:
    idle = after[0] - before[0]
    total = after[1] - before[1]
    return 100.0 * (1 - idle / total) if total else 0.0


def ovs_cpu_seconds() -> float:
    """CPU time of ovs-vswitchd so far (0 if it cannot be read). With the
    userspace datapath one thread forwards every packet of every bridge: at
    100% of a core the host, not the fabric, sets the pace."""
    own = sandbox.current()           # a lab of its own here: its own ovs-vswitchd
    try:
        pid = own.vswitchd_pid() if own else \
            Path("/var/run/openvswitch/ovs-vswitchd.pid").read_text().strip()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _queues() -> Dict[str, dict]:
    """backlog (bytes), qlen (packets) and drops of every root-namespace
    interface: its data and ACK queues together."""
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True, text=True,
                         timeout=10).stdout
    queues: Dict[str, dict] = {}
    for q in json.loads(out or "[]"):
        if q.get("parent") in (DATA_CLASS, ACK_CLASS):            # our pfifo/netem under an HTB class
            mine = queues.setdefault(q["dev"], {"backlog": 0, "qlen": 0, "drops": 0})
            for key in mine:
                mine[key] += q.get(key, 0)
    return queues


def read_counters(intfs, pids=()) -> dict:
    """One sample of this machine: bytes sent on each of `intfs`, their queues,
    the CPU and ovs-vswitchd's CPU time. Counters first, timestamped as they
    are read (those of this namespace, then those in the namespaces of
    `pids`: a mesh server's GPU-to-GPU links, no switch's); then the queues
    (a tc process, tens of milliseconds on a busy host, would skew the time)."""
    t0 = time.monotonic()
    every = tx_bytes()
    for pid in pids:
        every.update(interface_counters("tx_bytes", pid))
    t1 = time.monotonic()
    # every counter was read within t_err of t
    return {"t": (t0 + t1) / 2, "t_err": (t1 - t0) / 2, "cpu": cpu_times(),
            "ovs_cpu_s": ovs_cpu_seconds(), "tx": {i: every[i] for i in intfs if i in every},
            "queues": {i: q for i, q in _queues().items() if i in intfs}}
