"""The flow-level simulator as one object: ranks on one network, with the
network's ECMP seed, the latency each hop adds, and the collective it is
asked to time. Whatever simulates goes through it: the sim engine
(traffic/engines/sim.py) and the sweep that drives it (runs/simulated.py),
the twin beside an emulated run (runs/beside.py), the training steps'
predictions (runs/training.py, runs/parallel_step.py), NCCL's rail and
AllToAll shares on a fabric, and the planner at Clos scale (planner/). Nobody else touches its
network or its state.

    sim = Simulator.on_fabric(fabric, ranks, seed=0, hop_latency_s=0.0)
    sim = Simulator.on_clos(shape, seed=0, hop_latency_s=0.0)   # ranks 0 .. n-1
    sim.prepare(job)        # a collective to time (a traffic/engines Job, or its fields)
    sim.method              # how it is simulated (below)
    sim.result()            # Simulated(seconds, link_bytes, outcome), worked out once
    sim.simulate(job)       # the two at once
    sim.replay_seconds(schedule, channels)   # any schedule, event by event
    sim.phase_seconds(phases)                # an AllReduce's phases (sim/phases.py)
    sim.reseed(seed)        # another draw of ECMP

How, by the rank count and the work (`simulation_method`): up to
FULL_RANKS every operation of every rank, event by event (sim/replay.py),
except a ring or hierarchical AllReduce whose replay would run more than
MAX_REPLAY_OPS operations (its messages cut into pieces: a ring over 512
ranks at 1 GiB has 33 million); those, and any beyond FULL_RANKS, step by
step from their structure (the step shortcut: sim/phases.py's phases, each
priced by sim/steps.py's max-min sharing), with nothing of size n^2 built.
Any other collective beyond FULL_RANKS goes step by step from its schedule
(sim/steps.py) while that schedule stays small (MAX_SHORTCUT_OPS
operations). A caller that priced the collective another way (NCCL's model,
sim/nccl) hands the time over (`use_time`, method NCCL_MODEL, or RCCL_MODEL
on AMD GPUs): no schedule is replayed, so no link carries bytes. A caller that already built the
schedule for the count (to price it by alpha-beta) hands it over
(`use_schedule`) rather than have it built twice.
"""

from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Optional, Sequence, Tuple

from collectives import metrics, registry
from collectives import schedules
from collectives.algorithms import ALGORITHM_REGISTRY
from sim import phases
from sim.clos import ClosNetwork, ClosShape
from sim.nccl import rails, tuner
from sim.network import Network, sim_channels
from sim.replay import Outcome, Replay
from sim.steps import stepwise_seconds

FULL_RANKS = 512                  # event by event up to this many ranks: the emulator's reach
# the replay's work is its operations, each about 0.5 KB and 7 us of this
# host's CPU: a ring over 512 ranks in whole blocks (1,046,528) takes 8 s of
# CPU and 0.55 GB a size; at 1 GiB (32 pieces a block) 6 min and 9.2 GB
MAX_REPLAY_OPS = 1_100_000
MAX_SHORTCUT_OPS = 4_000_000      # a schedule built for the shortcut: about 0.5 GB
EVENTS, PHASES, STEPS = "event by event", "step shortcut", "step shortcut (schedule)"
NCCL_MODEL = "NCCL's model"
RCCL_MODEL = "RCCL's model"      # AMD GPUs: the model as RCCL, NCCL's fork, runs them
# a priced size's method: the library whose tuner priced it
LIBRARY_OF = {NCCL_MODEL: "NCCL", RCCL_MODEL: "RCCL"}
NCCL_PRICED = tuner.COLLECTIVES + ("alltoall",)   # what NCCL's model prices (not SendRecv)


class Work(NamedTuple):
    """What a size asks of the replay: elements, piece bytes, GPUs per server."""
    count: int
    piece_bytes: int
    local: int = 1


class Simulated(NamedTuple):
    """A collective's simulated time, the wire bytes each sending interface
    carried, and the event-by-event replay's Outcome (None another way)."""
    seconds: float
    link_bytes: Dict[object, float]
    outcome: Optional[Outcome]


