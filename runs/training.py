"""A training step replayed and measured (`--step`, ``experiment.step``):
on the lab's rank agents, and in the flow-level simulator beside it or
alone (`--engine sim`).

Per step: its time (the first rank's start to the last rank's end: a
synchronous step ends when every rank has its gradients), the compute time,
the communication time (when at least one collective was running), the
exposed communication (step - compute: what the step waited for the
network), and the overlap efficiency (the share of the communication the
compute hid). Per collective of the last step: launch, start and finish,
bytes and #wrong. The simulator predicts the same step with overlap on and
off from each collective's simulated time alone (sim/training_step.py's fluid
model), and the lower bounds: max(compute, communication) with overlap,
their sum without.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, replace
from typing import Callable, Dict, List

from collectives import metrics
from collectives import registry
from collectives import schedules
from sim import training_step
from sim.simulator import Simulator
from traffic.measure.monitor import host_summary
from runs.experiment import Experiment, check_for_ranks, job_of, step_plan
from runs.step_lanes import lanes
from runs.step_loop import run_steps
from runs.parallel_step import SUMMARY_KEYS, run_parallel_step, simulate_parallel_step
from runs.sweep import RankCosts, resolved
from runs.trace_replay import run_trace, simulate_trace


def jobs_of(exp: Experiment, plan: training_step.Plan, model, policy: str) -> Dict[int, object]:
    """Collective id -> the Job of its bucket: its size in float32-sized
    units, rounded as nccl-tests rounds (n equal blocks for AllGather and
    ReduceScatter). With auto, each AllReduce bucket runs the schedule
    NCCL's choice falls on for its size (runs/sweep.py `resolved`) by the
    links' rates alone: a step's buckets are bandwidth-bound, and the lab's
    latency is measured only once a lab runs; the other collectives of a
    sharded step run by ring, as NCCL runs them."""
    out, n, local = {}, model.n, model.local
    largest = max(b.bytes for b in plan.buckets)      # pieces as a sweep up to it cuts them
    for c in plan.collectives:
        count = schedules.round_count(c["collective"], n, max(1, c["bytes"] // metrics.TYPE_SIZE))
        algorithm = exp.algorithm if c["collective"] == "allreduce" else registry.FLAT_RING
        if algorithm == registry.AUTO:
            algorithm = resolved(replace(exp, collective="allreduce"), model, count,
                                 0.0)[0].algorithm
        # the server layout for every algorithm laid out by whole servers
        # (without it rail-ring would run the flat ring, nccl-tree the plain tree)
        job = job_of(replace(exp, collective=c["collective"], algorithm=algorithm,
                             maxbytes=largest),
                     count, policy, local if algorithm in registry.BY_SERVER else 1)
        out[c["id"]] = job
    return out


def predict(fabric, exp: Experiment, ranks: List[str]) -> dict:
    """The simulator's step, overlap on and off, from each collective's
    simulated time alone on this fabric (one simulation per distinct size)."""
    plan = step_plan(exp)
    jobs = jobs_of(exp, plan, RankCosts.of(fabric, ranks), fabric.policy)
    simulator, alone = Simulator.on_fabric(fabric, ranks), {}
    for cid, job in jobs.items():
        key = (job.collective, job.count)
        if key not in alone:
            alone[key] = simulator.simulate(job).seconds
    seconds = {cid: alone[(job.collective, job.count)] for cid, job in jobs.items()}
    out = {}
    for overlap in (True, False):
        p = plan if plan.overlap == overlap else step_plan(replace(exp, step={
            **exp.step, "overlap": overlap}))
        t = training_step.timeline(p, lambda c: seconds[c["id"]])
        comm = sum(seconds.values()) if p.in_flight == 1 else t["comm_s"]
        low, high = training_step.bounds(p, comm)
        out["overlap_on" if overlap else "overlap_off"] = {
            **{k: t[k] for k in ("step_s", "compute_s", "comm_s", "exposed_s",
                                 "overlap_efficiency")},
            "lower_bound_s": low, "upper_bound_s": high, "collectives": t["collectives"],
            "compute": t["compute"]}
    return out


def step_description(exp: Experiment, plan: training_step.Plan, n: int) -> dict:
    return {"layers": len(plan.layers), "params": sum(l.params for l in plan.layers),
            "gradient_bytes": plan.gradient_bytes, "dtype": plan.dtype, "op": exp.op,
            "mode": plan.mode, "overlap": plan.overlap, "in_flight": plan.in_flight,
            "bucket_bytes": exp.step["bucket"], "ranks": n,
            "compute_s": plan.compute_s, "algorithm": exp.algorithm,
            "buckets": [{"index": b.index, "layers": list(b.layers), "bytes": b.bytes}
                        for b in plan.buckets]}


def merge_ranks(replies: List[dict], plan: training_step.Plan) -> dict:
    """One step from every rank's reply: times after the first rank's start."""
    t0 = min(r["t0"] for r in replies)
    t1 = max(r["t1"] for r in replies)
    names = {c["id"]: c for c in plan.collectives}
    collectives = []
    for cid in sorted(names):
        mine = [(r["t0"] - t0, c) for r in replies for c in r["collectives"] if c["id"] == cid]
        collectives.append({
            **{k: names[cid][k] for k in ("id", "name", "collective", "bytes", "bucket")},
            "launch": min(off + c["launch"] for off, c in mine),
            "start": min(off + c["start"] for off, c in mine),
            "finish": max(off + c["finish"] for off, c in mine),
            "wrong": sum(c["wrong"] for _, c in mine),
            "bad_chunk_elements": sum(c["bad_chunk_elements"] for _, c in mine)})
    per_rank = [training_step.summarise(plan, r["compute"], [
        {**c, "start": c["start"], "finish": c["finish"]} for c in r["collectives"]])
        for r in replies]
    step_s = t1 - t0
    compute_s = statistics.mean(p["compute_s"] for p in per_rank)
    comm_s = max(p["comm_s"] for p in per_rank)
    exposed = max(0.0, step_s - compute_s)
    return {"step_s": step_s, "compute_s": compute_s, "comm_s": comm_s, "exposed_s": exposed,
            "overlap_efficiency": max(0.0, 1 - exposed / comm_s) if comm_s > 0 else 1.0,
            "wrong": sum(c["wrong"] for c in collectives),
            "bad_chunk_elements": sum(c["bad_chunk_elements"] for c in collectives),
            "pieces": sum(r["pieces"] for r in replies),
            "reordered": sum(r["reordered"] for r in replies),
            "collectives": sorted(collectives, key=lambda c: (c["launch"], c["id"])),
            "timeline": lanes(replies, t0, lambda cid: names[cid]["collective"],
                              lambda cid: str(names[cid]["bucket"]))}


def run_step(lab, exp: Experiment, progress: Callable[[str], None] = lambda m: None) -> dict:
    """Warm-up and timed steps on the lab's rank agents, the simulator's
    prediction beside them, and the host's load while they ran."""
    if exp.step.get("trace"):
        return run_trace(lab, exp, progress)
    if exp.step.get("parallel"):
        return run_parallel_step(lab, exp, progress)
    fabric = lab.fabric
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    model = RankCosts.of(fabric, ranks)
    check_for_ranks(exp, model.n, model.local)
    plan = step_plan(exp)
    jobs = jobs_of(exp, plan, model, fabric.policy)
    progress("simulating the step")
    predicted = predict(fabric, exp, ranks)
    # buffers reset before the start: about 1 GB/s of copying, each rank's
    lead = plan.gradient_bytes * (2 if plan.mode == "sharded" else 1) / 1e9
    timed, window = run_steps(
        lab, exp, ranks, lambda engine: engine.prepare_step(plan, jobs, plan.in_flight),
        60 + 20 * predicted["overlap_off"]["step_s"], lead,
        lambda replies: merge_ranks(replies, plan), progress,
        "setting up the step's collectives")
    return result_record(fabric, exp, plan, ranks, timed, predicted, window)


