"""One collective sweep, the way nccl-tests runs one: per message size, the
collective replayed (warm-up, then timed iterations) and its time, algbw,
busbw, wrong elements and the alpha-beta prediction, whatever replays it.

The loop is the same for every engine; what differs is a backend (ASTRA-sim
keeps its system layer apart from its network backends the same way):

- `LabBackend` (runs/measured.py): a live lab. Latency probes against the
  idle fabric first, then per size the link counters and queues of its time
  window, the fidelity flags, the simulation beside it, and at the end the
  verdict, cross traffic, scheduled failures and the routing;
- `SimBackend` (runs/simulated.py): the flow-level simulator, no network.

A backend offers the engine, the iterations it runs, and the hooks the
`Backend` protocol declares, every one the loop calls: `begin` (the latency
alpha), `tune` (what -a auto runs where the backend prices it itself),
`price` (the alpha-beta prediction and the schedule of one size), `measure`
(what it knows of one size besides its time) and `finish` (the run's own
parts of the record, by RunRecord's field names); `close` always runs. A
backend with no use for a hook gives the plain answer (`tune`: None,
`price`: `price_schedule`'s). The loop makes the record (runs/record.py):
its own parts, then the backend's.

    record = sweep(backend, exp, progress)      # a RunRecord (runs/record.py)
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from collectives import metrics, registry
from sim import alphabeta, nccl
from sim.nccl import endhosts, tuner
from collectives import schedules
from runs.experiment import Experiment, check_for_ranks, job_of
from runs.record import RunRecord, SizeRecord
from sim.simulator import FULL_RANKS
from topologies.hardware import Server


# a schedule of more operations than this gets no timeline (the 256-GPU SuperPOD
# unit's ring has 261,120; at 512 GPUs a million bars took 0.9 GB to draw)
MAX_TIMELINE_OPERATIONS = 300_000


@dataclass
class RankCosts:
    """What the alpha-beta prediction and the traffic split need of the ranks."""
    n: int
    local: int                            # GPUs per server when ranks are whole servers
    server_of: Dict[int, str]
    nic_of: Dict[int, tuple]
    beta: float                           # seconds per payload byte on a NIC link
    beta_intra: Optional[float]           # the same on an NVLink-class link
    rate: float                           # the NIC link's Mbit/s
    server: Optional[Server] = None       # the server as sold (server.model), if named

    @classmethod
    def of(cls, fabric, ranks: List[str]) -> "RankCosts":
        hosts = [fabric.endpoint(s) for s in ranks]
        intra = fabric.link_classes.get("intra_node")
        rate_intra, rate = intra and intra.rate_mbit, fabric.nic_rate_mbit
        return cls(len(ranks), gpus_per_rank_server(fabric, ranks),
                   {r: h.server for r, h in enumerate(hosts)},
                   {r: (h.leaf, h.port) for r, h in enumerate(hosts)},
                   metrics.beta_for_rate(rate, fabric.mtu),
                   metrics.beta_for_rate(rate_intra, fabric.mtu) if rate_intra else None, rate,
                   fabric.server_model)


@dataclass(frozen=True)
class Size:
    """One size of a sweep, as the loop hands it to a backend's `measure`."""
    count: int                            # float32-sized elements in the buffer
    schedule: dict                        # collectives/schedules.py's, without data
    steps: int                            # dependent steps of its schedule
    predicted_s: float                    # the alpha-beta prediction
    iterations: Tuple[dict, ...]          # the timed ones, as the engine reported them
    warmup: Tuple[dict, ...] = ()         # the warm-up ones before them


class Backend(Protocol):
    """What the sweep loop needs of whatever replays the collective."""
    fabric: object
    engine: object                        # traffic/engines: prepare, iterate, close

    def begin(self, exp: Experiment, model: RankCosts, ranks: List[str],
              progress: Callable[[str], None]) -> float:
        """Ready to replay; the one-way latency alpha of the model."""

    def tune(self, exp: Experiment, model: RankCosts, count: int) -> Optional[dict]:
        """With -a auto: what the backend's own model of NCCL runs for this
        size (the record's `auto`), or None where it prices nothing itself
        (then the loop's `resolved` picks the lab's schedule)."""

    def price(self, exp: Experiment, model: RankCosts, count: int, alpha: float) -> tuple:
        """(the alpha-beta prediction, the schedule without data, its
        dependent steps) of one size: `price_schedule`'s, unless the backend
        has a cheaper way."""

    def iterations(self, exp: Experiment) -> Tuple[int, int]:
        """(warm-up, timed) iterations per size."""

    def measure(self, exp: Experiment, model: RankCosts, size: Size, record: dict) -> dict:
        """What it knows of one size besides the nccl-tests columns in `record`."""

    def finish(self, exp: Experiment, model: RankCosts, runs: List[SizeRecord]) -> dict:
        """Its own parts of the run record: RunRecord's fields by name."""

    def close(self) -> None:
        """Stops whatever it started; always called."""


