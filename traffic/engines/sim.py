"""The flow-level simulator as an engine: the schedule replayed on the fabric
graph (sim/simulator.py), no network built, no root needed. Every iteration
of a size gives the same time: the simulation is deterministic for its seed.

The engine only adapts the simulator to the engines' interface: the
simulator decides how each size is simulated (event by event, the step
shortcut, or a time NCCL's model gave it) and keeps every figure of it.
A caller that drives the simulator itself (runs/simulated.py: the seed,
the hop latency, NCCL's time, a schedule already built) hands its own
`Simulator` to the engine.
"""

from __future__ import annotations

from typing import Optional, Sequence

from sim.simulator import Simulator
from traffic.engines import Engine, Job, register

@register
class SimEngine(Engine):
    name = "sim"
    help = "flow-level simulation on the fabric graph: no network, no root"
    checks_data, needs_lab = False, False
    runs_steps, scale_up_in_memory = True, True
    EXTRAS = ()

    def __init__(self, fabric, ranks: Sequence[str], lab=None,
                 simulator: Optional[Simulator] = None):
        self._simulator = simulator or Simulator.on_fabric(fabric, ranks)

    def prepare(self, job: Job) -> None:
        self._simulator.prepare(job)

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        seconds, link_bytes, outcome = self._simulator.result()
        out = {"t0": 0.0, "t1": seconds, "seconds": seconds,
               "wrong": None, "bad_chunk_elements": None, "link_bytes": dict(link_bytes)}
        if timeline and outcome is not None:
            out["timeline"] = outcome.spans_one_by_one()    # one at a time: a million at 512
        return out

    def close(self) -> None:
        self._simulator.release()
