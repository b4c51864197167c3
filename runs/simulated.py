"""A message-size sweep simulated instead of emulated: the same experiment,
the same run record (so the same tables, JSON, CSV and figures), from the
flow-level simulator (`--engine sim`).

Per size: the simulated time and the nccl-tests columns from it, the
alpha-beta prediction with the same latency for comparison, and per
directed link the bytes it carried and its mean utilisation. What an
emulated run measures and a simulation cannot (latency under load, queues,
drops, CPU) is absent or NaN, and the verdict says the figures are
simulated.

Where the fabric file names its server as sold (`server.model`) and the
run asks for `-a auto`, each size NCCL's tuner prices (AllReduce,
AllGather, ReduceScatter, Broadcast, Reduce) is priced by NCCL's model
(sim/nccl; RCCL's, as the sizes' method says, on AMD GPUs): the algorithm,
protocol and channels NCCL would pick on these servers, its channels'
share of the NICs being what the fabric's ECMP gives NCCL's rail rings
(rails.share_on); AllToAll, priced likewise, takes the share its own
pattern gets (rails.alltoall_share_on). Such a size replays no schedule
and has no per-link figures.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

from collectives import metrics, registry
from runs.experiment import Experiment, piece_bytes_for
from runs.record import RunRecord
from runs.sweep import Size, price_schedule, sweep
from sim import nccl, phases
from networks.technology import REFERENCE_SWITCH_US, REFERENCE_SWITCHES
from sim.nccl import rails
from sim.simulator import (NCCL_MODEL, NCCL_PRICED, PHASES, RCCL_MODEL, Simulator, Work,
                           simulation_method)
from traffic.engines.sim import SimEngine

NAN = float("nan")


def simulate_experiment(fabric, exp: Experiment, seed: int = 0, hop_latency_s: float = 0.0,
                        progress: Callable[[str], None] = lambda msg: None) -> RunRecord:
    """Simulate `exp` on `fabric` size by size; a run record as an emulated
    run's (docs/output.md), with `simulated` set."""
    return sweep(SimBackend(fabric, seed, hop_latency_s), exp, progress)