def result_record(fabric, exp, plan, ranks, timed, predicted, window=None) -> dict:
    last = timed[-1]
    # the median step's own figures (so step = compute + exposed holds in them)
    mid = sorted(timed, key=lambda s: s["step_s"])[(len(timed) - 1) // 2]
    summary = {k: mid[k] for k in SUMMARY_KEYS}
    low = predicted["overlap_on" if plan.overlap else "overlap_off"]
    return {
        "experiment": asdict(exp), "ranks": ranks, "engine": exp.engine,
        "step": step_description(exp, plan, len(ranks)),
        "runs": [{k: s[k] for k in (*SUMMARY_KEYS, "wrong", "bad_chunk_elements", "pieces",
                                    "reordered") if k in s} for s in timed],
        "summary": summary,
        "wrong": sum(s["wrong"] or 0 for s in timed) if timed[0]["wrong"] is not None else None,
        "collectives": last["collectives"], "timeline": last["timeline"],
        "predicted": predicted, "measured_over_predicted": summary["step_s"] / low["step_s"]
        if low["step_s"] else None,
        "link_rate_mbit": fabric.nic_rate_mbit,
        "host": host_summary(window) if window else None}


def simulate_step(fabric, exp: Experiment) -> dict:
    """The step in the simulator alone (`--engine sim`): its prediction is
    the result."""
    if exp.step.get("trace"):
        return simulate_trace(fabric, exp)
    if exp.step.get("parallel"):
        return simulate_parallel_step(fabric, exp)
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    model = RankCosts.of(fabric, ranks)
    check_for_ranks(exp, model.n, model.local)
    plan = step_plan(exp)
    predicted = predict(fabric, exp, ranks)
    mine = predicted["overlap_on" if plan.overlap else "overlap_off"]
    step = {**{k: mine[k] for k in SUMMARY_KEYS}, "wrong": None, "bad_chunk_elements": None,
            "collectives": mine["collectives"], "timeline": [
                {"rank": r, "lane": "compute", "kind": s["kind"], "label": str(s["layer"]),
                 "start": s["start"], "end": s["end"]} for r in range(model.n)
                for s in mine["compute"]] + [
                {"rank": r, "lane": "comm", "kind": c["collective"], "label": str(c["bucket"]),
                 "launch": c["launch"], "start": c["start"], "end": c["finish"]}
                for r in range(model.n) for c in mine["collectives"]]}
    return result_record(fabric, exp, plan, ranks, [step], predicted)