class Simulator:
    """Ranks on a network, simulated (the module docstring). The network
    is a fabric file's (sim/network.py, ranks its endpoints' names) or a
    Clos from its counts (sim/clos.py, ranks the GPUs' numbers)."""

    def __init__(self, network, ranks: Sequence, wire_per_byte: float = 1.0,
                 hop_latency_s: float = 0.0, channels: Callable[[int], int] = int):
        self._network, self._ranks = network, ranks
        self._wire, self._hop, self._channels = wire_per_byte, hop_latency_s, channels
        # the network as the phases see it: rank numbers for endpoints
        self._ranked = network if isinstance(ranks, range) else _Ranked(network, ranks)
        self._job = self._method = self._replay = self._result = None
        self._built = (0, None)       # (count, its schedule unsplit), given for the next job
        self._priced: Optional[Tuple[float, str]] = None   # the next job's time, and its method

    @classmethod
    def on_fabric(cls, fabric, ranks: Sequence[str], seed: int = 0,
                  hop_latency_s: float = 0.0) -> "Simulator":
        """The endpoints `ranks` (in rank order) of a fabric file: its links,
        the controller's routes, the MTU's headers on every byte, the
        connections per peer its routing policy replays."""
        return cls(Network(fabric, seed), list(ranks), 1 / metrics.payload_share(fabric.mtu),
                   hop_latency_s, lambda channels: sim_channels(fabric, channels))

    @classmethod
    def on_clos(cls, shape: ClosShape, seed: int = 0,
                hop_latency_s: float = 0.0) -> "Simulator":
        """Every GPU of a Clos given by its counts, payload at line rate."""
        return cls(ClosNetwork(shape, seed), range(shape.n), 1.0, hop_latency_s)

    @property
    def ranks(self) -> Sequence:
        return self._ranks

    @property
    def seed(self) -> int:
        return self._network.seed

    @property
    def hop_latency_s(self) -> float:
        return self._hop

    @property
    def network(self):
        """The network, for what reads its routes (the twin fits its ECMP
        choices to a lab's counters with its `pin`)."""
        return self._network

    @property
    def method(self) -> str:
        """How the prepared collective is simulated ("" before any)."""
        return self._method or ""

    def reseed(self, seed: int) -> None:
        """Draw ECMP again, with another seed."""
        self._network.reseed(seed)

    def alpha_s(self) -> float:
        """The one-way latency the alpha-beta model takes on a fabric: the
        hops of the longest path from the first rank at the hop latency,
        and the slowest link's delay."""
        first = self._ranks[0]
        hops = max(len(self._network.path(first, r)) for r in self._ranks[1:])
        return hops * self._hop + max(l.delay_s for l in self._network.links.values())

    def use_time(self, seconds: float, method: str = NCCL_MODEL) -> None:
        """The next prepared collective's time, as NCCL's model priced it
        (`method`: NCCL_MODEL, or RCCL_MODEL on AMD GPUs): nothing is
        replayed for it."""
        self._priced = (seconds, method)

    def use_schedule(self, count: int, sched: schedules.Schedule) -> None:
        """The next collective's schedule, built (unsplit, without data) by
        the caller for `count`: replayed rather than built again, then freed."""
        self._built = (count, sched)

    def prepare(self, job) -> str:
        """Ready to time `job` (a traffic/engines Job: collective,
        algorithm, count, root, piece_bytes, channels, local); its method.
        ValueError, one sentence, where no way reaches (`simulation_method`)."""
        self._job, self._result, self._replay = job, None, None
        if self._priced is not None:
            seconds, self._method = self._priced
            self._result, self._priced = Simulated(seconds, {}, None), None
            return self._method
        self._method = simulation_method(job.collective, job.algorithm, len(self._ranks),
                                         work=Work(job.count, job.piece_bytes, job.local))
        if self._method == EVENTS:
            self._replay = self.replay_of(job)
        return self._method

    def result(self) -> Simulated:
        """The prepared collective, simulated once; the replay's state is
        then freed (its outcome is kept)."""
        if self._result is None:
            self._result = self._run()
            self._replay = None
        return self._result

    def simulate(self, job) -> Simulated:
        """`prepare` and `result` at once."""
        self.prepare(job)
        return self.result()

    def release(self) -> None:
        """Frees the prepared collective's replay and result."""
        self._replay = self._result = None

    def replay(self, sched: schedules.Schedule, channels: int = 1) -> Replay:
        """Any schedule over these ranks (several groups' collectives at
        once, say), ready to replay event by event, as often as asked: each
        run on the paths as the network draws them then."""
        return Replay(self._network, self._ranks, sched, self._channels(channels), self._wire,
                      self._hop)

    def replay_of(self, job) -> Replay:
        """`job`'s collective ready to replay event by event (`replay`)."""
        return self.replay(self._schedule(job), job.channels)

    def replay_seconds(self, sched: schedules.Schedule, channels: int = 1) -> float:
        """Any schedule over these ranks, replayed event by event: its seconds."""
        return self.replay(sched, channels).run().seconds

    def phase_seconds(self, parts) -> float:
        """An AllReduce's phases over these ranks (sim/phases.py), step by step."""
        return phases.phase_seconds(self._ranked, parts, self._wire, self._hop)

    def ring_path_us(self, gpus: int) -> float:
        """The mean latency of NCCL's rail rings' hops between servers of
        `gpus` ranks each (sim/nccl/rails.py `ring_path_us`)."""
        return rails.ring_path_us(self._ranked, len(self._ranks), gpus)

    def rail_share(self, gpus: int, nics: int, nic_bps: float, connections: int = 1,
                   seeds: int = 5) -> float:
        """The share of a NIC's rate NCCL's rail rings get over these ranks
        (sim/nccl/rails.py `share_on`), the median over ECMP draws with
        seeds 0 .. seeds-1; the simulator's own seed is drawn again after."""
        mine = self.seed
        try:
            return rails.share_on(self._drawn, len(self._ranks), gpus, nics, nic_bps,
                                  connections, seeds)
        finally:
            self.reseed(mine)

    def alltoall_share(self, gpus: int, nics: int, nic_bps: float, peers: int,
                       connections: int = 1, seeds: int = 5) -> float:
        """The share of a NIC's rate NCCL's AllToAll gets between servers of
        `gpus` of these ranks (sim/nccl/rails.py `alltoall_share_on`), drawn
        as `rail_share` draws; the simulator's own seed is drawn again after."""
        mine = self.seed
        try:
            return rails.alltoall_share_on(self._drawn, len(self._ranks), gpus, nics, nic_bps,
                                           peers, connections, seeds)
        finally:
            self.reseed(mine)

    def _drawn(self, seed: int):
        self.reseed(seed)
        return self._ranked

    def _schedule(self, job) -> schedules.Schedule:
        """The job's schedule without data, in pieces: the one given for
        this count if there is one (`use_schedule`: of the same collective,
        root and GPUs per server), cut into pieces; else built here."""
        piece = _piece_elements(job.piece_bytes)
        count, built = self._built
        self._built = (0, None)
        if built is not None and count == job.count:
            return schedules.chunked(built, piece)
        return schedules.build(job.collective, job.algorithm, len(self._ranks), job.count,
                               schedules.RankLayout(job.root, piece, job.local), data=False)

    def _run(self) -> Simulated:
        if self._method == EVENTS:
            out = self._replay.run()
            return Simulated(out.seconds, out.link_bytes, out)
        job, channels = self._job, self._channels(self._job.channels)
        if self._method == STEPS:
            sched = self._schedule(job)
            seconds = stepwise_seconds(self._network, self._ranks, sched, channels, self._wire,
                                       self._hop)
            return Simulated(seconds, _schedule_bytes(self._network, self._ranks, sched,
                                                      channels, self._wire), None)
        parts = phases.allreduce_phases(job.algorithm, len(self._ranks), job.count, job.local,
                                        channels)
        return Simulated(self.phase_seconds(parts), _phase_bytes(self._ranked, parts,
                                                                 self._wire), None)


