"""A collective sweep on a live lab, measured the way nccl-tests and a fabric
engineer would: per message size, the collective's time, algbw and busbw, the
number of wrong elements, latency probes under load against the idle fabric,
per-link bytes, peak utilisation, queue peaks and drops, ECMP imbalance per
leaf, the alpha-beta prediction, and whether the host kept up.
"""

from __future__ import annotations

import json
import math
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, List

from traffic import metrics as M
from traffic import schedules as S
from traffic.checks import wait_listening
from traffic.monitor import Monitor, fidelity
from traffic.replay import Iperf3Replay, RankAgents, RoceAgents

ENGINES = ("agents", "iperf3", "scapy")
HOST_BOUND_RATIO, HOST_BOUND_CPU = 2.0, 80.0   # slower than the model, with the CPU busy
PROBE_PORT = 9000


@dataclass
class Experiment:
    collective: str = "allreduce"
    algorithm: str = "ring"
    engine: str = "agents"
    minbytes: int = 32 * 1024
    maxbytes: int = 2 * 1024 * 1024
    stepfactor: float = 4
    iters: int = 5
    warmup: int = 1
    root: int = 0
    channels: int = 1
    piece_bytes: int = 64 * 1024
    probe: List[str] = field(default_factory=list)     # [src, dst]; default first and last rank
    ranks: List[str] = field(default_factory=list)     # servers in rank order; default all
    idle_seconds: float = 1.5                          # idle-latency measurement first
    cross: List[str] = field(default_factory=list)     # [src, dst]: iperf3 cross traffic

    def check(self, n_ranks: int, local: int = 1) -> None:
        """Raise ValueError with one sentence for an impossible experiment."""
        if self.collective not in S.COLLECTIVES:
            raise ValueError(f"unknown collective {self.collective!r}; "
                             f"expected one of {', '.join(S.COLLECTIVES)}")
        if self.algorithm not in S.ALGORITHMS[self.collective]:
            raise ValueError(f"no {self.algorithm!r} algorithm for {self.collective}; expected "
                             f"one of {', '.join(S.ALGORITHMS[self.collective])}")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; expected one of {', '.join(ENGINES)}")
        if n_ranks < 2:
            raise ValueError("a collective needs at least 2 ranks (servers)")
        for name, pair in (("probe", self.probe), ("cross traffic", self.cross)):
            if pair and len(set(pair)) != 2:
                raise ValueError(f"{name} needs two different servers, got {','.join(pair)}")
        if self.engine == "scapy" and n_ranks > 256:
            raise ValueError("the scapy engine numbers queue pairs for at most 256 ranks")
        if not 1 <= self.channels <= 16:
            raise ValueError(f"channels must be 1 to 16, got {self.channels}")
        if self.warmup < 0 or self.iters < 1:
            raise ValueError("expected at least 1 timed iteration and no negative warm-up")
        if self.piece_bytes < 64:
            raise ValueError(f"piece size must be at least 64 bytes, got {self.piece_bytes}")
        if self.algorithm == "hierarchical" and local == 1:
            raise ValueError("hierarchical AllReduce needs servers with several GPUs "
                             "(server.gpus), ranks in whole servers; with one GPU per server "
                             "it is the ring")
        if self.algorithm == "hierarchical" and n_ranks % local:
            raise ValueError(f"hierarchical AllReduce needs whole servers: {n_ranks} ranks "
                             f"are not a multiple of {local} GPUs per server")
        if not 0 <= self.root < n_ranks:
            raise ValueError(f"root {self.root} is not a rank (0..{n_ranks - 1})")
        M.sweep_sizes(self.minbytes, self.maxbytes, self.stepfactor)


