"""The iperf3 engine: the schedule's transfers as iperf3 flows, step by step.

Per step, every transfer at once (`-n` bytes, `-P channels`), then the next
step: a barrier per step, since iperf3 cannot wait for data it has not
received. A persistent iperf3 server per (receiver, sender) pair listens on
5200 + sender rank. Peers in the same server are reached over NVLink."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Dict, Sequence

from lab.processes import CheckError, communicate_progressing, stop_process
from lab.reachability import wait_listening
from collectives import schedules
from traffic.engines import Engine, Job, register
from collectives.metrics import TYPE_SIZE

BASE_PORT = 5200


def address(fabric, src: str, dst: str) -> str:
    """How `src` reaches `dst`: over NVLink inside a server, else the network."""
    a, b = fabric.endpoint(src), fabric.endpoint(dst)
    return b.nv_ip if b.nv_ip and a.server == b.server else b.ip


@register
class Iperf3Replay(Engine):
    name, help = "iperf3", "the same transfers as iperf3 flows"
    checks_data, needs_lab = False, True
    EXTRAS = ("retransmits",)

    def __init__(self, fabric, ranks: Sequence[str], lab):
        self.fabric, self.lab, self.ranks = fabric, lab, list(ranks)
        self.procs = []
        pairs = [(dst, src) for dst in self.ranks for src in range(len(self.ranks))
                 if self.ranks[src] != dst]
        for dst, src in pairs:
            self.procs.append(lab.popen(dst, ["iperf3", "-s", "-p", str(BASE_PORT + src)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for (dst, src), proc in zip(pairs, self.procs):
            wait_listening(lab, dst, BASE_PORT + src, proc)

    def prepare(self, job: Job) -> None:
        sched = schedules.build(job.collective, job.algorithm, len(self.ranks), job.count,
                                schedules.RankLayout(job.root, local=job.local))
        self.by_step: Dict[int, Dict[tuple, int]] = {}
        for step, src, dst, elements in schedules.transfers(sched):
            pair = self.by_step.setdefault(step, {})
            pair[(src, dst)] = pair.get((src, dst), 0) + elements * TYPE_SIZE
        self.channels = job.channels

    def iterate(self, i: int, timeout: float, timeline: bool = False) -> dict:
        t0 = time.monotonic()
        steps, retrans = [], 0
        for step in sorted(self.by_step):
            ts = time.monotonic()
            clients = [self._client(src, dst, nbytes)
                       for (src, dst), nbytes in sorted(self.by_step[step].items())]
            retrans += sum(_retransmits(proc) for proc in clients)
            steps.append(time.monotonic() - ts)
        t1 = time.monotonic()
        return {"t0": t0, "t1": t1, "seconds": t1 - t0, "step_seconds": steps,
                "retransmits": retrans, "wrong": None, "bad_chunk_elements": None}

    def _client(self, src: int, dst: int, nbytes: int) -> subprocess.Popen:
        ip = address(self.fabric, self.ranks[src], self.ranks[dst])
        # -n counts whole writes of -l bytes: keep writes within the transfer
        length = max(1, min(128 * 1024, -(-nbytes // self.channels)))
        return self.lab.popen(self.ranks[src], [
            "iperf3", "-c", ip, "-p", str(BASE_PORT + src), "-n", str(nbytes),
            "-l", str(length), "-P", str(self.channels), "-J"], text=True)

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            stop_process(proc, grace=5)


def _retransmits(proc: subprocess.Popen) -> int:
    out, _ = communicate_progressing(proc, "an iperf3 client")
    try:
        data = json.loads(out)
    except ValueError:
        raise CheckError(f"iperf3 gave no JSON: {out.strip()[-200:]!r}") from None
    if "error" in data:
        raise CheckError(f"iperf3: {data['error']}")
    return data["end"].get("sum_sent", {}).get("retransmits", 0)
