"""What runs alongside a collective sweep on a live lab, each as a part the
lab backend (runs/measured.py) starts, asks per size, and stops:

- `Links`: the monitor; per size its time window (per-link bytes, peak
  utilisation, queue peaks and drops, ECMP imbalance per leaf, the CPU) and
  where the bytes went; at the end the fidelity verdict, the uplinks' and
  tiers' bytes, and samples.json;
- `Latency`: the prober; the idle fabric's latency first (its half round
  trip is the model's alpha), then the latency under load per size, and
  probes.json;
- `CrossTraffic`: iperf3 flows between two hosts for the whole sweep;
- `LinkFailures`: links taken down and back on a schedule, and what each
  did to the iterations it hit;
- `Simulation`: the flow-level simulator beside each size (runs/beside.py).

A part overrides what it needs of `Part`: `begin` (before the engine is
made; parts begin in list order, so a part sees what those before it set on
the run, like the alpha), `ready` (the engine is up), `measure` (adds to one
size's record, in list order: a part reads what the parts before it added),
`finish` (its keys of the run record) and `close` (always; in reverse order).
A part names the parts it reads from in `needs`.

    parts = standard_parts(exp)                # what a default run measures
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import List, Optional, Tuple

from collectives import metrics
from policies import policy
from runs.beside import Twin
from runs.experiment import Experiment, job_of
from runs.sweep import RankCosts, Size
from traffic.measure import background
from traffic.measure.failures import Failures
from traffic.measure.failures import parse as parse_failures
from traffic.measure.fidelity import (calibrated_rate, fidelity, mark_host_bound,
                                      mark_rate_to_try, mark_unresolved)
from traffic.measure.monitor import Monitor

# the one-way latency the model assumes when no part measured it
UNMEASURED_ALPHA_S = 1e-4


@dataclass
class LabRun:
    """One sweep on a lab, as its parts see it."""
    lab: object
    results: Path                       # where parts write their files
    exp: Experiment
    model: RankCosts
    ranks: List[str]
    probe: List[str]                    # [src, dst] of the latency probe
    alpha: float = UNMEASURED_ALPHA_S
    log: List[dict] = field(default_factory=list)   # every iteration's times

    @property
    def fabric(self):
        return self.lab.fabric


class Part:
    """Something that runs alongside a lab's sweep; every hook is optional."""
    needs: Tuple[str, ...] = ()         # names of the parts it reads from

    def begin(self, run: LabRun, progress) -> None:
        self.run = run

    def ready(self) -> None:
        pass

    def measure(self, size: Size, record: dict, out: dict) -> None:
        pass

    def finish(self, runs: List[dict]) -> dict:
        return {}

    def close(self) -> None:
        pass


class Links(Part):
    """The monitor: what every link and queue did in each size's window."""

    def __init__(self):
        self.monitor: Optional[Monitor] = None
        self.windows: List[dict] = []   # each size's window, for the verdict

    def begin(self, run, progress):
        super().begin(run, progress)
        self.monitor = Monitor(run.fabric, source=run.lab.counters).start()

    def measure(self, size, record, out):
        iters = size.iterations
        self.monitor.wait_past(iters[-1]["t1"])
        window = self.monitor.window(iters[0]["t0"], iters[-1]["t1"])
        self.windows.append(window)
        out.update({"links": {intf: dict(l) for intf, l in window["links"].items()},
                    "ecmp_imbalance": window["ecmp_imbalance"],
                    "cpu_busy_pct": window["cpu_busy_pct"],
                    "ovs_core_pct": window["ovs_core_pct"],
                    **({"machines": window["machines"]} if "machines" in window else {})})
        out["wire_bytes"] = wire_split(self.run.fabric, out["links"])
        if self.run.exp.scale_up == "memory":   # handed over in the agents, not on the links
            out["wire_bytes"]["intra_node_in_memory"] = out.get("scale_up_bytes", 0)

    def finish(self, runs):
        fabric, monitor = self.run.fabric, self.monitor
        _write(self.run.results, "samples.json", monitor.samples)
        verdict = mark_host_bound(fidelity(self.windows, fabric), runs,
                                  sim_faithful=policy(fabric.policy).sim_faithful)
        verdict = mark_unresolved(verdict, runs, self.run.model.rate, fabric.mtu)
        verdict = mark_rate_to_try(verdict, runs, self.run.model.rate,
                                   self._calibrated() if verdict.get("host_bound") else None)
        whole = monitor.window(monitor.samples[0]["t"], monitor.samples[-1]["t"])["links"]
        return {"fidelity": verdict,
                "uplink_tx_bytes": {leaf.name: {l.a_intf: whole[l.a_intf]["tx_bytes"]
                                                for l in fabric.uplinks(leaf.name)}
                                    for leaf in fabric.leaves},
                "tiers": metrics.tier_report(fabric, whole)}

    def _calibrated(self):
        """The ceiling `--calibrate` found for this fabric, from the results
        folder this run's folder is in (a further nccl-tests sweep's folder
        is two deeper)."""
        folders = list(Path(self.run.results).parents)[:3]
        return next(filter(None, (calibrated_rate(f, self.run.fabric.name) for f in folders)),
                    None)

    def close(self):
        if self.monitor is not None:
            self.monitor.stop()


