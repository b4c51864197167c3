"""A message-size sweep simulated instead of emulated: the same experiment,
the same run record (so the same tables, JSON, CSV and figures), from the
flow-level simulator (`--engine sim`).

Per size: the simulated time and the nccl-tests columns from it, the
alpha-beta prediction with the same latency for comparison, and per
directed link the bytes it carried and its mean utilisation. What an
emulated run measures and a simulation cannot (latency under load, queues,
drops, CPU) is absent or NaN, and the verdict says the figures are
simulated.
"""

from __future__ import annotations

from typing import Callable, Dict

from collectives import metrics
from runs.experiment import Experiment
from runs.record import RunRecord
from runs.sweep import Size, sweep
from traffic.engines import make_engine

NAN = float("nan")


def simulate_experiment(fabric, exp: Experiment, seed: int = 0, hop_latency_s: float = 0.0,
                        progress: Callable[[str], None] = lambda msg: None) -> RunRecord:
    """Simulate `exp` on `fabric` size by size; a run record as an emulated
    run's (docs/output.md), with `simulated` set."""
    return sweep(SimBackend(fabric, seed, hop_latency_s), exp, progress)


class SimBackend:
    """The flow-level simulator as the sweep's backend: one iteration a size
    (the simulation is deterministic for its seed), the bytes of every
    directed link, and NaN or nothing for what only a live lab measures."""

    def __init__(self, fabric, seed: int = 0, hop_latency_s: float = 0.0):
        self.fabric, self.seed, self.hop_latency_s = fabric, seed, hop_latency_s
        self.engine = None

    def begin(self, exp: Experiment, model, ranks, progress) -> float:
        self.engine = make_engine("sim", self.fabric, ranks)
        self.engine.network.seed, self.engine.hop_latency_s = self.seed, self.hop_latency_s
        hops = max(len(self.engine.network.path(ranks[0], r)) for r in ranks[1:])
        return hops * self.hop_latency_s + max(l.delay_s for l in
                                               self.engine.network.links.values())

    def iterations(self, exp: Experiment):
        return 0, 1

    def measure(self, exp: Experiment, model, size: Size, record: dict) -> dict:
        out = size.iterations[0]
        links = _links(self.fabric, out["link_bytes"], out["seconds"])
        return {"latency": {"p50_us": NAN, "p99_us": NAN, "max_us": NAN, "samples": 0, "lost": 0},
                "links": links, "ecmp_imbalance": _imbalance(self.fabric, links),
                "cpu_busy_pct": NAN, "ovs_core_pct": NAN, "flags": []}

    def finish(self, exp: Experiment, model, runs) -> dict:
        fabric = self.fabric
        return {"probe": [], "idle_latency": {"p50_us": NAN, "p99_us": NAN, "samples": 0},
                "simulated": {"seed": self.seed, "hop_latency_s": self.hop_latency_s},
                "fidelity": {"trustworthy": True, "host_kept_up": True, "flagged_sizes": [],
                             "simulated": True},
                "uplink_tx_bytes": _uplinks(fabric, runs[-1]["links"] if runs else {}),
                "tiers": metrics.tier_report(fabric, {i: {"tx_bytes": sum(r["links"][i]["tx_bytes"]
                                                                    for r in runs)}
                                                for i in (runs[0]["links"] if runs else {})}),
                "cross_traffic": None}

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


def _links(fabric, link_bytes: Dict[str, float], seconds: float) -> Dict[str, dict]:
    """Per sending interface, as the monitor reports switch-side ones."""
    out = {}
    for link in fabric.links:
        for node, intf, peer in ((link.a, link.a_intf, link.b), (link.b, link.b_intf, link.a)):
            sent = link_bytes.get(intf, 0.0)
            util = sent * 8 / (seconds * link.spec.rate_mbit * 1e6) if seconds > 0 else 0.0
            out[intf] = {"link": f"{node}->{peer}", "tx_bytes": int(round(sent)),
                         "mean_util": util, "peak_util": util, "peak_backlog_bytes": 0,
                         "drops": 0}
    return out


def _imbalance(fabric, links: Dict[str, dict]) -> Dict[str, float]:
    uplinks = {leaf.name: [links[l.a_intf]["tx_bytes"] for l in fabric.uplinks(leaf.name)]
               for leaf in fabric.leaves}
    return {leaf: metrics.imbalance(v) for leaf, v in uplinks.items() if sum(v) > 0}


def _uplinks(fabric, links: Dict[str, dict]) -> dict:
    return {leaf.name: {l.a_intf: links.get(l.a_intf, {}).get("tx_bytes", 0)
                        for l in fabric.uplinks(leaf.name)} for leaf in fabric.leaves}
