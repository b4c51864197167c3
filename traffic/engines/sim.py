"""The flow-level simulator as an engine: the schedule replayed on the fabric
graph (sim), no network built, no root needed. Every iteration of a
size gives the same time: the simulation is deterministic for its seed.

How, by the rank count and the work (`simulation_method`): up to
FULL_RANKS every operation of every rank, event by event (sim/replay.py),
except a ring or hierarchical AllReduce whose replay would run more than
MAX_REPLAY_OPS operations (its messages cut into pieces: a ring over 512
ranks at 1 GiB has 33 million); those, and any beyond FULL_RANKS, step by
step from their structure (the step shortcut: sim/phases.py's phases, each
priced by sim/steps.py's max-min sharing), with nothing of size n^2 built.
Any other collective beyond FULL_RANKS goes step by step from its schedule
(sim/steps.py) while that schedule stays small (MAX_SHORTCUT_OPS
operations). Where the fabric names its server as sold
and the run asks for `-a auto`, the backend prices each size with NCCL's
model (sim/nccl) and the engine reports that time (`priced_s`, method
NCCL_MODEL): no schedule is replayed, so no link carries bytes."""

from __future__ import annotations

import math
from typing import Dict, NamedTuple, Optional, Sequence

from collectives import metrics, registry
from collectives import schedules
from traffic.engines import Engine, Job
from sim import phases
from sim.nccl import tuner
from sim.network import Network, sim_channels
from sim.replay import Replay
from sim.steps import stepwise_seconds

FULL_RANKS = 512                  # event by event up to this many ranks: the emulator's reach
# the replay's work is its operations, each about 0.5 KB and 7 us of this
# host's CPU: a ring over 512 ranks in whole blocks (1,046,528) takes 8 s of
# CPU and 0.55 GB a size; at 1 GiB (32 pieces a block) 6 min and 9.2 GB
MAX_REPLAY_OPS = 1_100_000
MAX_SHORTCUT_OPS = 4_000_000      # a schedule built for the shortcut: about 0.5 GB
EVENTS, PHASES, STEPS = "event by event", "step shortcut", "step shortcut (schedule)"
NCCL_MODEL = "NCCL's model"
NCCL_PRICED = tuner.COLLECTIVES + ("alltoall",)   # what NCCL's model prices (not SendRecv)


class Work(NamedTuple):
    """What a size asks of the replay: elements, piece bytes, GPUs per server."""
    count: int
    piece_bytes: int
    local: int = 1


def simulation_method(collective: str, algorithm: str, n: int, nccl_model: bool = False,
                      work: Optional[Work] = None) -> str:
    """How `n` ranks of this collective are simulated (the module docstring);
    ValueError, one sentence, where neither way reaches. `work` is the size
    (count, piece and GPUs per server, as the Job has them); without it, the
    method by the rank count alone (what a check before the run can say).
    `auto` is priced by NCCL's model where the fabric names its server
    (`nccl_model`) and NCCL's tuner prices the collective; else it runs the
    lab's schedule NCCL's choice falls on, which for AllReduce on servers of
    several GPUs only the event-by-event replay takes: beyond, NCCL's Ring
    as the step shortcut prices it (runs/sweep.py `resolved`)."""
    if algorithm == registry.AUTO:
        if nccl_model and collective in NCCL_PRICED:
            return NCCL_MODEL
        algorithm = "ring" if collective == "allreduce" else registry.default_algorithm(
            collective)
    phased = collective == "allreduce" and algorithm in phases.ALGORITHMS
    if n <= FULL_RANKS and not (phased and work is not None and
                                replay_operations(algorithm, n, work) > MAX_REPLAY_OPS):
        return EVENTS
    if phased:
        return PHASES
    if _operations(collective, algorithm, n) <= MAX_SHORTCUT_OPS:
        return STEPS
    raise ValueError(
        f"{collective} ({algorithm}) over {n:,} ranks would build a schedule of about "
        f"{_operations(collective, algorithm, n):,} operations; beyond {FULL_RANKS} ranks the "
        f"simulator takes ring and hierarchical AllReduce at any size, and other collectives "
        f"while their schedule stays within {MAX_SHORTCUT_OPS:,} operations: "
        "a smaller fabric, or -c allreduce -a ring")


def replay_operations(algorithm: str, n: int, work: Work) -> int:
    """The operations the event-by-event replay would run for a ring or
    hierarchical AllReduce of this size: its schedule's, each message cut
    into pieces (sim/phases.py `replay_operations`)."""
    count, piece_bytes, local = work
    parts = phases.allreduce_phases(algorithm, n, count, local)
    return phases.replay_operations(parts, _piece_elements(piece_bytes))


