"""The controller a lab is given, as Mininet is given one (`Mininet(controller=...)`):

    Lab(fabric, run_dir)                                   # OsKenController, on loopback
    Lab(fabric, run_dir, controller=OsKenController(ip))   # one chosen here
    SliceLab(..., controller=RemoteController(ip, port))   # one running elsewhere

OsKenController runs the `controller` package (os-ken) as a child process of
the lab: it listens only on `ip` (loopback by default), writes its status to
a file in the lab's folder, and is waited for until it accepts connections.
RemoteController is one the lab does not run (the head's, for a machine's
part of a cluster run): its switches connect to it, and nothing here starts
or stops it. A fabric whose policy routes without a controller (spanning
tree) is given none. Both kinds answer what lab/protocol.py's
`Controller` says.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, List, Optional

from lab import sandbox
from lab.host import LabError
from lab.processes import cpu_seconds, stop_process
from lab.progress_wait import wait_progressing

REPO = Path(__file__).resolve().parent.parent
# os-ken listens after about 1 s of its CPU here; a controller that used this
# much without listening is stuck. The wall-clock cap only catches one that
# hangs without using CPU.
CONTROLLER_START_CPU_S, CONTROLLER_START_WALL_S = 60.0, 900.0


def free_port(ip: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


class OsKenController:
    """The os-ken controller, started by the lab as a child process of its own."""

    def __init__(self, ip: str = "127.0.0.1", options: Iterable[str] = ()):
        self.ip = ip                          # where the switches find it
        self.options: List[str] = list(options)   # more of its command line (TLS, say)
        self.port: Optional[int] = None
        self.process: Optional[subprocess.Popen] = None
        self.log: Optional[Path] = None
        self.status_path: Optional[Path] = None

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process is not None else None

    def start(self, spec: dict, run_dir: Path, verbose: bool = False,
              track: Callable[[subprocess.Popen], None] = lambda proc: None) -> None:
        """Start it on the fabric `spec` with its files in `run_dir`, `track`
        told of its process the moment it exists, and wait until it listens."""
        spec_path = run_dir / "fabric.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        self.status_path = run_dir / "controller-status.json"
        self.status_path.unlink(missing_ok=True)
        self.port = free_port(self.ip)
        cmd = [sys.executable, "-m", "controller", "--spec", str(spec_path),
               "--status", str(self.status_path), "--port", str(self.port),
               "--host", self.ip] + self.options
        if verbose:
            cmd.append("--verbose")
        self.log = run_dir / "controller.log"
        with open(self.log, "w") as logf:
            # Its own session: a Ctrl-C in the terminal reaches the lab, which
            # then stops the controller in order.
            self.process = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            preexec_fn=sandbox.die_with_parent)
        track(self.process)
        self._wait_listening()

    def _wait_listening(self) -> None:
        """Bounded by the controller's progress, not the clock: on a loaded
        host (or in a VM without KVM) starting os-ken takes minutes of wall
        time but only seconds of its CPU. It fails when the controller exits,
        or has used CONTROLLER_START_CPU_S of CPU and still does not listen."""
        deadline = time.monotonic() + CONTROLLER_START_WALL_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise LabError("the controller exited while starting: "
                               f"{self.log_tail()} (log: {self.log})")
            try:
                socket.create_connection((self.ip, self.port), timeout=0.5).close()
                return
            except OSError:
                if cpu_seconds(self.process.pid) > CONTROLLER_START_CPU_S:
                    break
                time.sleep(0.1)
        raise LabError(f"the controller did not listen on {self.ip}:{self.port} "
                       f"after {cpu_seconds(self.process.pid):.0f} s of CPU (log: {self.log})")

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)

    def status(self) -> dict:
        """Its last status (ports down, groups, adaptive placements)."""
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError, AttributeError):
            return {}

    def wait_programmed(self, switches, timeout: float = 60,
                        until=lambda status: True) -> dict:
        """Wait until it has programmed every one of `switches` with a plan
        whose status satisfies `until` (say, a port known to be down).
        Bounded by progress, not the clock (lab/progress_wait.py): it gives up
        when neither its status nor its CPU time has moved for `timeout`
        seconds, or it has used CONTROLLER_START_CPU_S of CPU in the wait,
        or after CONTROLLER_START_WALL_S."""
        want = set(switches)
        seen = {"status": {}}
        pid = self.process.pid
        cpu0 = cpu_seconds(pid)

        def ready():
            if self.process.poll() is not None:
                raise LabError(f"the controller died: {self.log_tail()} (log: {self.log})")
            status = seen["status"] = self.status()
            if status.get("errors"):
                raise LabError(f"the controller reports: {status['errors'][0]}")
            return want <= set(status.get("programmed", ())) and until(status)

        waited = wait_progressing(
            ready, lambda: (json.dumps(seen["status"], sort_keys=True), int(cpu_seconds(pid))),
            stall_s=timeout, cap_s=CONTROLLER_START_WALL_S,
            spent=lambda: cpu_seconds(pid) - cpu0 > CONTROLLER_START_CPU_S)
        status = seen["status"]
        if waited.ready:
            return status
        why = waited.reason("the controller")
        missing = sorted(want - set(status.get("programmed", ())))
        if not missing and status.get("down_ports"):
            raise LabError(f"every switch is programmed, but ports are still down "
                           f"({', '.join(status['down_ports'][:8])}) and {why} (with "
                           "routing.bfd_ms a port is up only once its BFD session is)")
        raise LabError(f"the controller had not programmed {', '.join(missing) or 'the switches'}"
                       f": {why} (log: {self.log})")

    def log_tail(self) -> str:
        try:
            lines = [l for l in self.log.read_text().splitlines() if l.strip()]
        except (OSError, AttributeError):
            lines = []
        return lines[-1].strip() if lines else "no output"


class RemoteController:
    """A controller this lab does not run: its switches connect to `ip`:`port`."""
    process = pid = log = None

    def __init__(self, ip: str, port: int):
        self.ip, self.port = ip, port

    def start(self, spec: dict, run_dir: Path, verbose: bool = False,
              track: Callable[[subprocess.Popen], None] = lambda proc: None) -> None:
        """Nothing to start: it runs elsewhere."""

    def running(self) -> bool:
        return False

    def stop(self) -> None:
        """Nothing to stop: it runs elsewhere."""

    def status(self) -> dict:
        return {}

    def wait_programmed(self, switches, timeout: float = 60,
                        until=lambda status: True) -> dict:
        raise LabError(f"the controller at {self.ip}:{self.port} runs elsewhere: "
                       "it is asked there whether the switches are programmed")
