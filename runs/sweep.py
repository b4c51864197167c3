"""A collective sweep on a live lab, measured the way nccl-tests and a fabric
engineer would: per message size, the collective's time, algbw and busbw, the
number of wrong elements, latency probes under load against the idle fabric,
per-link bytes, peak utilisation, queue peaks and drops, ECMP imbalance per
leaf, the alpha-beta prediction, and whether the host kept up.

The engine is asked for by name (collectives/registry.py) and driven through its
interface (traffic/engines): this module never branches on which one it is.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

from collectives import metrics as M
from collectives import schedules as S
from policies import policy
from traffic.engines import make_engine
from runs.experiment import Experiment
from traffic.measure.background import CrossTraffic, Prober
from traffic.measure.failures import Failures
from traffic.measure.failures import parse as parse_failures
from traffic.measure.fidelity import fidelity, mark_host_bound, mark_unresolved, size_flags
from traffic.measure.monitor import Monitor
from runs.beside import Twin


@dataclass
class Model:
    """What the alpha-beta prediction and the traffic split need of the ranks."""
    n: int
    local: int                            # GPUs per server when ranks are whole servers
    server_of: Dict[int, str]
    nic_of: Dict[int, tuple]
    beta: float                           # seconds per payload byte on a NIC link
    beta_intra: Optional[float]           # the same on an NVLink-class link
    rate: float                           # the NIC link's Mbit/s

    @classmethod
    def of(cls, fabric, ranks: List[str]) -> "Model":
        hosts = [fabric.endpoint(s) for s in ranks]
        rate_intra = (fabric.spec["links"]["intra_node"] or {}).get("rate_mbit")
        rate = fabric.spec["links"]["server_leaf"]["rate_mbit"]
        return cls(len(ranks), gpus_per_rank_server(fabric, ranks),
                   {r: h.server for r, h in enumerate(hosts)},
                   {r: (h.leaf, h.port) for r, h in enumerate(hosts)},
                   M.beta_for_rate(rate, fabric.mtu),
                   M.beta_for_rate(rate_intra, fabric.mtu) if rate_intra else None, rate)


def run_experiment(lab, exp: Experiment, results: Path,
                   progress: Callable[[str], None] = lambda msg: None) -> dict:
    """Replay `exp` on `lab` size by size; the run record (see docs/output.md)."""
    fabric = lab.fabric
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    model = Model.of(fabric, ranks)
    # experiment_from checked what a user asked for; this holds callers that
    # build an Experiment themselves (benchmarks) to the same contract, on the
    # ranks actually chosen, before anything starts
    exp.check(model.n, model.local)
    probe = exp.probe or [ranks[0], ranks[-1]]
    monitor = Monitor(fabric, source=getattr(lab, "counters", None)).start()
    prober = Prober(lab, probe[0], probe[1])
    engine = cross = failures = None
    cross_report, runs, timeline, iterations, failed = None, [], None, [], None
    try:
        idle, alpha = _idle_latency(prober, exp, progress)
        cross = CrossTraffic(lab, *exp.cross) if exp.cross else None
        engine = make_engine(exp.engine, fabric, ranks, lab)
        twin = Twin.for_lab(fabric, ranks, probe, alpha)
        sizes = M.sweep_sizes(exp.minbytes, exp.maxbytes, exp.stepfactor)
        failures = Failures(lab, parse_failures(fabric, exp.fail)).start() if exp.fail else None
        for k, size in enumerate(sizes):
            label = f"[{k + 1}/{len(sizes)}] {exp.collective}"
            record, timeline_ = _one_size(engine, exp, model, alpha, size, label,
                                          k == len(sizes) - 1, monitor, prober, progress,
                                          iterations)
            _beside_the_simulation(record, twin, exp, model)
            runs.append(record)
            timeline = timeline_ or timeline
    finally:
        if failures is not None:            # links still down come back first
            failed = failures.stop(iterations)
        if engine is not None:
            engine.close()
        if cross is not None:
            cross_report = cross.stop()
        prober.stop()
        monitor.stop()
    results.mkdir(parents=True, exist_ok=True)
    (results / "samples.json").write_text(json.dumps(monitor.samples))
    (results / "probes.json").write_text(json.dumps(prober.samples))
    verdict = mark_host_bound(fidelity([r.pop("_window") for r in runs], fabric), runs,
                              sim_faithful=policy(fabric.policy).sim_faithful)
    verdict = mark_unresolved(verdict, runs, model.rate, fabric.mtu)
    progress("done")
    return {"experiment": asdict(exp), "ranks": ranks, "gpus_per_server": model.local,
            "probe": probe, "idle_latency": idle, "alpha_s": alpha,
            "beta_s_per_byte": model.beta, "link_rate_mbit": model.rate, "runs": runs,
            "fidelity": verdict, "uplink_tx_bytes": _uplink_bytes(fabric, monitor),
            "tiers": M.tier_report(fabric, monitor.window(monitor.samples[0]["t"],
                                                          monitor.samples[-1]["t"])["links"]),
            "cross_traffic": cross_report, "timeline": timeline, "failures": failed,
            "routing": _routing(lab, runs)}


def _routing(lab, runs: list) -> dict:
    """The policy, the pieces that overtook a later one (agents), and what
    the adaptive controller placed."""
    out = {"policy": lab.fabric.policy}
    if runs and "pieces" in runs[0]:
        out["pieces"] = sum(r["pieces"] for r in runs)
        out["reordered"] = sum(r["reordered"] for r in runs)
    if policy(lab.fabric.policy).moves_elephants:
        out["adaptive"] = lab.controller_status().get("adaptive")
    return out


def _idle_latency(prober: Prober, exp: Experiment, progress) -> tuple:
    """The idle fabric's latency, and alpha (half its median round trip)."""
    progress("measuring idle latency")
    prober.wait_first_reply()
    t_idle = time.monotonic()
    time.sleep(exp.idle_seconds)
    idle = prober.summary(t_idle, time.monotonic())
    alpha = idle["p50_us"] / 2e6 if not math.isnan(idle["p50_us"]) else 1e-4
    return idle, alpha