def _piece_elements(piece_bytes: int) -> int:
    return max(1, piece_bytes // metrics.TYPE_SIZE)


def _operations(collective: str, algorithm: str, n: int) -> int:
    """About how many operations the schedule has (sends and receives)."""
    log = max(1, math.ceil(math.log2(n)))
    if algorithm in ("rhd",):
        return 4 * n * log + 4 * n
    if algorithm in ("tree", "nccl-tree") or collective in ("broadcast", "reduce", "sendrecv"):
        return 8 * n
    per_peer = 4 if collective == "allreduce" else 2
    return per_peer * n * (n - 1) + n                  # rings, pairwise AllToAll, the rest


class _Ranked:
    """The network as the phases see it: ranks (numbers) for endpoints."""

    def __init__(self, network: Network, ranks: Sequence[str]):
        self.network, self.ranks, self.links = network, ranks, network.links
        self.splits = network.splits

    def path(self, src: int, dst: int, flow: int = 0):
        return self.network.path(self.ranks[src], self.ranks[dst], flow)

    def spread(self, src: int, dst: int):
        return self.network.spread(self.ranks[src], self.ranks[dst])


class SimEngine(Engine):
    EXTRAS = ()

    def __init__(self, fabric, ranks: Sequence[str], lab=None, seed: int = 0,
                 hop_latency_s: float = 0.0):
        self.fabric, self.ranks = fabric, list(ranks)
        self.network = Network(fabric, seed)
        self.hop_latency_s = hop_latency_s
        self.replay = None
        self.last = None
        self.method = ""
        self.built = (0, None)          # (count, its schedule unsplit), built by the caller
        self.priced_s = None            # NCCL's time for the next job, set by the caller

    def prepare(self, job: Job) -> None:
        n = len(self.ranks)
        self.job, self.last, self.replay = job, None, None
        if self.priced_s is not None:
            self.method, self.last = NCCL_MODEL, (self.priced_s, {}, None)
            self.priced_s = None
            return
        self.method = simulation_method(job.collective, job.algorithm, n,
                                        work=Work(job.count, job.piece_bytes, job.local))
        if self.method == EVENTS:
            self.replay = Replay(self.network, self.ranks, self._schedule(job),
                                 sim_channels(self.fabric, job.channels),
                                 self._wire(), self.hop_latency_s)

    def _schedule(self, job: Job) -> schedules.Schedule:
        """The job's schedule without data, in pieces: the one the caller
        built for this count if it did (`built`, of the same collective,
        root and GPUs per server), cut into pieces; else built here."""
        piece = _piece_elements(job.piece_bytes)
        count, built = self.built
        self.built = (0, None)
        if built is not None and count == job.count:
            return schedules.chunked(built, piece)
        return schedules.build(job.collective, job.algorithm, len(self.ranks), job.count,
                               schedules.Layout(job.root, piece, job.local), data=False)

    def _wire(self) -> float:
        return 1 / metrics.payload_share(self.fabric.mtu)

    def replay_seconds(self, sched: schedules.Schedule, channels: int = 1) -> float:
        """Any schedule over these ranks (several groups' collectives at once,
        say), replayed event by event: its seconds."""
        return Replay(self.network, self.ranks, sched, sim_channels(self.fabric, channels),
                      self._wire(), self.hop_latency_s).run().seconds

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        if self.last is None:
            self.last = self._run()
            self.replay = None                  # its schedule and state: the outcome is kept
        seconds, link_bytes, outcome = self.last
        out = {"t0": 0.0, "t1": seconds, "seconds": seconds,
               "wrong": None, "bad_chunk_elements": None, "link_bytes": dict(link_bytes)}
        if timeline and outcome is not None:
            out["timeline"] = outcome.spans_one_by_one()    # one at a time: a million at 512
        return out

    def _run(self):
        """(seconds, wire bytes per sending interface, the replay's Outcome or None)."""
        if self.method == EVENTS:
            out = self.replay.run()
            return out.seconds, out.link_bytes, out
        job, channels = self.job, sim_channels(self.fabric, self.job.channels)
        if self.method == STEPS:
            sched = self._schedule(job)
            seconds = stepwise_seconds(self.network, self.ranks, sched, channels, self._wire(),
                                       self.hop_latency_s)
            return seconds, _schedule_bytes(self.network, self.ranks, sched, channels,
                                            self._wire()), None
        parts = phases.allreduce_phases(job.algorithm, len(self.ranks), job.count, job.local,
                                        channels)
        ranked = _Ranked(self.network, self.ranks)
        seconds = phases.phase_seconds(ranked, parts, self._wire(), self.hop_latency_s)
        return seconds, _phase_bytes(ranked, parts, self._wire()), None

    def close(self) -> None:
        self.replay = self.last = None


def _phase_bytes(network: _Ranked, parts, wire_per_byte: float) -> Dict[str, float]:
    """Wire bytes per sending interface of the phases' transfers (each a
    block of the phase's size, every step of it)."""
    out: Dict[str, float] = {}
    for ph in parts:
        sent = ph.steps * ph.elements * metrics.TYPE_SIZE * wire_per_byte
        for a, b, c in ph.transfers:
            for hop in network.path(a, b, c):
                out[hop.intf] = out.get(hop.intf, 0.0) + sent
    return out


def _schedule_bytes(network: Network, ranks, sched, channels: int,
                    wire_per_byte: float) -> Dict[str, float]:
    """Wire bytes per sending interface of a schedule's sends, each on the
    connection the k-th message to its peer takes."""
    out: Dict[str, float] = {}
    for r, ops in sched.items():
        made: Dict[int, int] = {}
        for op in ops:
            if op.kind != "send":
                continue
            k = made[op.peer] = made.get(op.peer, -1) + 1
            sent = op.length * metrics.TYPE_SIZE * wire_per_byte
            for hop in network.path(ranks[r], ranks[op.peer], k % channels):
                out[hop.intf] = out.get(hop.intf, 0.0) + sent
    return out
