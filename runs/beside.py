"""The simulator beside an emulated run: each size that ran, simulated on
the same fabric with the lab's own parameters, and the ECMP draw matched to
what the lab's counters saw.

The lab's switches hash flows with their own bases; the simulator draws with
a seed. Where ECMP carried traffic, the size is simulated with up to SEEDS
seeds (within MATCH_BUDGET_S), and from the draw whose bytes on the
inter-switch links are closest to the bytes the lab measured there, the
paths are fitted to the counters (`fit_paths`: each flow moved to the path,
or two flows swapped, that brings the bytes closer, until none does). The
fitted paths stand for the paths the lab's flows took, so measured/simulated
compares like with like; `simulated_path_error` is the share of the
measured inter-switch bytes they leave unexplained. The times over all
seeds are the spread a user should expect from ECMP on this fabric
(`simulated_spread`).
"""

from __future__ import annotations

import statistics
import time
from typing import Dict, List

from sim.network import Network
from sim.replay import Replay
from sim.simulator import Simulator
from topologies.kinds import link_class

SEEDS = 64
MATCH_BUDGET_S = 5.0
FIT_BUDGET_S = 5.0
# links between switches: every class but a server's own and the server's inside
NOT_BETWEEN_SWITCHES = ("server_leaf", "intra_node")


class Twin:
    """The simulator for one emulated run (sim/simulator.py): its fabric,
    ranks and latency, ECMP drawn with seed 0 between sizes."""

    def __init__(self, fabric, ranks: List[str], hop_latency_s: float):
        self.simulator = Simulator.on_fabric(fabric, ranks, hop_latency_s=hop_latency_s)
        self.inter = [intf for l in fabric.links
                      if link_class(l.kind) not in NOT_BETWEEN_SWITCHES
                      for intf in (l.a_intf, l.b_intf)]

    @classmethod
    def for_lab(cls, fabric, ranks, probe, alpha: float) -> "Twin":
        """The measured idle one-way latency spread over the probe path's hops."""
        return cls(fabric, ranks, alpha / len(Network(fabric).path(probe[0], probe[1])))

    def beside(self, record: dict, job, iterations: int) -> None:
        """Fill `record` (one emulated size) with the simulation beside it."""
        network = self.simulator.network
        replay = self.simulator.replay_of(job)
        measured = {i: record["links"][i]["tx_bytes"] / iterations
                    for i in self.inter if i in record["links"]}
        # ECMP decides only where the collective (not just the probe) crossed switches
        total = sum(l["tx_bytes"] for l in record["links"].values()) / iterations
        ecmp = (sum(measured.values()) > 0.05 * total
                and any(p.groups for p in network.plan.values()))
        outcomes = self._draws(replay, SEEDS if ecmp else 1)
        seed, best = min(outcomes.items(), key=lambda kv: (_distance(kv[1][1], measured), kv[0]))
        times = sorted(t for t, _ in outcomes.values())
        if ecmp:                    # from the closest draw, the paths the counters tell
            self.simulator.reseed(seed)
            record["simulated_path_error"] = fit_paths(network, replay.sent_bytes(), measured)
            outcome = replay.run()
            best = (outcome.seconds, outcome.link_bytes)
            network.unpin()
            self.simulator.reseed(0)
        record["simulated_s"] = best[0]
        record["measured_over_simulated"] = record["time_s"] / best[0] if best[0] else None
        record["simulated_seed"] = seed
        record["simulated_link_bytes"] = {i: round(best[1].get(i, 0.0)) for i in record["links"]}
        record["simulated_spread"] = {"seeds": len(times), "min_s": times[0],
                                      "median_s": statistics.median(times), "max_s": times[-1]}

    def _draws(self, replay: Replay, seeds: int) -> Dict[int, tuple]:
        out, deadline = {}, time.monotonic() + MATCH_BUDGET_S
        for seed in range(seeds):
            self.simulator.reseed(seed)
            result = replay.run()
            out[seed] = (result.seconds, result.link_bytes)
            if time.monotonic() > deadline:
                break
        self.simulator.reseed(0)
        return out


def _distance(simulated: Dict[str, float], measured: Dict[str, float]) -> float:
    """How far the simulated bytes on the inter-switch links are from the
    measured ones, as a share of what was measured there."""
    total = sum(measured.values()) or 1.0
    return sum(abs(simulated.get(i, 0.0) - b) for i, b in measured.items()) / total


def fit_paths(network: Network, sent: Dict[tuple, float], measured: Dict[str, float],
              passes: int = 8) -> float:
    """Pin the ECMP choices of the flows `sent` ((src, dst, flow) -> wire
    bytes) so that their bytes on the inter-switch links come closest to
    `measured`: from the current draw, flow by flow, every path the flow
    could take tried and the closest kept, until no flow moves. Returns the
    distance left (a share of the measured bytes)."""
    def distance() -> float:
        on: Dict[str, float] = {}
        for (src, dst, flow), b in sent.items():
            for link in network.path(src, dst, flow):
                on[link.intf] = on.get(link.intf, 0.0) + b
        return _distance(on, measured)

    best = distance()
    deadline = time.monotonic() + FIT_BUDGET_S
    crossing = [f for f in sent if network.decisions(*f)]
    for _ in range(passes):
        moved = False
        for f in crossing:                               # one flow at a time
            keep = _current(network, *f)
            for choice in _every_path(network, *f):
                _set(network, *f, choice)
                d = distance()
                if d < best - 1e-9:
                    best, keep, moved = d, choice, True
            _set(network, *f, keep)
        for i, f in enumerate(crossing):                 # two at once: a swap
            if moved or best < 1e-9 or time.monotonic() > deadline:
                break
            for g in crossing[i + 1:]:
                keep_f, keep_g = _current(network, *f), _current(network, *g)
                for cf in list(_every_path(network, *f)):
                    _set(network, *f, cf)
                    for cg in _every_path(network, *g):
                        _set(network, *g, cg)
                        d = distance()
                        if d < best - 1e-9:
                            best, keep_f, keep_g, moved = d, cf, cg, True
                _set(network, *f, keep_f)
                _set(network, *g, keep_g)
        if not moved or time.monotonic() > deadline:
            break
    return best


def _current(network: Network, src: str, dst: str, flow: int):
    return [(switch, network.pinned.get((switch, src, dst, flow),
                                        network.bucket(switch, src, dst, flow, n)))
            for switch, n in network.decisions(src, dst, flow)]


def _every_path(network: Network, src: str, dst: str, flow: int, fixed=()):
    """Every way ECMP could send the flow: lists of (switch, bucket)."""
    _set(network, src, dst, flow, fixed)
    points = network.decisions(src, dst, flow)
    if len(points) == len(fixed):
        yield list(fixed)
        return
    switch, buckets = points[len(fixed)]
    for bucket in range(buckets):
        yield from _every_path(network, src, dst, flow, fixed + ((switch, bucket),))


def _set(network: Network, src: str, dst: str, flow: int, choice) -> None:
    """The flow's pins: exactly `choice`."""
    for (switch, s, d, f) in [k for k in network.pinned if k[1:] == (src, dst, flow)]:
        network.pin(switch, s, d, f, None)
    for switch, bucket in choice:
        network.pin(switch, src, dst, flow, bucket)