def sweep(backend: Backend, exp: Experiment,
          progress: Callable[[str], None] = lambda msg: None) -> RunRecord:
    """Replay `exp` size by size on `backend`; the run record (docs/output.md)."""
    fabric = backend.fabric
    ranks = exp.ranks or [h.name for h in fabric.endpoints]
    model = RankCosts.of(fabric, ranks)
    # experiment_from checked what a user asked for; this holds callers that
    # build an Experiment themselves (benchmarks) to the same contract, on the
    # ranks actually chosen, before anything starts
    check_for_ranks(exp, model.n, model.local)
    runs: List[SizeRecord] = []
    timeline = None
    try:
        loop = _Loop(backend, exp, model, backend.begin(exp, model, ranks, progress), progress)
        sizes = metrics.sweep_sizes(exp.minbytes, exp.maxbytes, exp.stepfactor)
        loop.tally[1] = sum(backend.iterations(exp)) * sum(sizes)
        for k, size in enumerate(sizes):
            one, timeline_ = _one_size(loop, size, f"[{k + 1}/{len(sizes)}] {exp.collective}",
                                       k == len(sizes) - 1)
            runs.append(one)
            timeline = timeline_ or timeline
            _finished(progress, f"[{k + 1}/{len(sizes)}] {exp.collective}", one)
    finally:
        backend.close()
    common = {"experiment": asdict(exp), "ranks": ranks, "gpus_per_server": model.local,
              "alpha_s": loop.alpha, "beta_s_per_byte": model.beta,
              "link_rate_mbit": model.rate, "runs": runs, "timeline": timeline}
    record = RunRecord.from_parts(common, backend.finish(exp, model, runs))
    progress("done")
    return record


@dataclass(frozen=True)
class _Loop:
    """What every size of one sweep shares."""
    backend: Backend
    exp: Experiment
    model: RankCosts
    alpha: float                          # the model's latency, from the backend's `begin`
    progress: Callable[[str], None]
    # bytes of the iterations done, and of all: how far the sweep is, for a
    # progress display's time left (report/progress.py); sizes weigh as their time
    tally: list = field(default_factory=lambda: [0, 0])