class CrossTraffic:
    """A background iperf3 TCP flow between two servers for the whole sweep:
    the collective then shares the fabric, as in a cluster running other jobs."""
    PORT = 5999

    def __init__(self, lab, src: str, dst: str):
        self.src, self.dst = src, dst
        self.server = lab.popen(dst, ["iperf3", "-s", "-1", "-p", str(self.PORT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(lab, dst, self.PORT)
        self.client = lab.popen(src, ["iperf3", "-c", lab.fabric.server(dst).ip, "-p",
                                      str(self.PORT), "-t", "86400", "-J"], text=True)

    def stop(self) -> dict:
        """Stop the flow (iperf3 reports what it did when interrupted)."""
        self.client.send_signal(signal.SIGINT)
        out, _ = self.client.communicate(timeout=15)
        self.server.wait(timeout=15)
        try:
            # an interrupted iperf3 has only the sender's side of the summary
            sent = json.loads(out)["end"]["sum_sent"]
            return {"src": self.src, "dst": self.dst, "mbit_s": sent["bits_per_second"] / 1e6,
                    "seconds": sent["seconds"], "retransmits": sent.get("retransmits", 0)}
        except (ValueError, KeyError):
            return {"src": self.src, "dst": self.dst, "error": "iperf3 gave no summary"}


class Prober:
    """A latency probe from one server to another, read in the background."""

    def __init__(self, lab, src: str, dst: str, interval: float = 0.01):
        self.src, self.dst = src, dst
        self.echo = lab.popen(dst, [sys.executable, "-m", "traffic.probe", "echo",
                                    "--port", str(PROBE_PORT)], text=True)
        self.echo.stdout.readline()                         # {"listening": ...}
        self.ping = lab.popen(src, [sys.executable, "-m", "traffic.probe", "ping",
                                    "--dst", lab.fabric.server(dst).ip, "--port", str(PROBE_PORT),
                                    "--interval", str(interval)], text=True)
        self.samples: List[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.ping.stdout:
            self.samples.append(json.loads(line))

    def between(self, t0: float, t1: float) -> List[dict]:
        return [s for s in list(self.samples) if t0 <= s["t"] <= t1]

    def summary(self, t0: float, t1: float) -> dict:
        span = self.between(t0, t1)
        out = M.latency_summary(s["rtt"] for s in span if "rtt" in s)
        out["lost"] = sum(1 for s in span if s.get("lost"))
        return out

    def stop(self) -> None:
        for proc in (self.ping, self.echo):
            proc.terminate()
            proc.wait(5)


def make_engine(lab, exp: Experiment, servers):
    if exp.engine == "agents":
        return RankAgents(lab, servers)
    if exp.engine == "iperf3":
        return Iperf3Replay(lab, servers)
    return RoceAgents(lab, servers)


def run_experiment(lab, exp: Experiment, results: Path,
                   progress: Callable[[str], None] = lambda msg: None) -> dict:
    fabric = lab.fabric
    servers = exp.ranks or [h.name for h in fabric.servers]
    n = len(servers)
    local = gpus_per_rank_server(fabric, servers)
    exp.check(n, local)
    server_of = {r: fabric.server(s).server for r, s in enumerate(servers)}
    nic_of = {r: (fabric.server(s).leaf, fabric.server(s).port) for r, s in enumerate(servers)}
    rate_intra = (fabric.spec["links"]["intra_node"] or {}).get("rate_mbit")
    beta_intra = M.beta_for_rate(rate_intra, fabric.mtu) if rate_intra else None
    probe = exp.probe or [servers[0], servers[-1]]
    rate = fabric.spec["links"]["server_leaf"]["rate_mbit"]
    beta = M.beta_for_rate(rate, fabric.mtu)
    monitor = Monitor(fabric).start()
    prober = Prober(lab, probe[0], probe[1])
    engine = cross = None
    cross_report = timeline = None
    runs = []
    try:
        progress("measuring idle latency")
        t_idle = time.monotonic()
        time.sleep(exp.idle_seconds)
        idle = prober.summary(t_idle, time.monotonic())
        alpha = idle["p50_us"] / 2e6 if not math.isnan(idle["p50_us"]) else 1e-4
        if exp.cross:
            cross = CrossTraffic(lab, *exp.cross)
        engine = make_engine(lab, exp, servers)
        sizes = M.sweep_sizes(exp.minbytes, exp.maxbytes, exp.stepfactor)
        for k, size in enumerate(sizes):
            count = S.round_count(exp.collective, n, size // M.TYPE_SIZE)
            predicted = M.predict_seconds(exp.collective, exp.algorithm, n, count, alpha, beta,
                                          exp.root, local, beta_intra, nic_of.__getitem__)
            split = M.traffic_split(S.build(exp.collective, exp.algorithm, n, count, exp.root,
                                            local=local), server_of.__getitem__)
            timeout = 60 + 20 * predicted
            label = f"[{k + 1}/{len(sizes)}] {exp.collective} {count * M.TYPE_SIZE} B"
            progress(f"{label}: setting up")
            if exp.engine == "iperf3":
                iters = []
                for i in range(exp.warmup + exp.iters):
                    progress(f"{label}: iteration {i + 1}/{exp.warmup + exp.iters}")
                    iters.append(engine.run(exp.collective, exp.algorithm, count, exp.root,
                                            exp.channels, local))
            else:
                engine.setup(exp.collective, exp.algorithm, count, exp.root, exp.piece_bytes,
                             exp.channels, local)
                iters = []
                total = exp.warmup + exp.iters
                for i in range(total):
                    progress(f"{label}: iteration {i + 1}/{total}")
                    if exp.engine == "agents":     # the step timeline of the very last one
                        last = k == len(sizes) - 1 and i == total - 1
                        iters.append(engine.iteration(i, timeout, timeline=last))
                    else:
                        iters.append(engine.iteration(i, timeout))
                if "timeline" in iters[-1]:
                    timeline = {"size_bytes": count * M.TYPE_SIZE, "events": [
                        {**e, "phase": S.phase(exp.algorithm, e["step"], n, local)}
                        for e in iters[-1].pop("timeline")]}
            monitor.wait_past(iters[-1]["t1"])
            runs.append(_run_record(exp, n, count, iters[exp.warmup:], predicted, rate,
                                    monitor, prober))
            runs[-1]["payload_bytes"] = {k: v * exp.iters for k, v in split.items()}
            runs[-1]["wire_bytes"] = wire_split(fabric, runs[-1]["links"])
    finally:
        if engine is not None:
            engine.close()
        if cross is not None:
            try:
                cross_report = cross.stop()
            except (subprocess.TimeoutExpired, OSError) as exc:
                cross_report = {"src": cross.src, "dst": cross.dst, "error": str(exc)}
        prober.stop()
        monitor.stop()
    results.mkdir(parents=True, exist_ok=True)
    (results / "samples.json").write_text(json.dumps(monitor.samples))
    (results / "probes.json").write_text(json.dumps(prober.samples))
    verdict = fidelity([r.pop("_window") for r in runs], fabric)
    slow = max((r["measured_over_predicted"] or 0 for r in runs), default=0)
    if slow > HOST_BOUND_RATIO and verdict["max_cpu_busy_pct"] > HOST_BOUND_CPU:
        verdict["host_bound"] = True
        verdict["advice"] = "; ".join(filter(None, [verdict.get("advice"), (
            f"a size took {slow:.1f}x the alpha-beta time while the CPU was "
            f"{verdict['max_cpu_busy_pct']:.0f}% busy: the rank processes, not the links, "
            "set the pace; lower link rates or fewer ranks measure the fabric instead")]))
    whole = monitor.window(monitor.samples[0]["t"], monitor.samples[-1]["t"])["links"]
    uplinks = {leaf.name: {l.a_intf: whole[l.a_intf]["tx_bytes"] for l in fabric.uplinks(leaf.name)}
               for leaf in fabric.leaves}
    progress("done")
    return {"experiment": asdict(exp), "ranks": servers, "gpus_per_server": local, "probe": probe, "idle_latency": idle,
            "alpha_s": alpha, "beta_s_per_byte": beta, "link_rate_mbit": rate, "runs": runs,
            "fidelity": verdict, "uplink_tx_bytes": uplinks, "cross_traffic": cross_report,
            "timeline": timeline}


def gpus_per_rank_server(fabric, servers) -> int:
    """GPUs per server when the ranks are whole multi-GPU servers in order
    (what the hierarchical algorithm groups by); 1 otherwise."""
    local = fabric.gpus_per_server
    if local > 1 and len(servers) % local == 0 and all(
            len({fabric.server(s).server for s in servers[i:i + local]}) == 1
            for i in range(0, len(servers), local)):
        return local
    return 1


def wire_split(fabric, links: dict) -> dict:
    """Bytes the switches put on intra-node links (towards GPUs, over the
    NVLink-class interconnect) and on the network's links towards servers."""
    out = {"intra_node": 0, "network_to_servers": 0}
    for link in fabric.links:
        if link.kind == "intra_node":
            out["intra_node"] += links.get(link.b_intf, {}).get("tx_bytes", 0)
        elif link.kind == "server_leaf":
            out["network_to_servers"] += links.get(link.b_intf, {}).get("tx_bytes", 0)
    return out


def _run_record(exp, n, count, iters, predicted, rate, monitor, prober) -> dict:
    size = count * M.TYPE_SIZE
    seconds = statistics.mean(i["seconds"] for i in iters)
    t0, t1 = iters[0]["t0"], iters[-1]["t1"]
    window = monitor.window(t0, t1)
    wrong = None if iters[0]["wrong"] is None else sum(i["wrong"] for i in iters)
    record = {
        "collective": exp.collective, "algorithm": exp.algorithm, "engine": exp.engine,
        # nccl-tests' count column: per rank where the buffer is n blocks
        "ranks": n, "size_bytes": size, "elements": count,
        "count": count // n if exp.collective in S.EQUAL_BLOCKS else count, "type": "float",
        "redop": "sum" if exp.collective in ("allreduce", "reducescatter", "reduce") else "none",
        "root": exp.root if exp.collective in S.ROOTED else -1,
        "iterations": len(iters), "time_s": seconds,
        "time_min_s": min(i["seconds"] for i in iters),
        "algbw_gbps": M.algbw_gbps(size, seconds),
        "busbw_gbps": M.busbw_gbps(exp.collective, n, size, seconds),
        "busbw_over_link": M.busbw_gbps(exp.collective, n, size, seconds) / (rate / 8e3),
        "wrong": wrong,
        "bad_chunk_elements": None if wrong is None else sum(i["bad_chunk_elements"] for i in iters),
        "predicted_s": predicted, "measured_over_predicted": seconds / predicted if predicted else None,
        "latency": prober.summary(t0, t1),
        "links": {intf: {k: v for k, v in l.items()} for intf, l in window["links"].items()},
        "ecmp_imbalance": window["ecmp_imbalance"],
        "cpu_busy_pct": window["cpu_busy_pct"], "ovs_core_pct": window["ovs_core_pct"],
        "_window": window,
    }
    for extra in ("frames_sent", "frames_lost", "retransmits"):
        if extra in iters[0]:
            record[extra] = sum(i[extra] for i in iters)
    return record