class Latency(Part):
    """The prober: the idle fabric's latency (alpha), then under load."""

    def __init__(self):
        self.prober: Optional[background.Prober] = None
        self.idle: Optional[dict] = None

    def begin(self, run, progress):
        super().begin(run, progress)
        self.prober = background.Prober(run.lab, run.probe[0], run.probe[1])
        progress("measuring idle latency")
        self.prober.wait_first_reply()
        t_idle = time.monotonic()
        time.sleep(run.exp.idle_seconds)
        self.idle = self.prober.summary(t_idle, time.monotonic())
        if not math.isnan(self.idle["p50_us"]):
            run.alpha = self.idle["p50_us"] / 2e6

    def measure(self, size, record, out):
        out["latency"] = self.prober.summary(size.iterations[0]["t0"], size.iterations[-1]["t1"])

    def finish(self, runs):
        _write(self.run.results, "probes.json", self.prober.samples)
        return {"probe": self.run.probe, "idle_latency": self.idle}

    def close(self):
        if self.prober is not None:
            self.prober.stop()


class CrossTraffic(Part):
    """iperf3 flows between two hosts while the sweep runs."""

    def __init__(self, src: str, dst: str):
        self.ends, self.cross, self.report = (src, dst), None, None

    def begin(self, run, progress):
        super().begin(run, progress)
        self.cross = background.CrossTraffic(run.lab, *self.ends)

    def finish(self, runs):
        return {"cross_traffic": self.report}

    def close(self):
        if self.cross is not None:
            self.report = self.cross.stop()


class LinkFailures(Part):
    """Links down and back on a schedule that starts with the engine."""

    def __init__(self, specs: List[str]):
        self.specs, self.failures, self.failed = list(specs), None, None

    def ready(self):
        schedule = parse_failures(self.run.fabric, self.specs)
        self.failures = Failures(self.run.lab, schedule).start()

    def finish(self, runs):
        return {"failures": self.failed}

    def close(self):                    # the links still down come back
        if self.failures is not None:
            self.failed = self.failures.stop(self.run.log)


class Simulation(Part):
    """The simulator beside each size: measured over simulated. A failed
    simulation leaves None and its reason; a comparison is never worth the
    run."""
    needs = ("Links",)                  # fits the ECMP draw to the links' bytes

    def begin(self, run, progress):
        super().begin(run, progress)
        self.twin = Twin.for_lab(run.fabric, run.ranks, run.probe, run.alpha)

    def measure(self, size, record, out):
        whole = {**record, **out}
        exp = replace(self.run.exp, algorithm=whole["algorithm"])     # what -a auto ran
        try:
            self.twin.beside(whole, job_of(exp, whole["elements"], self.run.fabric.policy,
                                            self.run.model.local), exp.iters)
            out.update({k: v for k, v in whole.items() if k.startswith("simulated")
                        or k == "measured_over_simulated"})
        except Exception as exc:          # noqa: BLE001
            out["simulated_s"] = out["measured_over_simulated"] = None
            out["simulation_error"] = f"{type(exc).__name__}: {exc}"


def standard_parts(exp: Experiment) -> List[Part]:
    """What a run measures unless told otherwise: the links, the latency, the
    cross traffic and failures the experiment asks for, and the simulation."""
    parts: List[Part] = [Links(), Latency()]
    if exp.cross:
        parts.append(CrossTraffic(*exp.cross))
    parts.append(Simulation())
    if exp.fail:
        parts.append(LinkFailures(exp.fail))
    return parts


def check_parts(parts: List[Part]) -> None:
    """Each part after those it reads from."""
    for k, part in enumerate(parts):
        before = {type(p).__name__ for p in parts[:k]}
        missing = [n for n in part.needs if n not in before]
        if missing:
            raise ValueError(f"the {type(part).__name__} part reads from {', '.join(missing)}, "
                             "which must come before it in the parts")


def wire_split(fabric, links: dict) -> dict:
    """Bytes the switches put on intra-node links (towards GPUs, over the
    NVLink-class interconnect; on a mesh, both GPUs on their link) and on the
    network's links towards servers."""
    out = {"intra_node": 0, "network_to_servers": 0}
    meshed = {h.name for h in fabric.endpoints if h.mesh}
    for link in fabric.links:
        if link.kind == "intra_node" and link.b in meshed:
            out["intra_node"] += sum(links.get(i, {}).get("tx_bytes", 0)
                                     for i in (link.a_intf, link.b_intf))
        elif link.kind == "intra_node":
            out["intra_node"] += links.get(link.b_intf, {}).get("tx_bytes", 0)
        elif link.kind == "server_leaf":
            out["network_to_servers"] += links.get(link.b_intf, {}).get("tx_bytes", 0)
    return out


def _write(folder: Path, name: str, data) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))
