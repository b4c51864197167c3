"""The default engine: one rank agent (traffic/programs/agent.py) per rank in
its endpoint's namespace, real float32 data over TCP, every piece checked and
the result verified."""

from __future__ import annotations

import sys
import time
from typing import Sequence

from lab.shaping import connection_windows
from traffic.engines import Engine, Job
from traffic.engines.processes import AgentProcesses
from traffic.metrics import TYPE_SIZE

AGENT_PORT = 7000


class RankAgents(AgentProcesses, Engine):
    def __init__(self, fabric, ranks: Sequence[str], lab, port: int = AGENT_PORT):
        hosts = [fabric.endpoint(s) for s in ranks]
        ips = ",".join(h.ip for h in hosts)
        nvlink = ",".join(h.nv_ip for h in hosts)
        boxes = ",".join(h.server for h in hosts)
        super().__init__(lab, ranks, lambda r, s: [
            sys.executable, "-m", "traffic.programs.agent", "--rank", str(r), "--addresses", ips,
            "--port", str(port), "--nvlink", nvlink, "--servers", boxes,
            "--windows", ",".join(map(str, connection_windows(fabric.links, fabric.mtu)))])

    def prepare(self, job: Job) -> None:
        self.send({"cmd": "setup", "collective": job.collective, "algorithm": job.algorithm,
                   "count": job.count, "root": job.root,
                   "piece": max(1, job.piece_bytes // TYPE_SIZE),
                   "channels": job.channels, "local": job.local})
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
               "bad_chunk_elements": sum(r["bad_chunk_elements"] for r in ranks)}
        if timeline:
            out["timeline"] = [e for r in ranks for e in r.get("timeline", ())]
        return out
