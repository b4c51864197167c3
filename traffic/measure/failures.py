"""Link failures during a sweep (`--fail LINK@SECONDS[+DURATION][:KIND]`,
`--flap`): each link taken down on time and brought back, watched, and
reported. KIND down drops the carrier at both ends; silent empties both
ends' queues instead (frames lost, carrier up: only BFD tells); flap takes
it down for FLAP_DOWN_S and up for FLAP_UP_S over and over for the duration.

The seconds count from the start of the sweep's first size. Half a second
before each failure, probe flows start between two servers whose shortest
paths may cross the link (programs/failprobe.py: 8 UDP flows, a small
packet on each every interval, ECMP spreading them by source port); they
run until a second after the link is back, at most 3 s. From their
arrivals: how long traffic stopped on the flows the failure hit (the
longest run of packets lost on a flow from the failure on), and packets
lost.

The probe must lose nothing but what the failure takes, or a stop reads
where there was none and the failure's own stop is lost among them. Its
flows leave by each link's first-served class (lab/shaping.py), so a full
data queue does not drop them; but that class is guaranteed only
1/ACK_CLASS_SHARE of the link's rate, and under a collective the data class
takes the rest. So the probe sends no faster than PROBE_SHARE of that
guarantee on the slowest link it may cross (`probe_interval`): 8 ms between
a flow's packets at 20 Mbit/s, 2 ms (INTERVAL_S) from 80 Mbit/s up, the
flows taking turns so that together they look at the path every
interval / FLOWS. Sent every 2 ms in 106-byte frames at 20 Mbit/s, its
3.4 Mbit/s lost 39-54% of its packets on the links a single-path ring
AllReduce keeps full (h1's own NIC above all), in runs of up to 143 packets
(286 ms) before the failure, longer than the failover's own stop (8-24 ms
here): a flow counts as hit only by a stop longer than any before it, so
the failure hit 3 to 7 of 8 flows that all crossed the link, and the stop
reported was mostly a congestion drop's (28-320 ms). At its start, too, every
flow lost 4-8 packets under load (the receiver not yet listening): the
sender now waits for the receiver, and the reading ignores what a flow lost
before its first arrival; with both, a loaded host's single-path failover
read 7 or 8 of 8 flows hit, 8-24 ms, and nothing lost before it.

The collective's slowdown is the iteration the failure fell in against the
median of the same size's iterations that no failure touched.

Plain functions for parsing, choosing the probe pair and its interval and
reading the arrivals; `Failures` runs them on a lab, from a thread.
"""

from __future__ import annotations

import json
import math
import random
import select
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import networkx as nx

from controller.routes import fabric_graph
from lab.processes import communicate_progressing, stop_process
from lab.shaping import ACK_CLASS_SHARE, FAILPROBE_PORTS
from toolkit.validators import split_failure

LEAD_S, TAIL_S, MAX_WATCH_S = 0.5, 1.0, 3.0
INTERVAL_S, FLOWS = 0.002, 8     # the shortest interval; 8 flows for ECMP to spread
PROBE_FRAME = 60           # bytes a probe packet is on a link at most (Ethernet's minimum;
                           # programs/failprobe.py sends 50)
PROBE_SHARE = 0.5          # of the first-served class's guaranteed rate: the rest for TCP's
                           # ACKs and BFD, which share that class
RECEIVE_CAP_S = 60.0       # a receiver whose stdin never closes ends the watch and this after
READY_S = LEAD_S / 2       # longest wait for the receiver to listen before the sender starts
BASE_PORT, BASE_SPORT = FAILPROBE_PORTS, 42000     # 16 events at most: 9296-9311
PAUSE = 1                  # packets lost in a row from the failure on: a flow was hit
FLAP_DOWN_S, FLAP_UP_S = 0.25, 0.25


@dataclass
class Failure:
    text: str                       # as given
    a: str
    b: str
    index: int                      # which of the links between a and b (parallel links)
    at: float
    duration: Optional[float]       # None: down to the end of the sweep
    kind: str = "down"              # down, silent or flap

    def actions(self):
        """(seconds after the start, "down" or "up") of this failure."""
        if self.kind != "flap":
            return [(self.at, "down")] + ([] if self.duration is None else
                                          [(self.at + self.duration, "up")])
        out, t, end = [], self.at, self.at + self.duration
        while t < end:
            out += [(t, "down"), (min(t + FLAP_DOWN_S, end), "up")]
            t += FLAP_DOWN_S + FLAP_UP_S
        return out


