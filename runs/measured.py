"""The sweep's backend on a live lab: what a fabric engineer measures
around each size, the way nccl-tests would not: latency probes under load
against the idle fabric, per-link bytes, peak utilisation, queue peaks and
drops, ECMP imbalance per leaf, the CPU, the simulation beside each size
(runs/beside.py), and whether the host kept up (the fidelity verdict).
Cross traffic and scheduled link failures run alongside when asked for.

The engine is asked for by name (collectives/registry.py) and driven through
its interface (traffic/engines): nothing here branches on which one it is.

    result = run_experiment(lab, exp, results_dir)
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable, List

from collectives import metrics
from policies import policy
from runs.beside import Twin
from runs.experiment import Experiment
from runs.sweep import Model, Size, sweep
from traffic.engines import make_engine
from traffic.measure.background import CrossTraffic, Prober
from traffic.measure.failures import Failures
from traffic.measure.failures import parse as parse_failures
from traffic.measure.fidelity import fidelity, mark_host_bound, mark_unresolved, size_flags
from traffic.measure.monitor import Monitor

# figures some engines count per iteration (their EXTRAS), summed over a size
ITERATION_EXTRAS = ("frames_sent", "frames_lost", "retransmits", "scale_up_bytes", "pieces",
                    "reordered")


def run_experiment(lab, exp: Experiment, results: Path,
                   progress: Callable[[str], None] = lambda msg: None) -> dict:
    """Replay `exp` on `lab` size by size; the run record (see docs/output.md).
    The monitor's samples and the probes go to `results`."""
    return sweep(LabBackend(lab, results), exp, progress)


