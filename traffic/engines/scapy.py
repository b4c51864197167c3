"""The Scapy engine (programs/roce.py): the schedule's transfers as
RoCEv2 frames, paced at the link rate, a barrier per step. It moves no real
data: it counts frames sent and lost (and, under spray, reordered)."""

from __future__ import annotations

import sys
from typing import Sequence

from collectives import schedules
from traffic.engines import Engine, Job, register
from traffic.engines.rank_processes import AgentProcesses
from collectives.metrics import TYPE_SIZE
from policies import policy


@register
class RoceAgents(AgentProcesses, Engine):
    name, help = "scapy", "as RoCEv2 packets"
    checks_data, needs_lab, max_ranks = False, True, 256
    EXTRAS = ("frames_sent", "frames_lost", "pieces", "reordered")

    def __init__(self, fabric, ranks: Sequence[str], lab):
        self.fabric = fabric
        ips = ",".join(fabric.endpoint(s).ip for s in ranks)
        macs = ",".join(fabric.endpoint(s).mac for s in ranks)
        super().__init__(lab, ranks, lambda group, s: [
            sys.executable, "-m", "programs.roce", "--rank", str(group[0]), "--intf",
            fabric.endpoint(s).intf, "--addresses", ips, "--macs", macs])

    def prepare(self, job: Job) -> None:
        sched = schedules.build(job.collective, job.algorithm, self.n, job.count,
                                schedules.RankLayout(job.root, local=job.local))
        transfers = [(step, src, dst, n * TYPE_SIZE) for step, src, dst, n in schedules.transfers(sched)]
        self.steps = sorted({t[0] for t in transfers})
        rate = self.fabric.nic_rate_mbit
        self.send({"cmd": "setup", "transfers": transfers, "channels": job.channels,
                   "rate_mbit": rate,
                   "spray": policy(self.fabric.policy).roce_paths(self.fabric.routing.entropy)})
        self.frames = sum(r["frames"] for r in self.collect("setup_done", timeout=600))

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        self.send({"cmd": "reset"})
        self.collect("reset_done")
        t0, expected, received, sent, reordered = None, 0, 0, 0, 0
        for step in self.steps:
            self.send({"cmd": "step", "step": step})
            ranks = self.collect("step_done", timeout)
            t0 = min(r["t0"] for r in ranks) if t0 is None else t0
            t1 = max(r["t1"] for r in ranks)
            expected += sum(r["expected"] for r in ranks)
            received += sum(r["received"] for r in ranks)
            sent += sum(r["sent"] for r in ranks)
            reordered = sum(r["reordered"] for r in ranks)     # each rank's, so far
        return {"t0": t0, "t1": t1, "seconds": t1 - t0, "wrong": None, "bad_chunk_elements": None,
                "frames_sent": sent, "frames_expected": expected, "frames_lost": expected - received,
                "pieces": received, "reordered": reordered}