class _Ranked:
    """A fabric's network as the phases see it: ranks (numbers) for endpoints."""

    def __init__(self, network: Network, ranks: Sequence[str]):
        self.network, self.ranks, self.links = network, ranks, network.links
        self.splits = network.splits

    def path(self, src: int, dst: int, flow: int = 0):
        return self.network.path(self.ranks[src], self.ranks[dst], flow)

    def even_split(self, src: int, dst: int):
        return self.network.even_split(self.ranks[src], self.ranks[dst])


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
        algorithm = registry.FLAT_RING if collective == "allreduce" else \
            registry.default_algorithm(collective)
    phased = collective == "allreduce" and algorithm in registry.PHASED
    if n <= FULL_RANKS and not (phased and work is not None and
                                replay_operations(algorithm, n, work) > MAX_REPLAY_OPS):
        return EVENTS
    if phased:
        return PHASES
    if schedule_operations(collective, algorithm, n) <= MAX_SHORTCUT_OPS:
        return STEPS
    raise ValueError(
        f"{collective} ({algorithm}) over {n:,} ranks would build a schedule of about "
        f"{schedule_operations(collective, algorithm, n):,} operations; beyond {FULL_RANKS} "
        f"ranks the simulator takes ring and hierarchical AllReduce at any size, and other "
        f"collectives while their schedule stays within {MAX_SHORTCUT_OPS:,} operations: "
        "a smaller fabric, or -c allreduce -a ring")


def replay_operations(algorithm: str, n: int, work: Work) -> int:
    """The operations the event-by-event replay would run for a ring or
    hierarchical AllReduce of this size: its schedule's, each message cut
    into pieces (sim/phases.py `replay_operations`)."""
    count, piece_bytes, local = work
    parts = phases.allreduce_phases(algorithm, n, count, local)
    return phases.replay_operations(parts, _piece_elements(piece_bytes))


def schedule_operations(collective: str, algorithm: str, n: int) -> int:
    """About how many operations the schedule has (sends and receives): the
    algorithm's own count (collectives/algorithms/)."""
    return ALGORITHM_REGISTRY[algorithm].operations(collective, n)


def _piece_elements(piece_bytes: int) -> int:
    return max(1, piece_bytes // metrics.TYPE_SIZE)


def _phase_bytes(network, parts, wire_per_byte: float) -> Dict[object, float]:
    """Wire bytes per sending interface of the phases' transfers (each a
    block of the phase's size, every step of it)."""
    out: Dict[object, float] = {}
    for ph in parts:
        sent = ph.steps * ph.elements * metrics.TYPE_SIZE * wire_per_byte
        for a, b, c in ph.transfers:
            for hop in network.path(a, b, c):
                out[hop.intf] = out.get(hop.intf, 0.0) + sent
    return out


def _schedule_bytes(network, ranks, sched, channels: int,
                    wire_per_byte: float) -> Dict[object, float]:
    """Wire bytes per sending interface of a schedule's sends, each on the
    connection the k-th message to its peer takes."""
    out: Dict[object, float] = {}
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