def parse(fabric, items: Sequence[str], rng: random.Random = None) -> List[Failure]:
    """The failures of `items` (checked by the experiment), `random` drawn
    from the links between switches."""
    rng = rng or random.Random()
    switches = {s.name for s in fabric.network_switches}
    inter = [l for l in fabric.links if {l.a, l.b} <= switches]
    out = []
    for item in items:
        link, at, duration, kind = split_failure(item)
        if link == "random":
            chosen = rng.choice(inter)
            a, b = chosen.a, chosen.b
            index = [l for l in fabric.links if {l.a, l.b} == {a, b}].index(chosen)
        else:
            (a, b), index = link.split("-"), 0
        out.append(Failure(item, a, b, index, at, duration, kind))
    return sorted(out, key=lambda f: f.at)


def probe_pair(fabric, a: str, b: str):
    """(src, dst): the first two servers, on different leaves, between which
    some shortest path crosses the link a-b."""
    graph = fabric_graph(fabric)
    dist = dict(nx.all_pairs_shortest_path_length(graph))
    home: Dict[str, str] = {}
    for h in fabric.endpoints:
        home.setdefault(h.leaf, h.name)
    leaves = list(home)
    for l1 in leaves:
        for l2 in leaves:
            if l1 == l2 or l2 not in dist.get(l1, {}):
                continue
            d = dist[l1][l2]
            for x, y in ((a, b), (b, a)):
                if dist[l1].get(x, d + 9) + 1 + dist[y].get(l2, d + 9) == d:
                    return home[l1], home[l2]
    return None


def probe_interval(fabric, src: str, dst: str) -> float:
    """Seconds between a probe flow's packets: all FLOWS flows together send
    no more than PROBE_SHARE of what the first-served class, which they leave
    by, is guaranteed on the slowest link of any shortest path from `src` to
    `dst` (1/ACK_CLASS_SHARE of its rate); never under INTERVAL_S. Above
    that share, on a link the collective keeps full, the probe's own packets
    are dropped in long runs and read as stops (module docstring)."""
    graph = nx.MultiGraph()
    for l in fabric.links:
        if l.kind != "intra_node":       # NVLink never carries traffic between servers
            graph.add_edge(l.a, l.b, rate=l.spec.rate_mbit)
    from_src = nx.single_source_shortest_path_length(graph, src)
    to_dst = nx.single_source_shortest_path_length(graph, dst)
    far = from_src[dst]
    rates = [rate for a, b, rate in graph.edges(data="rate")
             if far in (from_src.get(a, far) + 1 + to_dst.get(b, far),
                        from_src.get(b, far) + 1 + to_dst.get(a, far))]
    guaranteed = min(rates) * 1e6 / ACK_CLASS_SHARE                 # bits per second
    seconds = FLOWS * PROBE_FRAME * 8 / (PROBE_SHARE * guaranteed)
    return max(INTERVAL_S, math.ceil(seconds * 1e3 - 1e-9) / 1e3)   # whole milliseconds


def missing_runs(received: set, sent: int, skipped=frozenset()):
    """(first seq, length) of each run of sequence numbers that never arrived.
    A `skipped` seq (the sender, late, never sent it) neither begins nor ends
    a run: it is not known to be lost, and a run around it lasted its time."""
    runs, first = [], None
    for seq in range(sent):
        if seq in skipped:
            continue
        if seq not in received:
            first = seq if first is None else first
        elif first is not None:
            runs.append((first, seq - first))
            first = None
    if first is not None:
        runs.append((first, sent - first))
    return runs


@dataclass(frozen=True)
class ProbeSend:
    """What a probe's sender did: `sent` packets on each of its FLOWS flows,
    one every `interval` from `start`, flow k from source port `base_sport`
    + k and k x `stagger` late (the flows take turns); `skipped`: [first,
    count] ranges of the seqs it never sent."""
    sent: int
    start: float
    interval: float = INTERVAL_S
    base_sport: int = BASE_SPORT
    skipped: Sequence = ()
    stagger: float = 0.0

    @classmethod
    def of(cls, reply: dict, interval: float, base_sport: int) -> "ProbeSend":
        """From the sender's reply (programs/failprobe.py) and what it was told."""
        return cls(reply["sent"], reply["start"], interval, base_sport,
                   reply.get("skipped", ()), reply.get("stagger", 0.0))