class SimBackend:
    """The flow-level simulator as the sweep's backend: one iteration a size
    (the simulation is deterministic for its seed), the bytes of every
    directed link, and NaN or nothing for what only a live lab measures.
    It holds the simulator (sim/simulator.py) and hands it what it priced
    of each size; the engine it gives the sweep runs that same simulator."""

    def __init__(self, fabric, seed: int = 0, hop_latency_s: float = 0.0):
        self.fabric, self.seed, self.hop_latency_s = fabric, seed, hop_latency_s
        self.simulator = None
        self.engine = None
        self.method = ""
        self.nccl = None                # NCCL's cluster, where the fabric names its server
        self.choice = None              # NCCL's choice for the size under way

    def tune(self, exp: Experiment, model, count: int):
        """What NCCL's model runs for this size (the record's `auto`), or
        None where it does not price the run (no server.model, an algorithm
        named, a collective NCCL's tuner does not price)."""
        self.choice = None
        if self.nccl is None or exp.collective not in NCCL_PRICED:
            return None
        self.choice = nccl.predict(self.nccl, exp.collective, count * metrics.TYPE_SIZE,
                                   exp.nccl_algo, exp.nccl_proto)
        e = self.choice.chosen
        share = self.nccl.alltoall_share if exp.collective == "alltoall" else None
        return {"nccl": f"{e.name}, {e.channels} channel{'s' if e.channels > 1 else ''}",
                "model": self.nccl.topo.server.name,
                "fabric_share": self.nccl.fabric_share if share is None else share,
                "network_us": self.nccl.extra_us,
                "predicted_s": {x.name: x.time_us * 1e-6 for x in self.choice.table}}

    def price(self, exp: Experiment, model, count: int, alpha: float) -> tuple:
        """(the alpha-beta prediction, the schedule, its dependent steps):
        where the step shortcut runs, from the phases (no schedule of size
        n^2 is built); elsewhere the sweep's, whose schedule the simulator then
        replays rather than build its own. The schedule returned is empty:
        nothing of the simulator's `measure` needs it, and a ring's at 512
        ranks is 250 MB. A size NCCL's model priced (`tune`) has no
        alpha-beta prediction: its time is the model's, handed to the
        simulator."""
        if self.choice is not None:
            self.simulator.use_time(self.choice.chosen.time_us * 1e-6, RCCL_MODEL
                                    if self.nccl.topo.server.gpu.rccl else NCCL_MODEL)
            return 0.0, {}, 0
        self.method = simulation_method(exp.collective, exp.algorithm, model.n, work=Work(
            count, piece_bytes_for(exp, self.fabric.policy), model.local))   # as the engine's job has it
        if self.method == PHASES:
            predicted, steps = phase_prediction(
                phases.allreduce_phases(exp.algorithm, model.n, count, model.local), model, alpha)
            return predicted, {}, steps
        predicted, sched, steps = price_schedule(exp, model, count, alpha)
        self.simulator.use_schedule(count, sched)   # the simulator's alone: freed once replayed
        return predicted, {}, steps

    def begin(self, exp: Experiment, model, ranks, progress) -> float:
        self.simulator = Simulator.on_fabric(self.fabric, ranks, self.seed, self.hop_latency_s)
        self.engine = SimEngine(self.fabric, ranks, simulator=self.simulator)
        self.nccl = self._cluster(exp, model, ranks, progress) \
            if exp.algorithm == registry.AUTO else None
        return self.simulator.alpha_s()

    def _cluster(self, exp: Experiment, model, ranks, progress):
        """NCCL's cluster of the ranks' servers, as the fabric names them
        (None where it does not), its NICs' share from this fabric's ECMP
        (for an AllToAll, its own pattern's too)."""
        hw = self.fabric.server_model
        if hw is None:
            return None
        local = self.fabric.gpus_per_server
        if model.local != local:
            raise ValueError(f"NCCL's model of {hw.name} (server.model) prices whole servers of "
                             f"{local} GPUs; these {len(ranks)} ranks are not: -r whole servers, "
                             "or -a with an algorithm")
        progress(f"NCCL's rail rings on this fabric ({hw.name}, {self.fabric.network.title})")
        return nccl_cluster_on(self.fabric, hw, ranks, local, exp.collective == "alltoall")

    def iterations(self, exp: Experiment):
        return 0, 1

    def measure(self, exp: Experiment, model, size: Size, record: dict) -> dict:
        out = size.iterations[0]
        if self.choice is not None:             # priced by NCCL's model: no link carried bytes
            return {"latency": {"p50_us": NAN, "p99_us": NAN, "max_us": NAN, "samples": 0,
                                "lost": 0}, "links": {}, "ecmp_imbalance": {},
                    "cpu_busy_pct": NAN, "ovs_core_pct": NAN, "flags": [],
                    "method": self.simulator.method}
        links = _links(self.fabric, out["link_bytes"], out["seconds"])
        return {"latency": {"p50_us": NAN, "p99_us": NAN, "max_us": NAN, "samples": 0, "lost": 0},
                "links": links, "ecmp_imbalance": _imbalance(self.fabric, links),
                "cpu_busy_pct": NAN, "ovs_core_pct": NAN, "flags": [],
                "method": self.simulator.method}

    def finish(self, exp: Experiment, model, runs) -> dict:
        fabric = self.fabric
        return {"probe": [], "idle_latency": {"p50_us": NAN, "p99_us": NAN, "samples": 0},
                "simulated": {"seed": self.seed, "hop_latency_s": self.hop_latency_s,
                              "method": _methods(runs) or (self.simulator.method if self.simulator
                                                           else self.method),
                              "network": fabric.network.name,
                              "network_title": fabric.network.describe(fabric.network_settings),
                              "routing": fabric.policy,
                              "switch_latency_us": fabric.switch_latency_us,
                              "message_us": fabric.network.message_us},
                "fidelity": {"trustworthy": True, "host_kept_up": True, "flagged_sizes": [],
                             "simulated": True},
                "uplink_tx_bytes": _uplinks(fabric, runs[-1]["links"] if runs else {}),
                "tiers": metrics.tier_report(fabric, {i: {"tx_bytes": sum(r["links"][i]["tx_bytes"]
                                                                    for r in runs)}
                                                for i in (runs[0]["links"] if runs else {})}),
                "cross_traffic": None}

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


