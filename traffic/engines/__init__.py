"""Replay engines: drive a collective across a live lab and time it.

- `RankAgents` (the default): one traffic/agent.py per rank in its server's
  namespace, real data over TCP, every piece checked, result verified.
- `iperf3_replay`: the same schedule's transfers as iperf3 flows, step by step
  (a barrier per step: iperf3 cannot wait for data it has not received).
- `RoceAgents`: the Scapy engine (traffic/roce.py), RoCEv2 frames per step.

Every engine returns, per iteration, the collective's time: from the first
rank's start to the last rank's end, on the clock all namespaces share.
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
import time
from typing import Dict, List, Sequence

from traffic import schedules as S
from traffic.checks import CheckError, wait_listening
from traffic.metrics import TYPE_SIZE

AGENT_PORT = 7000


class AgentProcesses:
    """One long-lived process per rank in its server's namespace, driven with
    JSON lines on stdin and answering with JSON lines on stdout."""

    def __init__(self, lab, servers: Sequence[str], argv_for_rank, timeout: float = 60):
        self.lab, self.servers, self.timeout = lab, list(servers), timeout
        self.procs = [lab.popen(s, argv_for_rank(r, s), stdin=subprocess.PIPE, text=True,
                                bufsize=1) for r, s in enumerate(self.servers)]
        self.selector = selectors.DefaultSelector()
        for rank, proc in enumerate(self.procs):
            self.selector.register(proc.stdout, selectors.EVENT_READ, rank)
        self.collect("ready")

    @property
    def n(self) -> int:
        return len(self.procs)

    def send(self, msg: dict) -> None:
        line = json.dumps(msg) + "\n"
        for rank, proc in enumerate(self.procs):
            try:
                proc.stdin.write(line)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise CheckError(f"the rank {rank} agent ({self.servers[rank]}) is gone") from None

    def collect(self, event: str, timeout: float = None) -> List[dict]:
        """One `event` line from every process; an error line from any is raised."""
        replies: Dict[int, dict] = {}
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(replies) < self.n:
            left = deadline - time.monotonic()
            if left <= 0:
                late = [self.servers[r] for r in range(self.n) if r not in replies]
                raise CheckError(f"agents on {', '.join(late[:4])} did not report "
                                 f"'{event}' within {timeout or self.timeout:.0f} s")
            for key, _ in self.selector.select(timeout=left):
                line = key.fileobj.readline()
                if not line:
                    err = self.procs[key.data].stderr.read()[-300:]
                    raise CheckError(f"the rank {key.data} agent exited: {err.strip()}")
                try:
                    msg = json.loads(line)
                except ValueError:
                    raise CheckError(f"the rank {key.data} agent said {line.strip()[:200]!r}") \
                        from None
                if msg.get("event") == "error":
                    raise CheckError(f"rank {msg['rank']} ({self.servers[msg['rank']]}): "
                                     f"{msg['message']}")
                replies[key.data] = msg
        return [replies[r] for r in range(self.n)]

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
        except CheckError:
            pass
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream:
                    stream.close()
        self.selector.close()


def _address(fabric, src: str, dst: str) -> str:
    """How `src` reaches `dst`: over NVLink inside a server, else the network."""
    a, b = fabric.server(src), fabric.server(dst)
    return b.nv_ip if b.nv_ip and a.server == b.server else b.ip


class RankAgents(AgentProcesses):
    """The default engine: traffic/agent.py per rank, real data."""

    def __init__(self, lab, servers: Sequence[str], port: int = AGENT_PORT):
        hosts = [lab.fabric.server(s) for s in servers]
        ips = ",".join(h.ip for h in hosts)
        nvlink = ",".join(h.nv_ip for h in hosts)
        boxes = ",".join(h.server for h in hosts)
        super().__init__(lab, servers, lambda r, s: [
            sys.executable, "-m", "traffic.agent", "--rank", str(r), "--addresses", ips,
            "--port", str(port), "--nvlink", nvlink, "--servers", boxes])

    def setup(self, collective, algorithm, count, root=0, piece_bytes=65536, channels=1,
              local=1):
        self.send({"cmd": "setup", "collective": collective, "algorithm": algorithm,
                   "count": count, "root": root, "piece": max(1, piece_bytes // TYPE_SIZE),
                   "channels": channels, "local": local})
        self.collect("setup_done")

    def iteration(self, i: int, timeout: float, timeline: bool = False) -> dict:
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


class RoceAgents(AgentProcesses):
    """The Scapy engine (traffic/roce.py): RoCEv2 frames, a barrier per step."""

    def __init__(self, lab, servers: Sequence[str]):
        fabric = lab.fabric
        ips = ",".join(fabric.server(s).ip for s in servers)
        macs = ",".join(fabric.server(s).mac for s in servers)
        super().__init__(lab, servers, lambda r, s: [
            sys.executable, "-m", "traffic.roce", "--rank", str(r), "--intf",
            fabric.server(s).intf, "--addresses", ips, "--macs", macs])

    def setup(self, collective, algorithm, count, root=0, piece_bytes=0, channels=1, local=1):
        sched = S.build(collective, algorithm, self.n, count, root, local=local)
        transfers = [(step, src, dst, n * TYPE_SIZE) for step, src, dst, n in S.transfers(sched)]
        self.steps = sorted({t[0] for t in transfers})
        rate = self.lab.fabric.spec["links"]["server_leaf"]["rate_mbit"]
        self.send({"cmd": "setup", "transfers": transfers, "channels": channels, "rate_mbit": rate})
        self.frames = sum(r["frames"] for r in self.collect("setup_done", timeout=600))

    def iteration(self, i: int, timeout: float) -> dict:
        self.send({"cmd": "reset"})
        self.collect("reset_done")
        t0, expected, received, sent = None, 0, 0, 0
        for step in self.steps:
            self.send({"cmd": "step", "step": step})
            ranks = self.collect("step_done", timeout)
            t0 = min(r["t0"] for r in ranks) if t0 is None else t0
            t1 = max(r["t1"] for r in ranks)
            expected += sum(r["expected"] for r in ranks)
            received += sum(r["received"] for r in ranks)
            sent += sum(r["sent"] for r in ranks)
        return {"t0": t0, "t1": t1, "seconds": t1 - t0, "wrong": None, "bad_chunk_elements": None,
                "frames_sent": sent, "frames_expected": expected, "frames_lost": expected - received}


class Iperf3Replay:
    """The schedule's transfers as iperf3 flows: per step, every transfer at
    once (`-n` bytes, `-P channels`), then the next step. A persistent iperf3
    server per (receiver, sender) pair listens on 5200 + sender rank."""

    BASE_PORT = 5200

    def __init__(self, lab, servers: Sequence[str]):
        self.lab, self.servers = lab, list(servers)
        self.procs = []
        pairs = [(dst, src) for dst in self.servers for src in range(len(self.servers))
                 if self.servers[src] != dst]
        for dst, src in pairs:
            self.procs.append(lab.popen(dst, ["iperf3", "-s", "-p", str(self.BASE_PORT + src)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for dst, src in pairs:
            wait_listening(lab, dst, self.BASE_PORT + src)

    @property
    def n(self) -> int:
        return len(self.servers)

    def run(self, collective, algorithm, count, root=0, channels=1, local=1) -> dict:
        sched = S.build(collective, algorithm, self.n, count, root, local=local)
        by_step: Dict[int, Dict[tuple, int]] = {}
        for step, src, dst, elements in S.transfers(sched):
            pair = by_step.setdefault(step, {})
            pair[(src, dst)] = pair.get((src, dst), 0) + elements * TYPE_SIZE
        t0 = time.monotonic()
        steps, retrans = [], 0
        for step in sorted(by_step):
            ts = time.monotonic()
            clients = []
            for (src, dst), nbytes in sorted(by_step[step].items()):
                ip = _address(self.lab.fabric, self.servers[src], self.servers[dst])
                # -n counts whole writes of -l bytes: keep writes within the transfer
                length = max(1, min(128 * 1024, -(-nbytes // channels)))
                clients.append(self.lab.popen(self.servers[src], [
                    "iperf3", "-c", ip, "-p", str(self.BASE_PORT + src), "-n", str(nbytes),
                    "-l", str(length), "-P", str(channels), "-J"], text=True))
            for proc in clients:
                out, _ = proc.communicate(timeout=600)
                try:
                    data = json.loads(out)
                except ValueError:
                    raise CheckError(f"iperf3 gave no JSON: {out.strip()[-200:]!r}") from None
                if "error" in data:
                    raise CheckError(f"iperf3: {data['error']}")
                retrans += data["end"].get("sum_sent", {}).get("retransmits", 0)
            steps.append(time.monotonic() - ts)
        t1 = time.monotonic()
        return {"t0": t0, "t1": t1, "seconds": t1 - t0, "step_seconds": steps,
                "retransmits": retrans, "wrong": None, "bad_chunk_elements": None}

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