def analyse(arrivals: Dict[str, list], send: ProbeSend, t_down: float) -> dict:
    """What the probe flows saw of a failure at `t_down`. A flow was hit when
    it lost packets sent from the failure on (within half a second) in a run
    longer than any it lost before; that run, as time, is how long its
    traffic stopped (to within one interval).

    A flow's traffic starts at its first arrival: packets lost before it are
    the probe starting (the receiver not yet listening, a first ARP), not the
    path stopping, and all flows lose them at once: under load they ran 4-8
    packets, and longer than a failover's stop they made every flow's
    failure run read as no longer than one before it. A flow that never
    arrived tells nothing, and is not counted hit.

    Packets are placed in time by when they were sent (`send`'s start + seq x
    interval + the flow's place x stagger: the flows take turns), so
    queueing delay does not count as a stop; the sender skips the ticks it
    was too late for rather than send them in a burst, and `send.skipped`
    are the seqs it never sent."""
    sent, interval = send.sent, send.interval
    gaps = frozenset(s for first, count in send.skipped for s in range(first, first + count))
    stopped, hit, lost = 0, 0, 0
    hit_runs = []                                 # (flow, first seq lost, seqs lost in a row)
    for sport in range(FLOWS):
        # its seq sent as it went down
        down = (t_down - send.start - sport * send.stagger) / interval
        received = {seq for seq, _t in arrivals.get(str(send.base_sport + sport), ())}
        begun = min(received, default=sent)       # before it: the probe starting
        before, after = 0, None
        for first, length in missing_runs(received, sent, gaps):
            if first < begun:
                continue
            if first + length <= down - 1:
                before = max(before, length)
            elif first <= down + 0.5 / interval:   # began within half a second of it
                after = max(after or (0, 0), (length, first))
        if after and after[0] >= PAUSE and after[0] > before:
            hit, lost, stopped = hit + 1, lost + after[0], max(stopped, after[0])
            hit_runs.append((sport, after[1], after[0]))
    return {"flows": FLOWS, "flows_hit": hit, "lost_packets": lost,
            "stopped_ms": round(stopped * interval * 1e3, 1),
            "interval_ms": round(interval * 1e3, 3),
            "path_stopped_ms": path_stop_ms(send, hit_runs, gaps)}


def path_stop_ms(send: "ProbeSend", runs, skipped=frozenset()) -> Optional[float]:
    """How long the path the hit flows shared stopped, read from all of them
    at once: the span from the first to the last packet they lost in their
    failure runs, by send time, plus the mean spacing of their packets
    (interval / flows hit): the stop began, and ended, half a spacing beyond
    those on average. The flows take turns (`send.stagger` apart), so
    together they sample the path every interval / (flows hit) rather than
    every interval: a 5 ms stop costs each flow at most one packet, which
    `stopped_ms` reads as a whole interval (8 ms at 20 Mbit/s), where this
    reads about 5. `runs`: (flow, first seq lost, seqs lost in a row) of
    each hit flow; `skipped`: seqs never sent. None when no flow was hit."""
    if not runs:
        return None
    lost = [send.start + seq * send.interval + sport * send.stagger
            for sport, first, length in runs for seq in range(first, first + length)
            if seq not in skipped]
    if not lost:
        return None
    return round((max(lost) - min(lost) + send.interval / len(runs)) * 1e3, 1)


def slowdown(iterations: List[dict], t: float, busy: List[tuple]) -> Optional[dict]:
    """The iteration running at `t` against the median of its size's
    iterations that no failure window (`busy`) touched."""
    hit = next((i for i in iterations if i["t0"] <= t <= i["t1"]), None)
    if hit is None:
        return None
    clean = [i["seconds"] for i in iterations if i["size_bytes"] == hit["size_bytes"]
             and not any(i["t0"] <= e and s <= i["t1"] for s, e in busy)]
    usual = statistics.median(clean) if clean else None
    return {"size_bytes": hit["size_bytes"], "iteration": hit["iteration"],
            "seconds": round(hit["seconds"], 4), "usual_seconds": usual and round(usual, 4),
            "slowdown": round(hit["seconds"] / usual, 2) if usual else None}