class LabBackend:
    """A live lab: its monitor, latency prober, cross traffic, failures, and
    the simulator beside it; each started in `begin`, stopped in `close`."""

    def __init__(self, lab, results: Path):
        self.lab, self.fabric, self.results = lab, lab.fabric, results
        self.engine = self.monitor = self.prober = self.cross = self.failures = None
        self.twin, self.idle, self.probe, self.alpha = None, None, [], 0.0
        self.windows: List[dict] = []       # each size's monitor window, for the verdict
        self.log: List[dict] = []           # every iteration's times, for the failures
        self.cross_report = self.failed = None

    def begin(self, exp: Experiment, model: Model, ranks: List[str], progress) -> float:
        self.probe = exp.probe or [ranks[0], ranks[-1]]
        self.monitor = Monitor(self.fabric, source=self.lab.counters).start()
        self.prober = Prober(self.lab, self.probe[0], self.probe[1])
        self.idle, alpha = _idle_latency(self.prober, exp, progress)
        self.alpha = alpha
        self.cross = CrossTraffic(self.lab, *exp.cross) if exp.cross else None
        self.engine = make_engine(exp.engine, self.fabric, ranks, self.lab)
        self.twin = Twin.for_lab(self.fabric, ranks, self.probe, alpha)
        if exp.fail:
            self.failures = Failures(self.lab, parse_failures(self.fabric, exp.fail)).start()
        return alpha

    def iterations(self, exp: Experiment):
        return exp.warmup, exp.iters

    def measure(self, exp: Experiment, model: Model, size: Size, record: dict) -> dict:
        """The size's time window as the monitor and the prober saw it, its
        flags, where its bytes went, and the simulation beside it."""
        iters = size.iterations
        self.log.extend({"size_bytes": record["size_bytes"], "iteration": i,
                         "t0": it["t0"], "t1": it["t1"], "seconds": it["seconds"]}
                        for i, it in enumerate(size.warmup + iters))
        self.monitor.wait_past(iters[-1]["t1"])
        t0, t1 = iters[0]["t0"], iters[-1]["t1"]
        window = self.monitor.window(t0, t1)
        self.windows.append(window)
        out = {"latency": self.prober.summary(t0, t1),
               "links": {intf: dict(l) for intf, l in window["links"].items()},
               "ecmp_imbalance": window["ecmp_imbalance"],
               "cpu_busy_pct": window["cpu_busy_pct"], "ovs_core_pct": window["ovs_core_pct"],
               **({"machines": window["machines"]} if "machines" in window else {})}
        out.update({k: sum(i[k] for i in iters) for k in ITERATION_EXTRAS if k in iters[0]})
        out.update(size_flags(record["busbw_over_link"], size.steps,
                              size.predicted_s - self.alpha * size.steps, model.rate,
                              self.fabric.mtu, model.local))
        split = metrics.traffic_split(size.schedule, model.server_of.__getitem__)
        out["payload_bytes"] = {k: v * exp.iters for k, v in split.items()}
        out["wire_bytes"] = wire_split(self.fabric, out["links"])
        if exp.scale_up == "memory":      # handed over in the agents, not put on the links
            out["wire_bytes"]["intra_node_in_memory"] = out.get("scale_up_bytes", 0)
        self._beside_the_simulation({**record, **out}, out, exp, model)
        return out

    def _beside_the_simulation(self, whole: dict, out: dict, exp: Experiment,
                               model: Model) -> None:
        """The simulated time of the size that ran (runs/beside.py), and
        measured over simulated; None, with the reason, if the simulation
        failed: a comparison is never worth the run."""
        try:
            self.twin.beside(whole, exp.job(whole["elements"], self.fabric.policy, model.local),
                             exp.iters)
            out.update({k: v for k, v in whole.items() if k.startswith("simulated")
                        or k == "measured_over_simulated"})
        except Exception as exc:          # noqa: BLE001
            out["simulated_s"] = out["measured_over_simulated"] = None
            out["simulation_error"] = f"{type(exc).__name__}: {exc}"

    def finish(self, exp: Experiment, model: Model, runs: List[dict]) -> dict:
        fabric, monitor = self.fabric, self.monitor
        self.results.mkdir(parents=True, exist_ok=True)
        (self.results / "samples.json").write_text(json.dumps(monitor.samples))
        (self.results / "probes.json").write_text(json.dumps(self.prober.samples))
        verdict = mark_host_bound(fidelity(self.windows, fabric), runs,
                                  sim_faithful=policy(fabric.policy).sim_faithful)
        verdict = mark_unresolved(verdict, runs, model.rate, fabric.mtu)
        whole = monitor.window(monitor.samples[0]["t"], monitor.samples[-1]["t"])["links"]
        return {"probe": self.probe, "idle_latency": self.idle, "fidelity": verdict,
                "uplink_tx_bytes": {leaf.name: {l.a_intf: whole[l.a_intf]["tx_bytes"]
                                                for l in fabric.uplinks(leaf.name)}
                                    for leaf in fabric.leaves},
                "tiers": metrics.tier_report(fabric, whole), "cross_traffic": self.cross_report,
                "failures": self.failed, "routing": self._routing(runs)}

    def _routing(self, runs: List[dict]) -> dict:
        """The policy, the pieces that overtook a later one (agents), and what
        the adaptive controller placed."""
        out = {"policy": self.fabric.policy}
        if runs and "pieces" in runs[0]:
            out["pieces"] = sum(r["pieces"] for r in runs)
            out["reordered"] = sum(r["reordered"] for r in runs)
        if policy(self.fabric.policy).moves_elephants:
            out["adaptive"] = self.lab.controller_status().get("adaptive")
        return out

    def close(self) -> None:
        """Links still down come back first; then the engine, the cross
        traffic, the prober and the monitor stop."""
        if self.failures is not None:
            self.failed = self.failures.stop(self.log)
        if self.engine is not None:
            self.engine.close()
        if self.cross is not None:
            self.cross_report = self.cross.stop()
        if self.prober is not None:
            self.prober.stop()
        if self.monitor is not None:
            self.monitor.stop()


def _idle_latency(prober: Prober, exp: Experiment, progress) -> tuple:
    """The idle fabric's latency, and alpha (half its median round trip)."""
    progress("measuring idle latency")
    prober.wait_first_reply()
    t_idle = time.monotonic()
    time.sleep(exp.idle_seconds)
    idle = prober.summary(t_idle, time.monotonic())
    alpha = idle["p50_us"] / 2e6 if not math.isnan(idle["p50_us"]) else 1e-4
    return idle, alpha


def wire_split(fabric, links: dict) -> dict:
    """Bytes the switches put on intra-node links (towards GPUs, over the
    NVLink-class interconnect) and on the network's links towards servers."""
    out = {"intra_node": 0, "network_to_servers": 0}
    for link in fabric.links:
        if link.kind == "intra_node":
            out["intra_node"] += links.get(link.b_intf, {}).get("tx_bytes", 0)
        elif link.kind == "server_leaf":
            out["network_to_servers"] += links.get(link.b_intf, {}).get("tx_bytes", 0)
    return out
