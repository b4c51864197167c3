"""What runs beside the collective for the whole sweep: a latency probe
between two endpoints, and optional cross traffic (an iperf3 TCP flow the
collective must share the fabric with, as in a cluster running other jobs)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from typing import List

from lab.processes import stop_process, tree_cpu_seconds
from lab.progress_wait import CAP_S, STALL_S, wait_progressing
from lab.reachability import wait_listening
from collectives import metrics

PROBE_PORT = 9000
CROSS_PORT = 5999
FIRST_REPLY_LOST = 3000     # 30 s of probes at full speed, sent and lost: no path


class CrossTraffic:
    """A background iperf3 TCP flow between two endpoints."""

    def __init__(self, lab, src: str, dst: str):
        self.src, self.dst = src, dst
        self.server = lab.popen(dst, ["iperf3", "-s", "-1", "-p", str(CROSS_PORT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(lab, dst, CROSS_PORT, self.server)
        self.client = lab.popen(src, ["iperf3", "-c", lab.fabric.endpoint(dst).ip, "-p",
                                      str(CROSS_PORT), "-t", "86400", "-J"], text=True)

    def stop(self) -> dict:
        """Stop the flow (iperf3 reports what it did when interrupted)."""
        try:
            self.client.send_signal(signal.SIGINT)
            out, _ = self.client.communicate(timeout=15)
            self.server.wait(timeout=15)
        except (subprocess.TimeoutExpired, OSError) as exc:
            return {"src": self.src, "dst": self.dst, "error": str(exc)}
        try:
            # an interrupted iperf3 has only the sender's side of the summary
            sent = json.loads(out)["end"]["sum_sent"]
            return {"src": self.src, "dst": self.dst, "mbit_s": sent["bits_per_second"] / 1e6,
                    "seconds": sent["seconds"], "retransmits": sent.get("retransmits", 0)}
        except (ValueError, KeyError):
            return {"src": self.src, "dst": self.dst, "error": "iperf3 gave no summary"}


class Prober:
    """A latency probe from one endpoint to another, read in the background."""

    def __init__(self, lab, src: str, dst: str, interval: float = 0.01):
        self.src, self.dst = src, dst
        self.echo = lab.popen(dst, [sys.executable, "-m", "programs.probe", "echo",
                                    "--port", str(PROBE_PORT)], text=True)
        self.echo.stdout.readline()                         # {"listening": ...}
        self.ping = lab.popen(src, [sys.executable, "-m", "programs.probe", "ping",
                                    "--dst", lab.fabric.endpoint(dst).ip,
                                    "--port", str(PROBE_PORT), "--interval", str(interval)],
                              text=True)
        self.samples: List[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.ping.stdout:
            self.samples.append(json.loads(line))

    def wait_first_reply(self, lost: int = FIRST_REPLY_LOST) -> bool:
        """Wait until a probe has come back (the processes have started and
        ARP is resolved, however slow the host): an idle window measured
        from then holds samples. Bounded by the probes' progress: False once
        `lost` probes were sent and lost, when the pinger exits, or when
        neither a sample came nor the probes used CPU for STALL_S."""
        def answered():
            if any("rtt" in s for s in list(self.samples)):
                return "yes"
            return "gone" if self.ping.poll() is not None else None

        waited = wait_progressing(
            answered,
            lambda: (len(self.samples), tree_cpu_seconds(self.ping.pid, self.echo.pid)),
            spent=lambda: sum(1 for s in list(self.samples) if s.get("lost")) >= lost,
            stall_s=STALL_S, cap_s=CAP_S, interval=0.1)
        return waited.value == "yes"

    def between(self, t0: float, t1: float) -> List[dict]:
        return [s for s in list(self.samples) if t0 <= s["t"] <= t1]

    def summary(self, t0: float, t1: float) -> dict:
        span = self.between(t0, t1)
        out = metrics.latency_summary(s["rtt"] for s in span if "rtt" in s)
        out["lost"] = sum(1 for s in span if s.get("lost"))
        return out

    def stop(self) -> None:
        """Stop the pinger, read what it wrote to the end, then stop the echo."""
        if self.ping.poll() is None:
            self.ping.terminate()
        try:
            self.ping.wait(5)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(timeout=5)
        stop_process(self.ping, grace=1, ask=False)
        stop_process(self.echo, grace=5)