class Failures:
    """Runs the failures on a lab from a thread: `start()` when the sweep's
    first size starts, `stop(iterations)` at its end returns the report."""

    def __init__(self, lab, failures: List[Failure]):
        self.lab, self.failures = lab, failures
        self.events: List[dict] = []
        self._stop = threading.Event()
        self._thread = None
        self._down: List[Failure] = []
        self._probes: List[tuple] = []

    def start(self) -> "Failures":
        self.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _wait_until(self, t: float) -> bool:
        return not self._stop.wait(max(0.0, t - time.monotonic()))

    def _run(self) -> None:
        actions = []
        for k, f in enumerate(self.failures):
            actions.append((self.t0 + f.at - LEAD_S, 0, k, "probe"))
            actions += [(self.t0 + t, 1 if what == "down" else 2, k, what)
                        for t, what in f.actions()]
        for when, _order, k, what in sorted(actions):
            if not self._wait_until(when):
                return
            self._act(k, what)

    def _act(self, k: int, what: str) -> None:
        f = self.failures[k]
        event = self.events[k] if k < len(self.events) else None
        if what == "probe":
            self.events.append({"link": f"{f.a}-{f.b}", "given": f.text, "at_s": f.at,
                                "duration_s": f.duration, "kind": f.kind, "downs": 0})
            self._start_probe(k, f)
        elif what == "down":
            event.setdefault("t_down", time.monotonic())
            event["downs"] += 1
            self.lab.set_link(f.a, f.b, up=False, index=f.index, silent=f.kind == "silent")
            self._down.append(f)
        else:
            self.lab.set_link(f.a, f.b, up=True, index=f.index, silent=f.kind == "silent")
            event["t_up"] = time.monotonic()
            self._down.remove(f)

    def _start_probe(self, k: int, f: Failure) -> None:
        pair = probe_pair(self.lab.fabric, f.a, f.b)
        if pair is None:
            return
        src, dst = pair
        interval = probe_interval(self.lab.fabric, src, dst)
        watch = LEAD_S + min(f.duration or MAX_WATCH_S, MAX_WATCH_S) + TAIL_S
        port, sport = BASE_PORT + k, BASE_SPORT + FLOWS * k
        # the receiver listens until stop() has the sender's reply and closes its
        # stdin (however late the host started the sender); the cap is a safety net
        recv = self.lab.popen(dst, [sys.executable, "-m", "programs.failprobe", "recv",
                                    "--port", str(port), "--until-eof", "--seconds",
                                    str(watch + RECEIVE_CAP_S)],
                              stdin=subprocess.PIPE, text=True)
        # its first line says it listens; the sender's first packets would be lost
        # before (read with the rest at the end). Bounded: the failure stays on time
        select.select([recv.stdout], [], [], READY_S)
        send = self.lab.popen(src, [sys.executable, "-m", "programs.failprobe", "send",
                                    "--dst", self.lab.fabric.endpoint(dst).ip, "--port",
                                    str(port), "--sports", f"{sport}:{sport + FLOWS - 1}",
                                    "--interval", str(interval), "--seconds", str(watch)],
                              text=True)
        self._probes.append((k, src, dst, interval, send, recv))

    def stop(self, iterations: List[dict]) -> List[dict]:
        """End the failures (links still down come back up), read the
        probes, and report each event that happened."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        for f in list(self._down):
            self.lab.set_link(f.a, f.b, up=True, index=f.index, silent=f.kind == "silent")
            self.events[self.failures.index(f)]["t_up"] = time.monotonic()
            self._down.remove(f)
        busy = [(e["t_down"], e.get("t_up", e["t_down"])) for e in self.events if "t_down" in e]
        for k, src, dst, interval, send, recv in self._probes:
            event = self.events[k]
            sender = _reply(send)
            arrivals = _reply(recv).get("arrivals", {})
            if "t_down" in event and "start" in sender:
                probe = ProbeSend.of(sender, interval, BASE_SPORT + FLOWS * k)
                event["probe"] = {"src": src, "dst": dst,
                                  **analyse(arrivals, probe, event["t_down"])}
        report = []
        for event in self.events:
            if "t_down" not in event:
                continue
            t_down = event.pop("t_down")
            t_up = event.pop("t_up", None)
            event["down_at_s"] = round(t_down - self.t0, 3)
            event["down_for_s"] = round(t_up - t_down, 3) if t_up else None
            event["collective"] = slowdown(iterations, t_down, busy)
            report.append(event)
        return report


def _reply(proc) -> dict:
    """A probe process's JSON line (it ends on its own); {} if it failed."""
    try:
        # a sender the host started late is still sending: waited for while it works
        out, _ = communicate_progressing(proc, "a failure probe")
        return json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    except Exception:                    # noqa: BLE001 - a probe is never worth the run
        stop_process(proc, grace=0, ask=False)
        return {}
