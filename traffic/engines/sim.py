"""The flow-level simulator as an engine: the schedule replayed on the fabric
graph (sim), no network built, no root needed. Every iteration of a
size gives the same time: the simulation is deterministic for its seed."""

from __future__ import annotations

from typing import Sequence

from collectives import metrics
from collectives import schedules
from traffic.engines import Engine, Job
from sim.network import Network, sim_channels
from sim.replay import Replay


class SimEngine(Engine):
    EXTRAS = ()

    def __init__(self, fabric, ranks: Sequence[str], lab=None, seed: int = 0,
                 hop_latency_s: float = 0.0):
        self.fabric, self.ranks = fabric, list(ranks)
        self.network = Network(fabric, seed)
        self.hop_latency_s = hop_latency_s
        self.replay = None
        self.last = None

    def prepare(self, job: Job) -> None:
        sched = schedules.build(job.collective, job.algorithm, len(self.ranks), job.count,
                                schedules.Layout(job.root,
                                                 max(1, job.piece_bytes // metrics.TYPE_SIZE),
                                                 job.local), data=False)
        self.replay = Replay(self.network, self.ranks, sched, sim_channels(self.fabric, job.channels),
                             1 / metrics.payload_share(self.fabric.mtu), self.hop_latency_s)
        self.last = None

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        if self.last is None:
            self.last = self.replay.run()
        out = {"t0": 0.0, "t1": self.last.seconds, "seconds": self.last.seconds,
               "wrong": None, "bad_chunk_elements": None,
               "link_bytes": dict(self.last.link_bytes)}
        if timeline:
            out["timeline"] = [dict(e) for e in self.last.busy]
        return out

    def close(self) -> None:
        self.replay = self.last = None
