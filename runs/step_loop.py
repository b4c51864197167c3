"""The one loop a training step runs on a lab, whichever step it is (a
data-parallel step, runs/training.py; a hybrid TP/PP/DP step,
runs/parallel_step.py): the host monitored, the engine made and prepared,
then warm-up and timed steps, each merged from the ranks' replies; the
engine closed and the monitor stopped whatever happens."""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

from traffic.engines import make_engine


def run_steps(lab, exp, ranks: Sequence[str], prepare: Callable, budget_s: float, lead_s: float,
              merge: Callable[[list], dict], progress: Callable[[str], None],
              setting_up: str) -> Tuple[List[dict], dict]:
    """(the timed steps, the monitor's window over all of them): `prepare(engine)`
    once, then each step `merge(engine.step(i, budget_s, lead_s))`; `lead_s`
    is the time the ranks take to reset their buffers before the start."""
    from traffic.measure.monitor import Monitor
    monitor = Monitor(lab.fabric, source=lab.counters).start()
    engine, steps = make_engine(exp.engine, lab.fabric, ranks, lab), []
    try:
        progress(setting_up)
        prepare(engine)
        for i in range(exp.warmup + exp.iters):
            progress(f"step {i + 1}/{exp.warmup + exp.iters}")
            steps.append(merge(engine.step(i, budget_s, lead_s)))
    finally:
        engine.close()
        monitor.stop()
    window = monitor.window(monitor.samples[0]["t"], monitor.samples[-1]["t"])
    return steps[exp.warmup:], window
