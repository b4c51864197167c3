"""A hybrid training step (``experiment.step.parallel``: tensor parallel
inside the servers, pipeline stages across them, data parallel over the
rest) on the lab's rank agents with real data, and the simulator's
prediction beside it; or the simulator alone (`--engine sim`).

The plan is sim/hybrid_step.py's. The prediction replays each wave of
concurrent collectives (every TP group of a stage for one layer, every
rank of a stage sending one micro-batch, every DP group of a stage) on
the fabric's graph, once per distinct shape, and walks the plan with
those times. The record has the shape of runs/training.py's, with the
layout and the communication per kind (TP, PP, DP) added.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Callable, Dict, List

from collectives import schedules
from collectives.datatypes import datatype
from collectives.registry import FLAT_RING
from sim import hybrid_step, training_step
from sim.simulator import Simulator
from runs.experiment import Experiment, job_of, piece_bytes_for
from runs.step_lanes import lanes
from runs.step_loop import run_steps
from runs.sweep import RankCosts

SUMMARY_KEYS = ("step_s", "compute_s", "comm_s", "exposed_s", "overlap_efficiency")
IN_FLIGHT = 1_000            # a rank's collectives all run as they are launched: no queue


def plan_of(exp: Experiment, model: RankCosts) -> hybrid_step.HybridPlan:
    layers = training_step.layers_of(exp.step)
    return hybrid_step.plan_hybrid(exp.step["parallel"], model.n, model.local, len(layers),
                                   layers[0].fwd_s, sum(l.params for l in layers),
                                   datatype(exp.datatype).size)


def predict(fabric, exp: Experiment, ranks: List[str], plan: hybrid_step.HybridPlan) -> tuple:
    """The simulator's step, each wave's collectives replayed together, and
    its timeline (`_lanes`)."""
    simulator = Simulator.on_fabric(fabric, ranks)
    piece = max(1, piece_bytes_for(exp, fabric.policy) // datatype(exp.datatype).size)
    shapes: Dict[tuple, float] = {}
    shape_of: Dict[tuple, tuple] = {}
    for c in plan.collectives:
        shape_of.setdefault(c["wave"], ())
        shape_of[c["wave"]] += ((c["collective"], c["count"], tuple(c["members"])),)
    for wave, shape in shape_of.items():
        if shape not in shapes:
            sched = schedules.chunked(hybrid_step.wave_schedule(plan, wave), piece)
            shapes[shape] = simulator.replay_seconds(sched, exp.channels)
    t = hybrid_step.timeline(plan, lambda wave: shapes[shape_of[wave]])
    per_kind = {k: sum(shapes[shape_of[c["wave"]]] for c in plan.collectives
                       if c["kind"] == k and c["members"][0] == 0) for k in ("tp", "pp", "dp")}
    return {"step_s": t["step_s"], "compute_s": t["compute_s"], "exposed_s": t["exposed_s"],
            "rank0_comm_by_kind_s": per_kind, "waves_replayed": len(shapes)}, _lanes(plan, t)


def _lanes(plan: hybrid_step.HybridPlan, t: dict) -> List[dict]:
    """The simulated step as the figure draws a measured one (runs/step_lanes.py):
    per rank its compute spans, and each collective from its launch there, its
    start when its last member launched it, to its finish."""
    events = [{"rank": s["rank"], "lane": "compute", "kind": s["kind"],
               "label": str(s["layer"]), "start": s["start"], "end": s["end"]}
              for s in t["compute"]]
    for c in plan.collectives:
        launched = t["launched"][c["id"]]
        start = max(launched.values())
        events += [{"rank": r, "lane": "comm", "kind": c["kind"], "label": "",
                    "launch": at, "start": start, "end": t["finish"][c["id"]]}
                   for r, at in launched.items()]
    return events


def description(exp: Experiment, plan: hybrid_step.HybridPlan) -> dict:
    par = exp.step["parallel"]
    return {"layers": plan.layers, "params": plan.gradient_bytes // plan.itemsize * plan.tp
            * plan.pp, "gradient_bytes": plan.gradient_bytes, "dtype": exp.datatype,
            "op": exp.op, "mode": "parallel", "overlap": True, "in_flight": IN_FLIGHT,
            "bucket_bytes": plan.gradient_bytes, "ranks": plan.ranks,
            "compute_s": plan.compute_s, "algorithm": FLAT_RING, "buckets": [],
            "parallel": dict(par), "collectives": len(plan.collectives)}


def merge(replies: List[dict], plan: hybrid_step.HybridPlan) -> dict:
    """One step from every rank's reply, times after the first rank's start."""
    t0, t1 = min(r["t0"] for r in replies), max(r["t1"] for r in replies)
    names = {c["id"]: c for c in plan.collectives}
    by_id: Dict[int, dict] = {}
    for r in replies:
        off = r["t0"] - t0
        for c in r["collectives"]:
            m = by_id.setdefault(c["id"], {**{k: names[c["id"]][k] for k in (
                "id", "name", "collective", "bytes", "kind")}, "bucket": names[c["id"]]["kind"],
                "launch": 1e9, "start": 1e9, "finish": 0.0, "wrong": 0,
                "bad_chunk_elements": 0})
            m["launch"] = min(m["launch"], off + c["launch"])
            m["start"] = min(m["start"], off + c["start"])
            m["finish"] = max(m["finish"], off + c["finish"])
            m["wrong"] += c["wrong"]
            m["bad_chunk_elements"] += c["bad_chunk_elements"]
    compute = [sum(s["end"] - s["start"] for s in r["compute"]) for r in replies]
    collectives = sorted(by_id.values(), key=lambda c: (c["launch"], c["id"]))
    step_s = t1 - t0
    comm = [training_step.union_seconds([(c["start"], c["finish"]) for c in r["collectives"]])
            for r in replies]
    exposed = max(0.0, step_s - max(compute))
    return {"step_s": step_s, "compute_s": max(compute), "comm_s": max(comm),
            "exposed_s": exposed,
            "overlap_efficiency": max(0.0, 1 - exposed / max(comm)) if max(comm) > 0 else 1.0,
            "wrong": sum(c["wrong"] for c in collectives),
            "bad_chunk_elements": sum(c["bad_chunk_elements"] for c in collectives),
            "pieces": sum(r["pieces"] for r in replies),
            "reordered": sum(r["reordered"] for r in replies),
            "collectives": collectives,
            "timeline": lanes(replies, t0, lambda cid: names[cid]["kind"], lambda cid: "")}


def run_parallel_step(lab, exp: Experiment, progress: Callable[[str], None]) -> dict:
    """Warm-up and timed steps on the rank agents, the prediction beside them."""
    from traffic.measure.monitor import host_summary
    fabric = lab.fabric
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    plan = plan_of(exp, RankCosts.of(fabric, ranks))
    progress("simulating the step")
    predicted, _ = predict(fabric, exp, ranks, plan)
    message = {"collectives": [{"id": c["id"], "collective": c["collective"],
                                "algorithm": c["algorithm"], "count": c["count"],
                                "piece": max(1, piece_bytes_for(exp, fabric.policy)
                                             // datatype(exp.datatype).size),
                                "members": c["members"], "root": c["root"]}
                               for c in plan.collectives],
               "tasks": {str(r): t for r, t in plan.tasks.items()},
               "initial": {str(r): i for r, i in plan.initial.items()}, "in_flight": IN_FLIGHT}
    job = job_of(replace(exp, collective="allreduce", algorithm=FLAT_RING),
                 plan.collectives[0]["count"], fabric.policy, 1)
    timed, window = run_steps(
        lab, exp, ranks, lambda engine: engine.prepare_parallel(message, job),
        60 + 20 * predicted["step_s"], plan.gradient_bytes / 1e9,
        lambda replies: merge(replies, plan), progress,
        f"setting up the step's {len(plan.collectives)} collectives")
    return record(fabric, exp, plan, ranks, timed, predicted, host_summary(window),
                  SUMMARY_KEYS)


def record(fabric, exp, plan, ranks, timed, predicted, host, keys) -> dict:
    mid = sorted(timed, key=lambda s: s["step_s"])[(len(timed) - 1) // 2]
    last = timed[-1]
    wrong = [s["wrong"] for s in timed]
    return {"experiment": asdict(exp), "ranks": ranks, "engine": exp.engine,
            "step": description(exp, plan),
            "runs": [{k: s[k] for k in (*keys, "wrong", "bad_chunk_elements", "pieces",
                                        "reordered") if k in s} for s in timed],
            "summary": {k: mid[k] for k in keys},
            "wrong": None if wrong[0] is None else sum(wrong),
            "collectives": last["collectives"], "timeline": last["timeline"],
            "predicted": {"parallel": predicted},
            "measured_over_predicted": mid["step_s"] / predicted["step_s"]
            if predicted["step_s"] else None,
            "link_rate_mbit": fabric.nic_rate_mbit, "host": host}


def simulate_parallel_step(fabric, exp: Experiment) -> dict:
    """The hybrid step in the simulator alone: its prediction is the result."""
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    plan = plan_of(exp, RankCosts.of(fabric, ranks))
    p, timeline = predict(fabric, exp, ranks, plan)
    step = {"step_s": p["step_s"], "compute_s": p["compute_s"], "comm_s": p["exposed_s"],
            "exposed_s": p["exposed_s"], "overlap_efficiency": 0.0, "wrong": None,
            "bad_chunk_elements": None, "collectives": [], "timeline": timeline}
    return record(fabric, exp, plan, ranks, [step], p, None, SUMMARY_KEYS)