def nccl_cluster_on(fabric, hw, ranks, local: int, alltoall: bool = False):
    """NCCL's cluster of `ranks` (whole servers of `local` GPUs of `hw`) on
    this fabric: its NICs' share from the fabric's own routing (bandwidth
    alone, ECMP hashing NCCL's channels x queue pairs per NIC), with
    `alltoall` the share AllToAll's own pattern gets too, what its rail
    rings' hops between servers add to NCCL's per-step latency (switches,
    links, the transport), the technology, SHARP if turned on."""
    tech = fabric.network
    settings = fabric.network_settings
    qps = settings.get("qps_per_connection", tech.qps_per_connection)
    servers = len(ranks) // local
    domain = fabric.nvlink_domain if local % fabric.nvlink_domain == 0 else local
    nodes = len(ranks) // domain                    # NCCL's: servers, or NVLink partitions
    simulator = Simulator.on_fabric(fabric, ranks)
    connections = rails.connections_per_nic(hw, nodes) * qps
    share = simulator.rail_share(local, fabric.nics_per_server, hw.nic_gbps * 1e9,
                                 connections, seeds=3)
    pattern = simulator.alltoall_share(local, fabric.nics_per_server, hw.nic_gbps * 1e9,
                                       rails.p2p_peers(hw, nodes), connections, seeds=3) \
        if alltoall else None
    extra = simulator.ring_path_us(local) - REFERENCE_SWITCHES * REFERENCE_SWITCH_US
    return nccl.cluster(hw, nodes, domain, fabric_share=share, alltoall_share=pattern,
                        network=tech,
                        net_extra_us=extra if servers > 1 else 0.0,
                        collnet=settings.get("sharp", tech.sharp))


def _methods(runs) -> str:
    """The ways the sizes were simulated, each once, in the sizes' order (a
    sweep's small sizes may replay event by event, its large ones take the
    step shortcut: sim/simulator.py)."""
    return ", ".join(dict.fromkeys(r["method"] for r in runs if r.get("method")))


def phase_prediction(parts, model, alpha: float) -> Tuple[float, int]:
    """(alpha x steps + beta x bytes, steps) of an AllReduce's phases, as
    sim/alphabeta.py `predict` prices its schedule: the most bytes a rank
    sends or receives at beta; with multi-GPU servers, its bytes to its own
    server at beta_intra and the rest at beta on its NIC, counting every rank
    that shares the NIC; the slowest rank sets the time."""
    steps = sum(ph.steps for ph in parts)
    local = model.local
    ways: Dict[object, list] = {}
    for ph in parts:
        moved = ph.steps * ph.elements * metrics.TYPE_SIZE
        for a, b, _ in ph.transfers:
            inside = local > 1 and model.beta_intra is not None and a // local == b // local
            for rank, way in ((a, 0), (b, 1)):
                key = ("intra", rank) if inside else ("nic", model.nic_of[rank] if
                                                      local > 1 and model.beta_intra is not None
                                                      else rank)
                ways.setdefault(key, [0, 0])[way] += moved
    if local == 1 or model.beta_intra is None:
        return alpha * steps + model.beta * max(max(w) for w in ways.values()), steps
    worst = max(max(ways.get(("intra", r), [0, 0])) * model.beta_intra
                + max(ways.get(("nic", model.nic_of[r]), [0, 0])) * model.beta
                for r in range(model.n))
    return alpha * steps + worst, steps


def _links(fabric, link_bytes: Dict[str, float], seconds: float) -> Dict[str, dict]:
    """Per sending interface, as the monitor reports switch-side ones."""
    out = {}
    for link in fabric.links:
        for node, intf, peer in ((link.a, link.a_intf, link.b), (link.b, link.b_intf, link.a)):
            sent = link_bytes.get(intf, 0.0)
            util = sent * 8 / (seconds * link.spec.rate_mbit * 1e6) if seconds > 0 else 0.0
            out[intf] = {"link": f"{node}->{peer}", "tx_bytes": int(round(sent)),
                         "mean_util": util, "peak_util": util, "peak_backlog_bytes": 0,
                         "drops": 0}
    return out


def _imbalance(fabric, links: Dict[str, dict]) -> Dict[str, float]:
    uplinks = {leaf.name: [links[l.a_intf]["tx_bytes"] for l in fabric.uplinks(leaf.name)]
               for leaf in fabric.leaves}
    return {leaf: metrics.imbalance(v) for leaf, v in uplinks.items() if sum(v) > 0}


def _uplinks(fabric, links: Dict[str, dict]) -> dict:
    return {leaf.name: {l.a_intf: links.get(l.a_intf, {}).get("tx_bytes", 0)
                        for l in fabric.uplinks(leaf.name)} for leaf in fabric.leaves}
