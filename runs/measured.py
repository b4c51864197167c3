"""The sweep's backend on a live lab: the engine replays each size, and
parts alongside it (runs/lab_parts.py) measure what a fabric engineer
measures around each size, the way nccl-tests would not: latency probes
under load against the idle fabric, per-link bytes, peak utilisation, queue
peaks and drops, ECMP imbalance per leaf, the CPU, the simulation beside
each size, and whether the host kept up (the fidelity verdict). Cross
traffic and scheduled link failures are parts too, when asked for.

The engine is asked for by name (collectives/registry.py) and driven through
its interface (traffic/engines): nothing here branches on which one it is.

    result = run_experiment(lab, exp, results_dir)
    result = run_experiment(lab, exp, results_dir, parts=[Links()])   # only the links
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional

from collectives import metrics
from policies import policy
from runs.experiment import Experiment
from runs.lab_parts import LabRun, Part, check_parts, standard_parts
from runs.record import RunRecord
from runs.sweep import RankCosts, Size, price_schedule, sweep
from traffic.engines import make_engine
from traffic.measure.fidelity import size_flags

# figures some engines count per iteration (their EXTRAS), summed over a size
ITERATION_EXTRAS = ("frames_sent", "frames_lost", "retransmits", "scale_up_bytes", "pieces",
                    "reordered", "unsettled")


def run_experiment(lab, exp: Experiment, results: Path,
                   progress: Callable[[str], None] = lambda msg: None,
                   parts: Optional[List[Part]] = None) -> RunRecord:
    """Replay `exp` on `lab` size by size; the run record (see docs/output.md).
    `parts` run alongside (runs/lab_parts.py; by default `standard_parts`),
    and write their files (the monitor's samples, the probes) to `results`."""
    return sweep(LabBackend(lab, results, parts), exp, progress)


class LabBackend:
    """A live lab: the engine, and the parts alongside it, each started in
    `begin`, stopped in `close`."""

    def __init__(self, lab, results: Path, parts: Optional[List[Part]] = None):
        self.lab, self.fabric, self.results = lab, lab.fabric, results
        self.parts = parts
        if parts is not None:
            check_parts(parts)
        self.engine, self.run, self.started = None, None, []

    def begin(self, exp: Experiment, model: RankCosts, ranks: List[str], progress) -> float:
        if self.parts is None:
            self.parts = standard_parts(exp)
        self.run = LabRun(self.lab, self.results, exp, model, ranks,
                          exp.probe or [ranks[0], ranks[-1]])
        for part in self.parts:
            self.started.append(part)
            part.begin(self.run, progress)
        self.engine = make_engine(exp.engine, self.fabric, ranks, self.lab)
        for part in self.parts:
            part.ready()
        return self.run.alpha

    def tune(self, exp: Experiment, model: RankCosts, count: int) -> None:
        """A lab runs the schedule -a auto resolves to (runs/sweep.py
        `resolved`): it prices nothing itself."""
        return None

    def price(self, exp: Experiment, model: RankCosts, count: int, alpha: float) -> tuple:
        """The schedule the engine replays, built once to price it."""
        return price_schedule(exp, model, count, alpha)

    def iterations(self, exp: Experiment):
        return exp.warmup, exp.iters

    def measure(self, exp: Experiment, model: RankCosts, size: Size, record: dict) -> dict:
        """What the engine counted, the size's flags and where its bytes
        were meant to go; then what each part saw of its time window."""
        iters = size.iterations
        self.run.log.extend({"size_bytes": record["size_bytes"], "iteration": i,
                             "t0": it["t0"], "t1": it["t1"], "seconds": it["seconds"]}
                            for i, it in enumerate(size.warmup + iters))
        out = {k: sum(i[k] for i in iters) for k in ITERATION_EXTRAS if k in iters[0]}
        out.update(size_flags(record["busbw_over_link"], size.steps,
                              size.predicted_s - self.run.alpha * size.steps, model.rate,
                              self.fabric.mtu, model.local))
        split = metrics.traffic_split(size.schedule, model.server_of.__getitem__)
        out["payload_bytes"] = {k: v * exp.iters for k, v in split.items()}
        for part in self.parts:
            part.measure(size, record, out)
        return out

    def finish(self, exp: Experiment, model: RankCosts, runs: List[dict]) -> dict:
        # a lab run says when it had no cross traffic and no failures (null)
        out = {"cross_traffic": None, "failures": None, "routing": self._routing(runs)}
        for part in self.parts:
            out.update(part.finish(runs))
        return out

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
        """The engine stops, then the parts that began, last first (links
        still down come back)."""
        try:
            if self.engine is not None:
                self.engine.close()
        finally:
            errors = []
            while self.started:
                try:
                    self.started.pop().close()
                except Exception as exc:      # noqa: BLE001 - the others still stop
                    errors.append(exc)
            if errors:
                raise errors[0]
