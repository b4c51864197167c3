"""A recorded job's iteration replayed on a fabric (``experiment.step.trace``,
`--trace`): in the simulator, or on the lab's rank agents with real data
beside the simulator's prediction. The program is sim/trace_step.py's; the
trace is read by traces/ (docs/traces.md).

The trace's ranks are placed on the fabric's GPUs in rank order, server by
server: `ranks_per_server` of them on each (default: every GPU of a
server), or where a rank map file puts them ({rank: server}). `replicas`
repeats the job over more data-parallel replicas (sim/trace_step.py).

The record has the shape of a training step's (runs/training.py), with the
trace's own figures beside the replay's: its measured iteration, the same
program walked with its measured operation times (`reproduced_s`: what the
replay's reading of the trace gives back), the exposed communication per
process group and kind, and the critical path.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable, Dict, List

from collectives.datatypes import datatype
from collectives.registry import FLAT_RING
from sim import trace_step
from sim.simulator import Simulator
from runs.experiment import Experiment, job_of, piece_bytes_for
from runs.parallel_step import merge
from runs.step_loop import run_steps
from toolkit.yaml_loader import load_yaml, read_text
from traces.reading import read_once
from traces.trace_model import Trace, TraceError

SUMMARY_KEYS = ("step_s", "compute_s", "comm_s", "exposed_s", "overlap_efficiency")
IN_FLIGHT = 1_000              # a communicator's order is the program's (`after`), not a queue
MAX_LAB_TRACE_COLLECTIVES = 2_000


def trace_of(exp: Experiment) -> Trace:
    spec = exp.step["trace"]
    return read_once(spec["path"], spec.get("iteration"))


def placement(fabric, spec: dict, world: int) -> List[str]:
    """The endpoint of each of the `world` ranks (the trace's, times its
    replicas), in rank order: ValueError with one sentence where the fabric
    cannot hold them as asked."""
    servers: Dict[str, list] = {}
    for e in fabric.endpoints:
        servers.setdefault(e.server, []).append(e.name)
    per = spec.get("ranks_per_server") or fabric.gpus_per_server
    if per > fabric.gpus_per_server:
        raise ValueError(f"step.trace.ranks_per_server: {per} ranks a server, and "
                         f"{fabric.name}'s servers have {fabric.gpus_per_server} GPUs")
    if spec.get("rank_map"):
        return _mapped(servers, spec["rank_map"], world)
    slots = [gpus[i] for gpus in servers.values() for i in range(per)]
    if world > len(slots):
        raise ValueError(f"step.trace: the job's {world} ranks need {-(-world // per)} servers "
                         f"of {per} rank{'s' if per > 1 else ''} each, and {fabric.name} has "
                         f"{len(servers)}: a larger "
                         "fabric, more ranks a server or fewer replicas")
    return slots[:world]


def _mapped(servers: Dict[str, list], path: str, world: int) -> List[str]:
    """The rank map file: {rank: server}, every rank once, each on its
    server's next free GPU."""
    if not Path(path).is_file():
        raise ValueError(f"step.trace.rank_map: no such file {path}")
    try:
        where = load_yaml(read_text(Path(path)), path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"step.trace.rank_map: cannot read {path} ({exc})") from None
    if not isinstance(where, dict):
        raise ValueError(f"{path}: expected a mapping of every rank 0 to {world - 1} to a "
                         f"server name, got {type(where).__name__}")
    odd = next((k for k in where if isinstance(k, bool) or not isinstance(k, int)), None)
    if odd is not None:
        raise ValueError(f"{path}: {odd!r} is not a rank: expected whole numbers 0 to "
                         f"{world - 1} as keys")
    if sorted(where) != list(range(world)):
        missing = sorted(set(range(world)) - set(where)) or sorted(set(where) - set(range(world)))
        raise ValueError(f"{path}: expected every rank 0 to {world - 1} once; rank "
                         f"{missing[0]} is {'missing' if missing[0] not in where else 'not one'}")
    free = {s: list(g) for s, g in servers.items()}
    out = []
    for rank in range(world):
        server = str(where[rank])
        if server not in free:
            raise ValueError(f"{path}: rank {rank}: no server {server!r} in this fabric; "
                             f"expected one of {', '.join(list(servers)[:6])}")
        if not free[server]:
            raise ValueError(f"{path}: rank {rank}: server {server} has no GPU left "
                             f"({len(servers[server])} GPUs)")
        out.append(free[server].pop(0))
    return out