def _one_size(engine, exp: Experiment, model: Model, alpha: float, size: int, label: str,
              last_size: bool, monitor: Monitor, prober: Prober, progress,
              log: list) -> tuple:
    """Prepare, run warm-up and timed iterations, and make the size's record."""
    n = model.n
    count = S.round_count(exp.collective, n, size // M.TYPE_SIZE)
    predicted = M.predict_seconds(exp.collective, exp.algorithm, n, count, alpha, model.beta,
                                  exp.root, model.local, model.beta_intra,
                                  model.nic_of.__getitem__)
    sched = S.build(exp.collective, exp.algorithm, n, count, exp.root, local=model.local)
    split = M.traffic_split(sched, model.server_of.__getitem__)
    steps = M.schedule_cost(sched, exp.algorithm)["steps"]
    label = f"{label} {count * M.TYPE_SIZE} B"
    progress(f"{label}: setting up")
    engine.prepare(exp.job(count, engine.fabric.policy, model.local))
    total, iters = exp.warmup + exp.iters, []
    for i in range(total):
        progress(f"{label}: iteration {i + 1}/{total}")
        # the step timeline of the very last iteration, where the engine records one
        iters.append(engine.iterate(i, 60 + 20 * predicted,
                                    timeline=last_size and i == total - 1))
        log.append({"size_bytes": count * M.TYPE_SIZE, "iteration": i, "t0": iters[-1]["t0"],
                    "t1": iters[-1]["t1"], "seconds": iters[-1]["seconds"]})
    timeline = None
    if "timeline" in iters[-1]:
        timeline = {"size_bytes": count * M.TYPE_SIZE, "events": [
            {**e, "phase": S.phase(exp.algorithm, e["step"], n, model.local)}
            for e in iters[-1].pop("timeline")]}
    monitor.wait_past(iters[-1]["t1"])
    record = _run_record(exp, n, count, iters[exp.warmup:], predicted, model.rate,
                         monitor, prober)
    record.update(size_flags(record["busbw_over_link"], steps, predicted - alpha * steps,
                             model.rate, monitor.fabric.mtu, model.local))
    record["payload_bytes"] = {k: v * exp.iters for k, v in split.items()}
    record["wire_bytes"] = wire_split(monitor.fabric, record["links"])
    if exp.scale_up == "memory":      # handed over in the agents, not put on the links
        record["wire_bytes"]["intra_node_in_memory"] = record.get("scale_up_bytes", 0)
    return record, timeline


def _beside_the_simulation(record: dict, twin, exp: Experiment, model: Model) -> None:
    """The simulated time of the size that ran (runs/beside.py), and
    measured over simulated; None, with the reason, if the simulation
    failed: a comparison is never worth the run."""
    try:
        twin.beside(record, exp.job(record["elements"], twin.fabric.policy, model.local),
                    exp.iters)
    except Exception as exc:          # noqa: BLE001
        record["simulated_s"] = record["measured_over_simulated"] = None
        record["simulation_error"] = f"{type(exc).__name__}: {exc}"


def _uplink_bytes(fabric, monitor: Monitor) -> dict:
    whole = monitor.window(monitor.samples[0]["t"], monitor.samples[-1]["t"])["links"]
    return {leaf.name: {l.a_intf: whole[l.a_intf]["tx_bytes"] for l in fabric.uplinks(leaf.name)}
            for leaf in fabric.leaves}


def gpus_per_rank_server(fabric, ranks) -> int:
    """GPUs per server when the ranks are whole multi-GPU servers in order
    (what the hierarchical algorithm groups by); 1 otherwise."""
    local = fabric.gpus_per_server
    if local > 1 and len(ranks) % local == 0 and all(
            len({fabric.endpoint(s).server for s in ranks[i:i + local]}) == 1
            for i in range(0, len(ranks), local)):
        return local
    return 1


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


def _run_record(exp, n, count, iters, predicted, rate, monitor, prober) -> dict:
    size = count * M.TYPE_SIZE
    seconds = statistics.mean(i["seconds"] for i in iters)
    t0, t1 = iters[0]["t0"], iters[-1]["t1"]
    window = monitor.window(t0, t1)
    wrong = None if iters[0]["wrong"] is None else sum(i["wrong"] for i in iters)
    busbw = M.busbw_gbps(exp.collective, n, size, seconds)
    record = {
        "collective": exp.collective, "algorithm": exp.algorithm, "engine": exp.engine,
        # nccl-tests' count column: per rank where the buffer is n blocks
        "ranks": n, "size_bytes": size, "elements": count,
        **M.nccl_columns(exp, n, count),
        "iterations": len(iters), "time_s": seconds,
        "time_min_s": min(i["seconds"] for i in iters),
        "algbw_gbps": M.algbw_gbps(size, seconds), "busbw_gbps": busbw,
        "busbw_over_link": busbw / (rate / 8e3),
        "wrong": wrong,
        "bad_chunk_elements": None if wrong is None else sum(i["bad_chunk_elements"] for i in iters),
        "predicted_s": predicted,
        "measured_over_predicted": seconds / predicted if predicted else None,
        "latency": prober.summary(t0, t1),
        "links": {intf: dict(l) for intf, l in window["links"].items()},
        "ecmp_imbalance": window["ecmp_imbalance"],
        "cpu_busy_pct": window["cpu_busy_pct"], "ovs_core_pct": window["ovs_core_pct"],
        "_window": window,
        **({"machines": window["machines"]} if "machines" in window else {}),
    }
    for extra in ("frames_sent", "frames_lost", "retransmits", "scale_up_bytes", "pieces",
                  "reordered"):
        if extra in iters[0]:
            record[extra] = sum(i[extra] for i in iters)
    return record