def _one_size(loop: _Loop, size: int, label: str, last_size: bool) -> tuple:
    """Prepare, run warm-up and timed iterations, and make the size's record."""
    backend, model, progress = loop.backend, loop.model, loop.progress
    n, engine = model.n, backend.engine
    count = schedules.round_count(loop.exp.collective, n, size // metrics.TYPE_SIZE)
    tuned = backend.tune(loop.exp, model, count) if loop.exp.algorithm == registry.AUTO else None
    exp, tuned = (loop.exp, tuned) if tuned else resolved(loop.exp, model, count, loop.alpha)
    loop = replace(loop, exp=exp)
    predicted, sched, steps = backend.price(exp, model, count, loop.alpha)
    label = f"{label} {count * metrics.TYPE_SIZE} B"
    progress(f"{label}: setting up")
    engine.prepare(job_of(exp, count, backend.fabric.policy, model.local))
    warmup, timed = backend.iterations(exp)
    iters = []
    # the step timeline of the very last iteration, where the engine records one and it
    # can be drawn: past MAX_TIMELINE_OPERATIONS a figure of them reads as nothing
    record_timeline = last_size and _operations(sched, steps, n) <= MAX_TIMELINE_OPERATIONS
    for i in range(warmup + timed):
        progress(f"{label}: iteration {i + 1}/{warmup + timed}")
        iters.append(engine.iterate(i, 60 + 20 * predicted,
                                    timeline=record_timeline and i == warmup + timed - 1))
        _advance(loop, size)
    timeline = None
    if "timeline" in iters[-1]:
        timeline = {"size_bytes": count * metrics.TYPE_SIZE, "events": [
            {**e, "phase": schedules.phase(exp.algorithm, e["step"], n, model.local)}
            for e in iters[-1].pop("timeline")]}
    timed_iters = tuple(iters[warmup:])
    record = size_record(exp, model, count, timed_iters, predicted)
    if tuned:
        record["auto"] = tuned
    record.update(backend.measure(exp, model, Size(count, sched, steps, predicted, timed_iters,
                                                 tuple(iters[:warmup])), record))
    return record, timeline


def _finished(progress, label: str, one: SizeRecord) -> None:
    """One size done: tell a progress display that says so (a line a size
    on a pipe, report/progress.py) what it came to, and the size's record."""
    finished = getattr(progress, "finished", None)
    if finished is not None:
        finished(f"{label} {one['size_bytes']} B done: {one['time_s'] * 1e6:.0f} us, busbw "
                 f"{one['busbw_gbps']:.4g} GB/s = {one['busbw_over_link']:.2f} of the link", one)


def _advance(loop: _Loop, size: int) -> None:
    """One iteration of `size` done: tell a progress display that weighs."""
    loop.tally[0] += size
    done = getattr(loop.progress, "done", None)
    if done is not None and loop.tally[1]:
        done(loop.tally[0] / loop.tally[1])


def resolved(exp: Experiment, model: RankCosts, count: int, alpha: float) -> tuple:
    """(`exp` with the algorithm this size runs, what -a auto weighed): with
    auto, NCCL's Ring, Tree or PAT as the lab's schedules, whichever the
    model's costs price quicker (sim/nccl/endhosts.py); else `exp` as it is,
    None.
    Beyond what the simulator replays event by event, the candidates'
    schedules are too large to price: NCCL's Ring there, as the step
    shortcut takes it (hierarchical on servers of several GPUs: one ring per
    rail between servers, as NCCL's rail-matched channels run)."""
    if exp.algorithm != registry.AUTO:
        return exp, None
    if model.n > FULL_RANKS and exp.collective == "allreduce":
        ring = registry.SERVER_RINGS if model.local > 1 else registry.FLAT_RING
        return replace(exp, algorithm=ring), {"nccl": tuner.RING, "predicted_s": {}}
    costs = alphabeta.Costs(alpha, model.beta, model.beta_intra, model.nic_of.__getitem__)
    with schedules.timing_only():
        choice = endhosts.choose(exp.collective, model.n, count, costs, model.local, exp.root,
                                 exp.nccl_algo)
    tuned = {"nccl": choice.nccl, "predicted_s": dict(choice.table)}
    if model.server is not None and exp.collective in tuner.COLLECTIVES:
        tuned["nccl_model"] = nccl_on_server(exp, model, count)
    return replace(exp, algorithm=choice.algorithm), tuned


def nccl_on_server(exp: Experiment, model: RankCosts, count: int) -> str:
    """What NCCL itself would run for this size on the servers as sold
    (server.model) at these links' rates, said "simulated only" where a
    switch reduces (NVLS, CollNet): no end host can replay that."""
    local = model.local if model.n % model.local == 0 else 1
    e = nccl.predict(nccl.cluster(model.server, model.n // local, local), exp.collective,
                     count * metrics.TYPE_SIZE, exp.nccl_algo, exp.nccl_proto).chosen
    return f"{model.server.name}: {e.name}" + (", simulated only" if e.algorithm in
                                              nccl.IN_SWITCH else "")


def _operations(sched, steps: int, n: int) -> int:
    """The schedule's operations; where the backend priced it without one
    (the simulator), a send and a receive a rank and step."""
    return sum(len(ops) for ops in sched.values()) if sched else 2 * steps * n


def price_schedule(exp: Experiment, model: RankCosts, count: int, alpha: float) -> tuple:
    """(the alpha-beta prediction, the schedule without data, its dependent
    steps) of one size: the schedule built once (at 512 ranks a ring's takes
    seconds), with no contributors (the prediction needs none)."""
    sched = schedules.build(exp.collective, exp.algorithm, model.n, count,
                            schedules.RankLayout(exp.root, local=model.local), data=False)
    cost = alphabeta.schedule_cost(sched, exp.algorithm)
    predicted = alphabeta.predict_schedule(sched, cost,
                                           alphabeta.Costs(alpha, model.beta, model.beta_intra,
                                                           model.nic_of.__getitem__),
                                           model.local)
    return predicted, sched, cost["steps"]


def size_record(exp: Experiment, model: RankCosts, count: int, iters,
                predicted: float) -> SizeRecord:
    """The columns every size has, whatever ran it: nccl-tests' (size, count,
    type, redop, root, time, algbw, busbw, #wrong) and the alpha-beta
    prediction, from the timed iterations."""
    n, size = model.n, count * metrics.TYPE_SIZE
    seconds = statistics.mean(i["seconds"] for i in iters)
    wrong = None if iters[0]["wrong"] is None else sum(i["wrong"] for i in iters)
    busbw = metrics.busbw_gbps(exp.collective, n, size, seconds)
    return {
        "collective": exp.collective, "algorithm": exp.algorithm, "engine": exp.engine,
        # nccl-tests' count column: per rank where the buffer is n blocks
        "ranks": n, "size_bytes": size, "elements": count,
        **metrics.nccl_columns(exp, n, count),
        "iterations": len(iters), "time_s": seconds,
        "time_min_s": min(i["seconds"] for i in iters),
        "times_s": [i["seconds"] for i in iters],
        "algbw_gbps": metrics.algbw_gbps(size, seconds), "busbw_gbps": busbw,
        "busbw_over_link": busbw / (model.rate / 8e3),
        "wrong": wrong,
        "bad_chunk_elements": None if wrong is None else sum(i["bad_chunk_elements"]
                                                             for i in iters),
        "predicted_s": predicted,
        "measured_over_predicted": seconds / predicted if predicted else None,
    }


def gpus_per_rank_server(fabric, ranks) -> int:
    """GPUs per server when the ranks are whole multi-GPU servers in order
    (what the hierarchical algorithm groups by); 1 otherwise."""
    local = fabric.gpus_per_server
    if local > 1 and len(ranks) % local == 0 and all(
            len({fabric.endpoint(s).server for s in ranks[i:i + local]}) == 1
            for i in range(0, len(ranks), local)):
        return local
    return 1
