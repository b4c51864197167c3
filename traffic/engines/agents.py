"""The default engine: rank agents (programs/agent.py), one process
per server driving each of its GPUs' ranks from that GPU's namespace, real
data of the experiment's type over TCP, reduced with its op, every piece
checked and the result verified."""

from __future__ import annotations

import sys
import time
import zlib
from typing import List, Sequence

from lab.shaping import connection_windows
from traffic.engines import Engine, Job, register
from traffic.engines.rank_processes import AgentProcesses
from collectives.datatypes import datatype
from collectives.metrics import payload_share
from policies import policy

AGENT_PORT = 7000
SOURCE_PORTS = (10000, 20000)      # where a lab's first source port falls (programs/agent.py)


def source_ports(lab) -> int:
    """The first source port of the agents' connections on this lab: fixed
    by the lab's folder, so every experiment on it (a sweep, its in-place
    columns, the algorithms --compare adds) draws the same ECMP paths for
    the same connections, and another lab draws anew."""
    low, high = SOURCE_PORTS
    return low + zlib.crc32(str(lab.run_dir).encode()) % (high - low)


def scale_up_bps(fabric) -> float:
    """The payload rate of a GPU's NVLink port, as TCP would get it over the
    link (and the simulator charges it): the intra_node rate less headers."""
    rate = max(l.spec.rate_mbit for l in fabric.links if l.kind == "intra_node")
    return rate * 1e6 * payload_share(fabric.mtu)


def by_server(hosts) -> list:
    """The ranks of each server, in order of their first rank: one process per
    server, as one machine drives its GPUs."""
    groups: dict = {}
    for rank, h in enumerate(hosts):
        groups.setdefault(h.server, []).append(rank)
    return list(groups.values())


@register
class RankAgents(AgentProcesses, Engine):
    name, help = "agents", "rank processes with real, checked data (default)"
    checks_data, needs_lab = True, True
    runs_steps, scale_up_in_memory = True, True
    EXTRAS = ("scale_up_bytes", "pieces", "reordered", "unsettled")

    def __init__(self, fabric, ranks: Sequence[str], lab, port: int = AGENT_PORT,
                 per_rank: bool = False):
        """`per_rank`: a process for each rank, as the agents ran before a
        process drove a whole server (bench/ranks_bench.py compares both)."""
        self.fabric = fabric
        hosts = [fabric.endpoint(s) for s in ranks]
        ips = ",".join(h.ip for h in hosts)
        nvlink = ",".join(h.nv_ip for h in hosts)
        boxes = ",".join(h.server for h in hosts)
        namespaces = [lab.netns(s) for s in ranks]
        super().__init__(lab, ranks, lambda group, s: [
            sys.executable, "-m", "programs.agent",
            "--ranks", ",".join(map(str, group)),
            "--netns", ",".join(namespaces[r] for r in group), "--addresses", ips,
            "--port", str(port), "--source-ports", str(source_ports(lab)),
            "--nvlink", nvlink, "--servers", boxes,
            "--windows", ",".join(map(str, connection_windows(fabric.links, fabric.mtu)))],
            groups=None if per_rank else by_server(hosts))

    def _transport(self, job: Job) -> dict:
        """How the agents move a job's data: type, op, connections, scale-up."""
        routing, spreading = self.fabric.routing, policy(self.fabric.policy)
        return {"dtype": job.dtype, "op": job.op,
                "channels": spreading.connections_per_peer(job.channels, routing.entropy),
                "local": job.local,
                "scale_up_bps": scale_up_bps(self.fabric) if job.scale_up == "memory" else 0,
                "spread": self.fabric.policy if spreading.spreads else "",
                "gap_s": routing.flowlet_gap_ms / 1e3}

    def prepare(self, job: Job) -> None:
        self.send({"cmd": "setup", "collective": job.collective, "algorithm": job.algorithm,
                   "count": job.elements, "root": job.root,
                   "piece": max(1, job.piece_bytes // datatype(job.dtype).size),
                   **self._transport(job)})
        # no agent reports until its peers connected, and every agent builds
        # the whole schedule first: on a slow host, 256 of them take minutes
        self.collect("setup_done", timeout=60 + 2 * self.n)

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        # every agent starts at the same moment, a little ahead, so writing
        # "go" to one pipe after another costs the collective nothing
        start = time.monotonic() + 0.02 + 0.002 * self.n
        self.send({"cmd": "go", "iter": i, "at": start, "timeline": timeline})
        ranks = self.collect("done", timeout)
        t0 = min(r["t0"] for r in ranks)
        t1 = max(r["t1"] for r in ranks)
        out = {"t0": t0, "t1": t1, "seconds": t1 - t0,
               "wrong": sum(r["wrong"] for r in ranks),
               "bad_chunk_elements": sum(r["bad_chunk_elements"] for r in ranks),
               "scale_up_bytes": sum(r["scale_up_bytes"] for r in ranks),
               "pieces": sum(r["pieces"] for r in ranks),
               "reordered": sum(r["reordered"] for r in ranks),
               "unsettled": sum(r["unsettled"] for r in ranks)}
        if timeline:
            out["timeline"] = [e for r in ranks for e in r.get("timeline", ())]
        return out

    # --- a training step (programs/stepper.py) ---------------------------------

    def prepare_step(self, plan, jobs: dict, in_flight: int) -> None:
        """`plan`: sim/training_step.py's Plan; `jobs`: collective id -> Job."""
        first = next(iter(jobs.values()))
        collectives = [{"id": cid, "collective": job.collective, "algorithm": job.algorithm,
                        "count": job.elements,
                        "piece": max(1, job.piece_bytes // datatype(job.dtype).size)}
                       for cid, job in jobs.items()]
        transport = self._transport(first)
        self.send({"cmd": "step_setup", "step": {
            "collectives": collectives, "initial": plan.initial, "in_flight": in_flight,
            "tasks": [{k: t[k] for k in ("seconds", "needs", "releases", "kind", "layer")}
                      for t in plan.compute], **transport}})
        self.collect("setup_done", timeout=60 + 2 * self.n + len(collectives))

    def prepare_parallel(self, step: dict, job: Job) -> None:
        """A hybrid step (sim/hybrid_step.py): `step` holds its collectives
        (each over its `members`), each rank's tasks and first collectives;
        `job` how the ranks move the data."""
        self.send({"cmd": "step_setup", "step": {**step, **self._transport(job)}})
        self.collect("setup_done", timeout=60 + 2 * self.n + len(step["collectives"]))

    def step(self, i: int, timeout: float, lead: float = 0.0) -> List[dict]:
        """One step on every rank: each rank's reply (stepper.py). `lead`:
        more time before the common start, for the agents to reset their
        buffers first."""
        start = time.monotonic() + 0.02 + 0.002 * self.n + lead
        self.send({"cmd": "step", "iter": i, "at": start})
        return self.collect("step_done", timeout)