def check(fabric, exp: Experiment) -> None:
    """The trace read and its ranks placed on `fabric`, as a run will: a
    ValueError (TraceError) with one sentence where either cannot be."""
    p = program(exp)
    placement(fabric, exp.step["trace"], p.world)
    trace_step.measured_times(p)             # a program that cannot finish: ProgramError


def program(exp: Experiment) -> trace_step.TraceProgram:
    trace = trace_of(exp)
    return trace_step.program_of(trace, exp.step["trace"].get("replicas", 1),
                                 datatype(exp.datatype).size)


def predict(fabric, exp: Experiment, p: trace_step.TraceProgram, ranks: List[str]) -> dict:
    """The simulator's iteration on this fabric beside the trace's own."""
    trace = trace_of(exp)
    piece = max(1, piece_bytes_for(exp, fabric.policy) // datatype(exp.datatype).size)
    seconds = trace_step.fabric_seconds(p, Simulator.on_fabric(fabric, ranks), piece,
                                        exp.channels)
    on_fabric = trace_step.times(p, lambda c: seconds[c["id"]])
    measured = trace_step.measured_times(p)
    return {"step_s": on_fabric.step_s, "compute_s": on_fabric.compute_s,
            "exposed_s": on_fabric.step_s - on_fabric.compute_s,
            "exposed_by_kind_s": on_fabric.exposed_by_kind,
            "critical_path_s": on_fabric.critical, "seconds": seconds,
            "trace": {"iteration_s": trace.iteration_s,
                      "iteration_range_s": list(trace.iteration_range_s),
                      "reproduced_s": measured.step_s,
                      "exposed_by_kind_s": measured.exposed_by_kind,
                      "critical_path_s": measured.critical},
            "walk": on_fabric.walk}


def description(exp: Experiment, trace: Trace, p: trace_step.TraceProgram) -> dict:
    spec = exp.step["trace"]
    kinds: Dict[str, int] = {}
    for label in p.label.values():
        kinds[label] = kinds.get(label, 0) + 1
    return {"mode": "trace", "path": spec["path"], "format": trace.format,
            "iteration": trace.iteration, "world": trace.world,
            "replicas": spec.get("replicas", 1), "ranks": p.world,
            "collectives": len(p.collectives), "by_kind": kinds,
            "groups": {g.name: {"ranks": list(g.ranks), "desc": g.desc}
                       for g in trace.groups.values()},
            "dtype": datatype(exp.datatype).name,
            "compute_s": max(trace_step.compute_seconds(rt) for rt in trace.ranks.values())}


def _lanes(p: trace_step.TraceProgram, w) -> List[dict]:
    events = [{"rank": s["rank"], "lane": "compute", "kind": "compute", "label": "",
               "start": s["start"], "end": s["end"]} for s in w.spans]
    for c in p.collectives:
        events += [{"rank": r, "lane": "comm", "kind": c["kind"], "label": "",
                    "launch": at, "start": w.start[c["id"]], "end": w.finish[c["id"]]}
                   for r, at in w.launches[c["id"]].items()]
    return events


def _collectives(p: trace_step.TraceProgram, w) -> List[dict]:
    return sorted(({"id": c["id"], "name": c["name"], "bucket": c["kind"],
                    "collective": c["collective"], "bytes": c["bytes"],
                    "launch": w.launch[c["id"]], "start": w.start[c["id"]],
                    "finish": w.finish[c["id"]], "wrong": None, "bad_chunk_elements": None}
                   for c in p.collectives), key=lambda c: (c["launch"], c["id"]))


def simulate_trace(fabric, exp: Experiment) -> dict:
    """The trace's iteration in the simulator alone: its prediction is the result."""
    p = program(exp)
    ranks = placement(fabric, exp.step["trace"], p.world)
    predicted = predict(fabric, exp, p, ranks)
    w = predicted.pop("walk")
    comm = max((sum(w.finish[c] - w.start[c] for c in w.launches if r in w.launches[c])
                for r in p.tasks), default=0.0)
    step = {"step_s": predicted["step_s"], "compute_s": predicted["compute_s"],
            "comm_s": comm, "exposed_s": predicted["exposed_s"],
            "overlap_efficiency": max(0.0, 1 - predicted["exposed_s"] / comm) if comm else 1.0,
            "wrong": None, "bad_chunk_elements": None,
            "collectives": _collectives(p, w), "timeline": _lanes(p, w)}
    return record(fabric, exp, p, ranks, [step], predicted, None)


def run_trace(lab, exp: Experiment, progress: Callable[[str], None]) -> dict:
    """Warm-up and timed iterations on the rank agents, every collective
    with real data over its group, the prediction beside them."""
    from traffic.measure.monitor import host_summary
    fabric = lab.fabric
    p = program(exp)
    if len(p.collectives) > MAX_LAB_TRACE_COLLECTIVES:
        raise TraceError(f"{exp.step['trace']['path']}: {len(p.collectives):,} operations in "
                         f"an iteration; a lab replays at most {MAX_LAB_TRACE_COLLECTIVES:,} "
                         "(--engine sim takes any number)")
    ranks = placement(fabric, exp.step["trace"], p.world)
    progress("simulating the iteration")
    predicted = predict(fabric, exp, p, ranks)
    predicted.pop("walk")
    piece = max(1, piece_bytes_for(exp, fabric.policy) // datatype(exp.datatype).size)
    message = {"collectives": [{"id": c["id"], "collective": c["collective"],
                                "algorithm": c["algorithm"], "count": c["count"],
                                "piece": piece, "members": c["members"], "root": c["root"],
                                "after": c["after"]} for c in p.collectives],
               "tasks": {str(r): [{k: t[k] for k in ("seconds", "needs", "releases", "kind",
                                                     "layer")} for t in ts]
                         for r, ts in p.tasks.items()},
               "initial": {str(r): i for r, i in p.initial.items()}, "in_flight": IN_FLIGHT}
    job = job_of(replace(exp, collective="allreduce", algorithm=FLAT_RING),
                 max(c["count"] for c in p.collectives), fabric.policy, 1)
    timed, window = run_steps(
        lab, exp, ranks, lambda engine: engine.prepare_parallel(message, job),
        60 + 20 * predicted["step_s"], sum(c["bytes"] for c in p.collectives) / 1e9 / p.world,
        lambda replies: merge(replies, p), progress,
        f"setting up the iteration's {len(p.collectives)} collectives")
    return record(fabric, exp, p, ranks, timed, predicted, host_summary(window))


def record(fabric, exp, p, ranks, timed, predicted, host) -> dict:
    trace = trace_of(exp)
    mid = sorted(timed, key=lambda s: s["step_s"])[(len(timed) - 1) // 2]
    wrong = [s["wrong"] for s in timed]
    return {"experiment": asdict(exp), "ranks": ranks, "engine": exp.engine,
            "step": description(exp, trace, p),
            "runs": [{k: s[k] for k in (*SUMMARY_KEYS, "wrong", "bad_chunk_elements", "pieces",
                                        "reordered") if k in s} for s in timed],
            "summary": {k: mid[k] for k in SUMMARY_KEYS},
            "wrong": None if wrong[0] is None else sum(wrong),
            "collectives": timed[-1]["collectives"], "timeline": timed[-1]["timeline"],
            "predicted": {"trace": {k: v for k, v in predicted.items() if k != "seconds"}},
            "measured_over_predicted": mid["step_s"] / predicted["step_s"]
            if predicted["step_s"] else None,
            "link_rate_mbit": fabric.nic_rate_mbit, "host": host}
