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

import math
from dataclasses import asdict
from typing import Callable, Dict

from collectives import metrics as M
from collectives import schedules as S
from traffic.engines import make_engine
from runs.experiment import Experiment

NAN = float("nan")


def simulate_experiment(fabric, exp: Experiment, seed: int = 0, hop_latency_s: float = 0.0,
                        progress: Callable[[str], None] = lambda msg: None) -> dict:
    """Simulate `exp` on `fabric` size by size; a run record as an emulated
    run's (docs/output.md), with `simulated` set."""
    from runs.sweep import Model            # the alpha-beta model's view of the ranks
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    model = Model.of(fabric, ranks)
    exp.check(model.n, model.local)
    engine = make_engine("sim", fabric, ranks)
    engine.network.seed, engine.hop_latency_s = seed, hop_latency_s
    hops = max(len(engine.network.path(ranks[0], r)) for r in ranks[1:])
    alpha = hops * hop_latency_s + max(l.delay_s for l in engine.network.links.values())
    runs, timeline = [], None
    sizes = M.sweep_sizes(exp.minbytes, exp.maxbytes, exp.stepfactor)
    try:
        for k, size in enumerate(sizes):
            progress(f"[{k + 1}/{len(sizes)}] simulating {exp.collective} {size} B")
            count = S.round_count(exp.collective, model.n, size // M.TYPE_SIZE)
            engine.prepare(exp.job(count, fabric.policy, model.local))
            out = engine.iterate(0, 0, timeline=k == len(sizes) - 1)
            runs.append(_record(fabric, exp, model, count, out, alpha))
            if "timeline" in out:
                timeline = {"size_bytes": count * M.TYPE_SIZE, "events": [
                    {**e, "phase": S.phase(exp.algorithm, e["step"], model.n, model.local)}
                    for e in out["timeline"]]}
    finally:
        engine.close()
    progress("done")
    return {"experiment": asdict(exp), "ranks": ranks, "gpus_per_server": model.local,
            "probe": [], "idle_latency": {"p50_us": NAN, "p99_us": NAN, "samples": 0},
            "alpha_s": alpha, "beta_s_per_byte": model.beta, "link_rate_mbit": model.rate,
            "runs": runs, "simulated": {"seed": seed, "hop_latency_s": hop_latency_s},
            "fidelity": {"trustworthy": True, "host_kept_up": True, "flagged_sizes": [],
                         "simulated": True},
            "uplink_tx_bytes": _uplinks(fabric, runs[-1]["links"] if runs else {}),
            "tiers": M.tier_report(fabric, {i: {"tx_bytes": sum(r["links"][i]["tx_bytes"]
                                                                for r in runs)}
                                            for i in (runs[0]["links"] if runs else {})}),
            "cross_traffic": None, "timeline": timeline}


def _record(fabric, exp: Experiment, model, count: int, out: dict, alpha: float) -> dict:
    n, size, seconds = model.n, count * M.TYPE_SIZE, out["seconds"]
    predicted = M.predict_seconds(exp.collective, exp.algorithm, n, count, alpha, model.beta,
                                  exp.root, model.local, model.beta_intra,
                                  model.nic_of.__getitem__)
    busbw = M.busbw_gbps(exp.collective, n, size, seconds)
    links = _links(fabric, out["link_bytes"], seconds)
    return {
        "collective": exp.collective, "algorithm": exp.algorithm, "engine": exp.engine,
        "ranks": n, "size_bytes": size, "elements": count,
        **M.nccl_columns(exp, n, count),
        "iterations": 1, "time_s": seconds, "time_min_s": seconds,
        "algbw_gbps": M.algbw_gbps(size, seconds), "busbw_gbps": busbw,
        "busbw_over_link": busbw / (model.rate / 8e3), "wrong": None, "bad_chunk_elements": None,
        "predicted_s": predicted,
        "measured_over_predicted": seconds / predicted if predicted else None,
        "latency": {"p50_us": NAN, "p99_us": NAN, "max_us": NAN, "samples": 0, "lost": 0},
        "links": links, "ecmp_imbalance": _imbalance(fabric, links),
        "cpu_busy_pct": NAN, "ovs_core_pct": NAN, "flags": [],
    }


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
    return {leaf: M.imbalance(v) for leaf, v in uplinks.items() if sum(v) > 0}


def _uplinks(fabric, links: Dict[str, dict]) -> dict:
    return {leaf.name: {l.a_intf: links.get(l.a_intf, {}).get("tx_bytes", 0)
                        for l in fabric.uplinks(leaf.name)} for leaf in fabric.leaves}


def sim_table(result: dict) -> str:
    """What the simulated fabric did per size: the figures an emulated run's
    fabric table gives where a simulation has them."""
    sim = result["simulated"]
    lines = [f"# Simulated fabric (flow-level, max-min fair sharing; ECMP seed {sim['seed']}, "
             f"{sim['hop_latency_s'] * 1e6:g} us per hop)",
             "#       size  busbw/link  sim/alpha-beta  busiest link  ECMP max/mean"]
    for r in result["runs"]:
        busiest = max((l["mean_util"] for l in r["links"].values()), default=0.0)
        imb = max(r["ecmp_imbalance"].values(), default=NAN)
        lines.append(f"{r['size_bytes']:12d}  {r['busbw_over_link']:10.2f}  "
                     f"{r['measured_over_predicted'] or NAN:14.2f}  {busiest:12.0%}  "
                     f"{'N/A' if math.isnan(imb) else format(imb, '13.2f'):>13}")
    lines.append("# Simulated, not measured: no TCP dynamics, no queueing beyond fair sharing, "
                 "no host CPU (docs/simulator.md)")
    return "\n".join(lines)
