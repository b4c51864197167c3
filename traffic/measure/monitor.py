"""What the fabric did while traffic ran, sampled from the outside.

A thread samples, every `interval` seconds, for every switch-side interface
(and both ends of a mesh server's GPU-to-GPU links):
bytes sent (/sys/class/net), the backlog and drops of its egress queue (one
``tc -s -j qdisc show`` for all of them), and the host's CPU (/proc/stat) and
ovs-vswitchd's CPU time. `window(t0, t1)` turns the samples of a time span into
per-link bytes, peak utilisation, queue peak and drops, ECMP imbalance per
leaf, CPU use, and the shortfalls the fidelity verdict (fidelity.py) reads:

the bytes already queued on a link at the start of a sample interval can leave
at the link's configured rate whatever happens next, so a link that sent less
than min(queued, rate x interval) was held back by the host, not by its rate.
"""

from __future__ import annotations

import threading
from typing import List

from lab.progress_wait import CAP_S, STALL_S, wait_progressing
from lab.shaping import unpaid_bytes
from topologies.fabric import Fabric
from lab.counters import cpu_busy_pct, read_counters
from collectives.metrics import imbalance

KEEP_UP = 0.90          # a link must send >= 90% of what it owes (see summarise)
MIN_OWED_FRAMES = 8     # below that, timing noise would decide
COUNTER_SKEW_S = 0.005  # a sample's timing error when it does not record its own


class Monitor:
    def __init__(self, fabric: Fabric, interval: float = 0.1, source=None):
        """`source(interfaces)` reads a sample (default: read_counters, this
        machine; a cluster lab merges its machines')."""
        self.fabric, self.interval = fabric, interval
        self.source = source or read_counters
        switches = {s.name for s in fabric.switches}
        meshed = {h.name for h in fabric.endpoints if h.mesh}    # GPU-to-GPU links: both ends
        self.rate = {}                     # interface -> Mbit/s
        self.link_of = {}                  # interface -> "a-b" link name
        self.delayed = set()               # interfaces with a netem delay
        for link in fabric.links:
            for node, intf, peer in ((link.a, link.a_intf, link.b), (link.b, link.b_intf, link.a)):
                if node in switches or (node in meshed and peer in meshed):
                    self.rate[intf] = link.spec.rate_mbit
                    self.link_of[intf] = f"{node}->{peer}"
                    if link.spec.delay_ms > 0:
                        self.delayed.add(intf)
        self.samples: List[dict] = []
        self._stop = threading.Event()
        self._thread = None

    def sample(self) -> dict:
        return self.source(self.rate)

    def wait_past(self, t: float) -> None:
        """Wait until a sample read wholly after `t` exists, so a window
        ending at t is whole (a busy host may delay the sampling thread):
        as long as samples keep coming, up to STALL_S without one."""
        wait_progressing(lambda: _began(self.samples[-1]) >= t, lambda: len(self.samples),
                         stall_s=STALL_S, cap_s=CAP_S, interval=self.interval / 4)

    def start(self) -> "Monitor":
        self.samples.append(self.sample())
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.samples.append(self.sample())

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.samples.append(self.sample())

    def window(self, t0: float, t1: float) -> dict:
        """Everything measured from the last sample at or before t0 to the
        first at or after t1."""
        first = max((s for s in self.samples if _ended(s) <= t0), key=lambda s: s["t"],
                    default=self.samples[0])
        last = min((s for s in self.samples if _began(s) >= t1), key=lambda s: s["t"],
                   default=self.samples[-1])
        span = [s for s in self.samples if first["t"] <= s["t"] <= last["t"]]
        return summarise(self, span)


def _began(sample: dict) -> float:
    """When the sample's counters started being read."""
    return sample["t"] - sample.get("t_err", 0.0)


def _ended(sample: dict) -> float:
    return sample["t"] + sample.get("t_err", 0.0)


