"""A running fabric: Mininet network, Open vSwitch bridges, the os-ken controller.

Life cycle (``with Lab(fabric, run_dir) as lab:``):

1. preflight: root, tools, Open vSwitch, free names, netem if asked for;
2. the controller starts as a child process, listening on loopback only, and
   is waited for until it accepts connections;
3. Mininet builds servers, bridges and veth links from the Fabric; the
   bridges start in one ovs-vsctl batch; every interface is shaped with tc;
4. readiness: the controller reports every switch programmed (a barrier after
   its routes came back), so no packet is sent before its route exists.

Teardown removes exactly what this lab created, in an order that never waits
on a Mininet shell (a Ctrl-C may have interrupted one mid-command): processes
the lab started in servers, bridges, switch-side veths (each takes its peer
with it), node shells, the controller. Signals are held off while it runs. A
record under /run/fabric-lab lists what the lab owns, so `run_topology.py
--cleanup` can remove what a SIGKILLed lab left behind, and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from topologies import system
from topologies.build import FabricTopo, host_setup_script, shaping_plan, switch_class
from topologies.fabric import Fabric
from topologies.system import LabError

REPO = Path(__file__).resolve().parent.parent
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


class _ControllerTarget:
    """What Mininet's OVSSwitch.start needs to know of a controller, without
    Mininet starting a shell for it: we run the controller ourselves."""
    name, protocol = "c0", "tcp"

    def __init__(self, port: int):
        self.port = port

    def IP(self):                       # noqa: N802 (Mininet's name)
        return "127.0.0.1"

    def start(self):
        pass

    def stop(self):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    def __init__(self, fabric: Fabric, run_dir: Path, datapath: str = "auto",
                 log=print, verbose: bool = False):
        self.fabric = fabric
        self.run_dir = Path(run_dir)
        self.requested_datapath = datapath
        self.datapath: Optional[str] = None
        self.log = log
        self.verbose = verbose
        self.net = None
        self.controller: Optional[subprocess.Popen] = None
        self.procs: List[subprocess.Popen] = []
        self.timings: Dict[str, float] = {}
        self.record_path: Optional[Path] = None
        self._stopped = False

    # --- start --------------------------------------------------------------------

    def __enter__(self) -> "Lab":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> None:
        t0 = time.monotonic()
        self.datapath = system.preflight(self.fabric, self.requested_datapath)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_record()
        if self.fabric.policy != "stp":
            self._start_controller()
        self.timings["controller_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        self._build_network()
        self.timings["build_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        if self.fabric.policy == "stp":
            self.status = self.wait_stp_converged()
        else:
            self.status = self.wait_programmed()
        self.timings["programmed_s"] = time.monotonic() - t2
        self.timings["start_s"] = time.monotonic() - t0

    def _start_controller(self) -> None:
        spec = self.run_dir / "fabric.json"
        spec.write_text(json.dumps(self.fabric.spec, indent=1))
        self.status_path = self.run_dir / "controller-status.json"
        self.status_path.unlink(missing_ok=True)
        self.of_port = free_port()
        cmd = [sys.executable, "-m", "controller", "--spec", str(spec),
               "--status", str(self.status_path), "--port", str(self.of_port)]
        if self.verbose:
            cmd.append("--verbose")
        self.controller_log = self.run_dir / "controller.log"
        with open(self.controller_log, "w") as logf:
            # Its own session: a Ctrl-C in the terminal reaches the lab, which
            # then stops the controller in order.
            self.controller = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
        self._write_record()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise LabError("the controller exited while starting: "
                               f"{self._log_tail()} (log: {self.controller_log})")
            try:
                socket.create_connection(("127.0.0.1", self.of_port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise LabError(f"the controller did not listen on 127.0.0.1:{self.of_port} within 30 s "
                       f"(log: {self.controller_log})")

    def _build_network(self) -> None:
        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host

        setLogLevel("info" if self.verbose else "output")   # output: what the CLI prints
        stp = self.fabric.policy == "stp"
        self.net = Mininet(topo=FabricTopo(fabric=self.fabric),
                           switch=switch_class(self.datapath, stp=stp),
                           host=Host, link=Link, controller=None, build=False,
                           autoSetMacs=False, inNamespace=False, listenPort=None,
                           waitConnected=False)
        self.net.controllers = [] if stp else [_ControllerTarget(self.of_port)]
        self.net.build()
        self._write_record()
        self.net.start()
        self.net.controllers = []      # the switches know it; Mininet need not
        self._write_record()
        self._shape()

    def _shape(self) -> None:
        plan = shaping_plan(self.fabric)
        servers = {h.name for h in self.fabric.servers}
        root_cmds = []
        for link in self.fabric.links:
            for node, intf in ((link.a, link.a_intf), (link.b, link.b_intf)):
                if node not in servers:
                    root_cmds += plan[intf]
        system.run(["tc", "-batch", "-"], input="\n".join(root_cmds) + "\n", timeout=120)
        for host in self.fabric.servers:
            out = self.net.get(host.name).cmd(host_setup_script(host.intf, plan[host.intf]))
            if "lab-host-ok" not in out:
                raise LabError(f"configuring {host.intf} failed: {out.strip()[-200:]}")

    def controller_status(self) -> dict:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def wait_programmed(self, timeout: float = 60, after_generation: int = -1) -> dict:
        """Wait until the controller has programmed every switch (and, if given,
        has applied a plan newer than `after_generation`)."""
        want = {s.name for s in self.fabric.switches}
        deadline = time.monotonic() + timeout
        status = {}
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                raise LabError(f"the controller died: {self._log_tail()} (log: {self.controller_log})")
            status = self.controller_status()
            if status.get("errors"):
                raise LabError(f"the controller reports: {status['errors'][0]}")
            if (want <= set(status.get("programmed", ()))
                    and status.get("generation", -1) > after_generation):
                return status
            time.sleep(0.05)
        missing = sorted(want - set(status.get("programmed", ())))
        raise LabError(f"the controller had not programmed {', '.join(missing) or 'the switches'} "
                       f"after {timeout:.0f} s (log: {self.controller_log})")

    def wait_stp_converged(self, timeout: float = 90) -> dict:
        """The STP baseline has no controller to ask: it is ready once the
        first server reaches every other one through the spanning tree."""
        first, *others = self.fabric.servers
        host = self.host(first.name)
        pending = [h.ip for h in others]
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            pending = [ip for ip in pending
                       if "1 received" not in host.cmd(f"ping -n -c1 -W1 {ip}")]
        if pending:
            raise LabError(f"spanning tree had not converged after {timeout:.0f} s "
                           f"({first.name} cannot reach {pending[0]})")
        return {"versions": {}}

    def _log_tail(self) -> str:
        try:
            lines = [l for l in self.controller_log.read_text().splitlines() if l.strip()]
        except OSError:
            lines = []
        return lines[-1].strip() if lines else "no output"

    # --- use -------------------------------------------------------------------------

    def host(self, name: str):
        return self.net.get(name)

    def popen(self, server: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a process inside a server's namespace; the lab stops it at teardown."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = self.host(server).popen(args, **kwargs)
        self.procs.append(proc)
        self._write_record()
        return proc

    def set_link(self, a: str, b: str, up: bool, index: int = 0) -> None:
        """Take the index-th link between nodes a and b down or up (both ends)."""
        links = [l for l in self.fabric.links if {l.a, l.b} == {a, b}]
        link = links[index]
        for intf, node in ((link.a_intf, link.a), (link.b_intf, link.b)):
            self.host(node).cmd(f"ip link set dev {intf} {'up' if up else 'down'}")

    # --- teardown ----------------------------------------------------------------

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            t0 = time.monotonic()
            self._teardown()
            self.timings["teardown_s"] = time.monotonic() - t0
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _teardown(self) -> None:
        for proc in self.procs:
            _stop_process(proc)
        bridges = [s.name for s in self.fabric.switches]
        if self.net is not None:
            args = ["ovs-vsctl", "--timeout=20"]
            for br in bridges:
                args += ["--", "--if-exists", "del-br", br]
            system.run(args, timeout=60, check=False)
        # Switch-side veths: deleting one end deletes its peer, in a server's
        # namespace or not. Userspace bridges also leave a tap named after them.
        left = system.existing_interfaces()
        doomed = [n for n in system.lab_names(self.fabric) if n in left]
        if doomed:
            system.run(["ip", "-force", "-batch", "-"], check=False,
                       input="".join(f"link del dev {n}\n" for n in doomed), timeout=60)
        if self.net is not None:
            for node in self.net.hosts + self.net.switches:
                _stop_shell(node)
        if self.controller is not None:
            _stop_process(self.controller)
        if self.record_path is not None:
            self.record_path.unlink(missing_ok=True)

    def _write_record(self) -> None:
        shells = []
        if self.net is not None:
            shells = [n.shell.pid for n in self.net.hosts + self.net.switches if n.shell]
        record = {
            "fabric": self.fabric.source,
            "bridges": [s.name for s in self.fabric.switches],
            "interfaces": system.lab_names(self.fabric),
            "pids": shells + [p.pid for p in self.procs]
                    + ([self.controller.pid] if self.controller else []),
        }
        self.record_path = system.write_record(os.getpid(), record)


def _stop_process(proc: subprocess.Popen, grace: float = 3.0) -> None:
    if proc.poll() is None:
        try:
            proc.terminate()
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        except ProcessLookupError:
            pass
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream:
            stream.close()


def _stop_shell(node) -> None:
    """Kill a Mininet node's shell and reap it, without talking to it."""
    shell = getattr(node, "shell", None)
    if shell is None:
        return
    if shell.poll() is None:
        try:
            os.killpg(shell.pid, signal.SIGHUP)
            shell.wait(3)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait(5)
        except ProcessLookupError:
            pass
    # As Mininet's own cleanup does: the pty master through the file object
    # that wraps it (closing the bare fd would let that object close a reused
    # number later), the slave end directly.
    node.stdin.close()
    os.close(node.slave)
    node.shell = None


def cleanup_dead_labs(log=print) -> int:
    """Remove what labs killed without teardown left behind, from their records.
    Only pids whose command line is still a lab's are signalled."""
    count = 0
    for path in system.dead_records():
        record = json.loads(path.read_text())
        for pid in record.get("pids", []):
            cmd = system.cmdline(pid)
            if "mininet:" in cmd or "-m controller" in cmd or "mnexec" in cmd:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        args = ["ovs-vsctl", "--timeout=20"]
        for br in record.get("bridges", []):
            args += ["--", "--if-exists", "del-br", br]
        system.run(args, check=False)
        left = system.existing_interfaces()
        doomed = [n for n in record.get("interfaces", []) if n in left]
        if doomed:
            system.run(["ip", "-force", "-batch", "-"], check=False,
                       input="".join(f"link del dev {n}\n" for n in doomed))
        log(f"cleaned up after lab {path.stem} ({record.get('fabric')}): "
            f"{len(record.get('bridges', []))} bridges, {len(doomed)} interfaces")
        path.unlink()
        count += 1
    return count
