"""Replay engines behind one interface.

An engine replays one collective's schedule (collectives/schedules.py) between
the endpoints given as ranks, and times it:

    engine = make_engine(name, fabric, ranks, lab)   # by name, from ENGINES
    engine.prepare(job)          # once per message size: a Job says what to replay
    engine.iterate(i, timeout, timeline=False) -> dict   # once per iteration
    engine.close()               # always; stops whatever the engine started

`iterate` reports, for one iteration: ``t0`` and ``t1`` (when the first rank
started and the last one finished, on the CLOCK_MONOTONIC all namespaces
share), ``seconds`` (t1 - t0), ``wrong`` and ``bad_chunk_elements`` (elements
that differ from what the collective must give, or None when the engine moves
no real data), any figures of its own named in its `EXTRAS` (frames sent and
lost, TCP retransmits), and, when asked for and the engine can, ``timeline``:
per rank, step and kind of operation, when it was busy.

Engines that replay on a running lab (`needs_lab`) get the lab; one that
needs none (a simulator) gets lab=None and the fabric alone.

Each engine is a class in a module of this package that registers itself
(`@register`) with what it promises as class attributes: `name` (what
--engine takes), `help`, `checks_data` (every element received is checked:
#wrong is a number), `needs_lab` (it replays on a running lab, real
packets), `max_ranks` (0: no limit of its own), `runs_steps` (a whole
training step) and `scale_up_in_memory` (NVLink transfers handed over in
memory). `ENGINES` finds every one: a new engine is one new module and its
tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from registries import Registry, discover

ENGINES = Registry("engine", "engines")


@dataclass(frozen=True)
class Job:
    """What to replay for one message size."""
    collective: str
    algorithm: str
    count: int                   # the buffer's size / 4 (float32 elements); the agents
                                 # carry count * TYPE_SIZE / itemsize elements of `dtype`
    root: int = 0
    piece_bytes: int = 65536     # messages are forwarded piece by piece
    channels: int = 1            # connections (NCCL channels, RoCE QPs) per peer
    local: int = 1               # GPUs per server, for the hierarchical algorithm
    scale_up: str = "packets"    # NVLink inside a server: "packets" on its links, or "memory"
    dtype: str = "float"         # nccl-tests' type name (collectives/datatypes.py)
    op: str = "sum"              # the reduction

    @property
    def elements(self) -> int:
        """Elements of `dtype` in the buffer."""
        from collectives.datatypes import datatype
        from collectives.metrics import TYPE_SIZE
        return self.count * TYPE_SIZE // datatype(self.dtype).size


class Engine:
    """The interface every engine implements (see the module docstring)."""
    name: str = ""
    help: str = ""
    checks_data: bool = False
    needs_lab: bool = True
    max_ranks: int = 0
    runs_steps: bool = False        # replays a whole training step (sim/training_step.py)
    scale_up_in_memory: bool = False    # carries NVLink transfers in memory (scale_up: memory)
    EXTRAS: Tuple[str, ...] = ()

    def prepare(self, job: Job) -> None:
        raise NotImplementedError

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def register(cls):
    """Register an engine class under its `name` (the class itself: each run
    makes its own)."""
    ENGINES.add(cls)
    return cls


def make_engine(name: str, fabric, ranks: Sequence[str], lab: Optional[object] = None) -> Engine:
    """The engine called `name`, replaying between the endpoints `ranks` (in rank order)."""
    cls = ENGINES.find(name)
    if cls.needs_lab and lab is None:
        raise ValueError(f"the {name} engine replays on a running lab, and none was given")
    return cls(fabric, ranks, lab)


discover(__name__, __path__)