def _utilisation(sent: int, step: float, skew: float, rate_mbit: float, mtu: int) -> float:
    """The share of an interval a link was busy. A token bucket may pass its
    burst and one frame more than the rate in any interval, and the interval's
    ends are known to within `skew` seconds together: within that allowance a
    reading above 1 is a saturated link (1.0), not one faster than its rate."""
    if step <= 0:
        return 0.0
    per_second = rate_mbit * 1e6 / 8
    util = sent / (per_second * step)
    if 1.0 < util and sent <= per_second * (step + skew) + unpaid_bytes(rate_mbit, mtu):
        return 1.0
    return util


def summarise(mon: Monitor, span: List[dict]) -> dict:
    first, last = span[0], span[-1]
    dt = max(last["t"] - first["t"], 1e-9)
    links, shortfalls = {}, []
    min_owed = MIN_OWED_FRAMES * (mon.fabric.mtu + 14)
    for intf, rate in mon.rate.items():
        tx = last["tx"].get(intf, 0) - first["tx"].get(intf, 0)
        peak, peak_backlog = 0.0, 0
        for a, b in zip(span, span[1:]):
            step = b["t"] - a["t"]
            sent = b["tx"].get(intf, 0) - a["tx"].get(intf, 0)
            skew = a.get("t_err", COUNTER_SKEW_S) + b.get("t_err", COUNTER_SKEW_S)
            peak = max(peak, _utilisation(sent, step, skew, rate, mon.fabric.mtu))
            queued = a["queues"].get(intf, {}).get("backlog", 0)
            peak_backlog = max(peak_backlog, b["queues"].get(intf, {}).get("backlog", 0))
            # What was already queued at the start of the interval could leave
            # at the link's rate whatever arrived later: a link that sent less
            # than that (nearly a full queue's worth, so not noise) was held
            # back by the host.
            owed = min(queued, rate * 1e6 / 8 * step)
            # (a netem queue also holds packets that are only being delayed)
            if owed >= min_owed and sent < KEEP_UP * owed and intf not in mon.delayed:
                shortfalls.append((intf, round(sent / owed, 2)))
        drops = (last["queues"].get(intf, {}).get("drops", 0)
                 - first["queues"].get(intf, {}).get("drops", 0))
        links[intf] = {"link": mon.link_of[intf], "tx_bytes": tx, "mean_util": tx * 8 / dt / (rate * 1e6),
                       "peak_util": peak, "peak_backlog_bytes": peak_backlog, "drops": drops}
    uplinks = {leaf.name: [links[l.a_intf]["tx_bytes"] for l in mon.fabric.uplinks(leaf.name)]
               for leaf in mon.fabric.leaves}
    out = {"seconds": dt, "links": links,
           "ecmp_imbalance": {leaf: imbalance(v) for leaf, v in uplinks.items() if sum(v) > 0},
           "shortfalls": shortfalls}
    if "machines" not in first:
        out["cpu_busy_pct"] = cpu_busy_pct(first["cpu"], last["cpu"])
        out["ovs_core_pct"] = 100.0 * (last["ovs_cpu_s"] - first["ovs_cpu_s"]) / dt
        return out
    # a cluster: each machine's figures, and the busiest's, which sets the pace
    cpu = [cpu_busy_pct(a["cpu"], b["cpu"]) for a, b in zip(first["machines"], last["machines"])]
    ovs = [100.0 * (b["ovs_cpu_s"] - a["ovs_cpu_s"]) / dt
           for a, b in zip(first["machines"], last["machines"])]
    out.update(cpu_busy_pct=max(cpu), ovs_core_pct=max(ovs),
               machines=[{"cpu_busy_pct": c, "ovs_core_pct": o} for c, o in zip(cpu, ovs)])
    return out


def host_summary(window: dict) -> dict:
    """What a window says of the host beside a run's figures: CPU busy,
    ovs-vswitchd's core, the busiest link's peak, drops, shortfalls."""
    util = [l["peak_util"] for l in window["links"].values()]
    return {"cpu_busy_pct": window["cpu_busy_pct"], "ovs_core_pct": window["ovs_core_pct"],
            "busiest_link_peak_util": max(util, default=0.0),
            "drops": sum(l["drops"] for l in window["links"].values()),
            "shortfalls": window["shortfalls"]}
