"""A running fabric: Mininet network, Open vSwitch bridges, the os-ken controller.

Life cycle (``with Lab(fabric, run_dir) as lab:``):

1. preflight: root, tools, Open vSwitch, free names, netem if asked for;
2. the controller it was given starts (lab/controller_process.py: by
   default os-ken as a child process, listening on loopback only) and is
   waited for until it accepts connections;
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

import contextlib
import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from lab import datapath, ecn, host, portmod, records, sandbox
from lab.controller_process import CONTROLLER_START_WALL_S, OsKenController
from lab.host import LabError
from lab.mininet_build import (FabricTopo, endpoint_intfs, host_setup_script, mesh_commands,
                               shaping_plan, switch_class, tracking)
from lab.counters import read_counters
from lab.shaping import frame_bytes, link_commands
from policies import policy
from lab.processes import is_mininet_shell, stop_process, stop_process_group
from lab.progress_wait import wait_progressing
from topologies.fabric import Fabric

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_LAB_NUMBERS = itertools.count(1)


# Above this many endpoints every host gets permanent neighbour entries for
# all others: first contact of n hosts with each other is n(n-1) ARP requests,
# and a Python controller answering 65,280 of them (256 GPUs) in a burst drops
# most. Below it, the controller's proxy ARP answers them.
STATIC_NEIGHBOURS_ABOVE = 64
# Mininet types a command into a node's shell through a terminal, which takes
# lines of at most 4095 characters: a longer one never ends, and the command
# never runs (a GPU with four shaped interfaces on a mesh wrote 5,110)
PTY_LINE_MAX = 4000

class _ControllerTarget:
    """What Mininet's OVSSwitch.start needs to know of a controller, without
    Mininet starting a shell for it: we run the controller ourselves."""
    name, protocol = "c0", "tcp"

    def __init__(self, port: int, ip: str = "127.0.0.1"):
        self.port, self.ip = port, ip

    def IP(self):                       # noqa: N802 (Mininet's name)
        return self.ip

    def start(self):
        pass

    def stop(self):
        pass


class Lab:
    """`controller`: the controller this lab's switches meet, a component as
    in Mininet (lab/controller_process.py): a class (made with no
    arguments) or an object; None for none. A fabric whose policy routes
    without one (spanning tree) is given none whatever was asked."""

    def __init__(self, fabric: Fabric, run_dir: Path, datapath: str = "auto",
                 log=print, verbose: bool = False, ovs_variant: Optional[str] = None,
                 controller=OsKenController):
        self.fabric = fabric
        # how its own ovs-vswitchd starts: a lab/datapath.py variant (None: the adopted one)
        self.ovs_variant = ovs_variant
        self.run_dir = Path(run_dir)
        self.requested_datapath = datapath
        self.datapath: Optional[str] = None
        self.warnings: List[str] = []        # what about the host bends the figures
        # ECN marking and DCTCP, where asked and possible: known once the lab shapes
        self.ecn = ecn.EcnPlan(asked=False, marking=False, dctcp=False)
        self.log = log
        self.verbose = verbose
        self.net = None
        if isinstance(controller, type):
            controller = controller()
        self.controller = controller if self.controlled else None
        self.processes: List[subprocess.Popen] = []   # every one Mininet started for us
        self.timings: Dict[str, float] = {}
        self.status: dict = {}               # the controller's when it was ready
        self.tag = f"{os.getpid()}-{next(_LAB_NUMBERS)}"
        self.record_path = records.RECORDS / f"{self.tag}.json"
        self.extra_names: List[str] = []     # root-namespace names beyond the model's
        self.neighbours = fabric.endpoints   # whom each server knows up front (big fabrics)
        self.connect_later = False           # switches meet the controller after the build
        self.sandbox: Optional[sandbox.Sandbox] = None
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
        """The one start every kind of lab shares, in five steps, each a hook
        a kind of lab overrides (ClusterLab: lab/cluster/cluster.py; the slice of one
        machine: lab/cluster/machine.py): `check` what must hold before anything is
        made; `claim` its names under the lock, then the record that claims
        them; the controller it was given started; `build` the network;
        `settle` until it forwards. Timings of each go in `timings`."""
        t0 = time.monotonic()
        if self.controlled and self.controller is None:
            raise LabError(f"the {self.fabric.policy} policy routes through a controller, "
                           "and this lab was given none")
        self.check()
        with records.names_lock():
            self.claim()
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._write_record()            # claims the names before the lock goes
        if self.sandboxed:
            self._enter_sandbox()
        if self.controller is not None:
            self.controller.start(self.fabric.spec, self.run_dir, self.verbose, self._track)
        self.timings["controller_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        self.build()
        self.timings["build_s"] = time.monotonic() - t1
        t2 = time.monotonic()
        self.settle()
        self.timings["programmed_s"] = time.monotonic() - t2
        self.timings["start_s"] = time.monotonic() - t0

    # the hooks of start(), as a lab on this host alone does them

    def check(self) -> None:
        """What must hold before anything is made (LabError, one sentence)."""

    def claim(self) -> None:
        """Under the names lock: the datapath, and the names checked free (a
        lab in its own sandbox claims none of the host's)."""
        self.datapath = host.preflight(self.fabric, self.requested_datapath, self.extra_names,
                                       own_ovs=self.sandboxed)
        if self.datapath == "user":
            self.warnings.extend(filter(None, [host.ovs_send_buffer_warning()]))

    # A lab on this host alone runs in namespaces of its own, with its own
    # Open vSwitch (lab/sandbox.py): it meets no other lab, and nothing of it
    # can outlive it. A lab spread over machines is not: its switches meet
    # the tunnels and the controller on the machines' own network.
    sandboxed = True

    def _enter_sandbox(self) -> None:
        from mininet.net import Mininet
        Mininet.init()           # its host-wide limits, from the host's namespace, once
        # its Open vSwitch as bench/datapath_bench.py found it moves the most
        # per CPU-second, the shaping intact (lab/datapath.py), unless asked otherwise
        variant = self.ovs_variant or datapath.ADOPTED
        self.sandbox = sandbox.Sandbox(
            records.RECORDS / f"{self.tag}.ovs", self.run_dir / "ovs", on_process=self._track,
            ovs_options=datapath.vswitchd_args(variant), ovs_env=datapath.vswitchd_env(variant),
            ovs_config=datapath.vsctl_other_config(variant))
        try:
            self.sandbox.enter()
        except (sandbox.SandboxError, subprocess.CalledProcessError) as exc:
            raise LabError(f"this lab's own namespaces and Open vSwitch could not start: {exc}")

    def _here(self) -> None:
        """Called from a thread other than the lab's (a monitor, a kept lab
        answering a client): it joins the lab's namespaces first."""
        if self.sandbox is not None:
            self.sandbox.join()

    def build(self) -> None:
        self._build_network()

    def settle(self) -> None:
        """Until the fabric forwards: BFD up, and every switch programmed (or
        spanning tree converged)."""
        self._bfd()
        if not self.controlled:
            self.status = self.wait_stp_converged()
        else:
            self.status = self.wait_programmed(until=self.ready)

    # --- what runs use (lab/protocol.py) ---------------------------------------------

    multi_machine = False                   # across several machines

    def hosts(self) -> List[str]:
        """The machines the lab runs on (this one alone: none named)."""
        return []

    def summary(self) -> Optional[dict]:
        """Its machines, controller and tunnels, when spread (None here)."""
        return None

    def counters(self, intfs) -> dict:
        """One monitor sample of the fabric's interfaces (lab/counters.py),
        a mesh server's links read in its GPUs' namespaces."""
        self._here()
        return read_counters(intfs, [self.net.get(h.name).pid
                                     for h in self.fabric.endpoints if h.mesh])

    @property
    def controlled(self) -> bool:
        """Whether the os-ken controller routes this fabric (its policy says:
        policies/); without one, plain L2 switches run spanning tree."""
        return policy(self.fabric.policy).controller

    def ready(self, status: dict) -> bool:
        """With BFD, a fabric is ready once every session is up (until then
        the controller routes around the ports) and, on this host, at its
        own rate: a session starts at 1 s intervals and takes a second or two
        to reach `bfd_ms`, and until it has, a silent failure takes seconds
        to be seen."""
        ms = self.fabric.routing.bfd_ms
        if not ms or not self.controlled:
            return True
        if status.get("down_ports"):
            return False
        if not self.sandboxed:
            return True
        self._here()
        shown = host.run(["ovs-appctl", "--timeout=5", "bfd/show"], check=False).stdout
        return bfd_at_rate(shown, ms)

    def _bfd_interfaces(self) -> List[str]:
        inner = {s.name for s in self.fabric.network_switches}
        return [i for l in self.fabric.links if {l.a, l.b} <= inner for i in (l.a_intf, l.b_intf)]

    def _bfd(self) -> None:
        """BFD on every link between switches here (routing.bfd_ms): Open
        vSwitch then reports a port live only while its session is up, its
        select groups skip a bucket whose port is not, and the controller
        routes around it (controller/app.py, port_is_up)."""
        ms = self.fabric.routing.bfd_ms
        intfs = self._bfd_interfaces()
        if not ms or not self.controlled or not intfs:
            return
        args = ["ovs-vsctl", "--timeout=30"]
        for intf in intfs:
            args += ["--", "set", "Interface", intf, "bfd:enable=true", f"bfd:min_tx={ms}",
                     f"bfd:min_rx={ms}"]
        host.run(args, timeout=120)

    def names(self) -> List[str]:
        """Every root-namespace name this lab creates."""
        return host.lab_names(self.fabric) + self.extra_names

    def _build_network(self) -> None:
        from mininet.link import Link
        from mininet.log import setLogLevel
        from mininet.net import Mininet
        from mininet.node import Host

        setLogLevel("info" if self.verbose else "output")   # output: what the CLI prints
        stp = not self.controlled
        # Every process a node starts, its shell first, is tracked the moment it
        # exists: a signal in the middle of Mininet's build leaks nothing.
        self.net = Mininet(topo=FabricTopo(fabric=self.fabric),
                           switch=switch_class(self.datapath, self.tag, self._track, stp=stp),
                           host=tracking(Host, self._track), link=Link, controller=None,
                           build=False, autoSetMacs=False, inNamespace=False, listenPort=None,
                           waitConnected=False)
        self.net.controllers = ([] if stp or self.connect_later else
                                [_ControllerTarget(self.controller.port, self.controller.ip)])
        self.net.build()
        self.net.start()
        self.net.controllers = []      # the switches know it; Mininet need not
        self._shape()

    def _shape(self) -> None:
        """Switch-side interfaces in two batches (MTU, then tc), then each
        endpoint's own interfaces from inside its namespace."""
        self.ecn = ecn.plan(self.fabric)
        plan = shaping_plan(self.fabric, self.ecn.marking)
        names = {h.name for h in self.fabric.endpoints}
        root_intfs = [intf for link in self.fabric.links
                      for node, intf in ((link.a, link.a_intf), (link.b, link.b_intf))
                      if node not in names]
        host.run(["ip", "-batch", "-"], timeout=120, input="".join(
            f"link set dev {intf} mtu {self.fabric.mtu}\n" for intf in root_intfs))
        host.run(["tc", "-batch", "-"], timeout=120, input="".join(
            f"{cmd}\n" for intf in root_intfs for cmd in plan[intf]))
        for name in self.names():                     # no IPv6 chatter on the counters
            knob = Path(f"/proc/sys/net/ipv6/conf/{name}/disable_ipv6")
            if knob.exists():
                knob.write_text("1")
        for ep in self.fabric.endpoints:
            self._configure_endpoint(ep, plan)

    def _configure_endpoint(self, ep, plan) -> None:
        intfs = endpoint_intfs(ep)
        script = host_setup_script({i: plan[i] for i in intfs}, self.fabric.mtu,
                                   ecn.server_sysctls() if self.ecn.dctcp else [],
                                   mesh_commands(self.fabric, ep) if ep.mesh else [])
        if len(self.neighbours) > STATIC_NEIGHBOURS_ABOVE:
            table = self.run_dir / f"neighbours-{ep.name}"
            table.write_text("".join(
                f"neigh replace {h.ip} lladdr {h.mac} dev {ep.intf} nud permanent\n"
                for h in self.neighbours if h is not ep) + "".join(
                f"neigh replace {h.nv_ip} lladdr {h.nv_mac} dev {ep.nv_intf} "
                "nud permanent\n" for h in self.neighbours
                if h is not ep and h.nv_ip and ep.nvswitch and h.nvswitch == ep.nvswitch))
            script = f"ip -batch {table} && {script}"
        if len(script) > PTY_LINE_MAX:                # a mesh GPU's interfaces: from a file
            path = self.run_dir / f"setup-{ep.name}.sh"
            path.write_text(script + "\n")
            script = f"sh {shlex.quote(str(path))}"
        out = self.net.get(ep.name).cmd(script)
        if "lab-host-ok" not in out:
            raise LabError(f"configuring {ep.intf} failed: {out.strip()[-200:]}")

    def controller_status(self) -> dict:
        return self.controller.status() if self.controller is not None else {}

    def wait_programmed(self, timeout: float = 60, until=lambda status: True) -> dict:
        """Wait until the controller has programmed every switch with a plan
        whose status satisfies `until` (lab/controller_process.py)."""
        if self.controller is None:
            raise LabError("this lab has no controller: its switches run spanning tree")
        return self.controller.wait_programmed([s.name for s in self.fabric.switches],
                                               timeout, until)

    def wait_stp_converged(self, timeout: float = 90) -> dict:
        """The STP baseline has no controller to ask: it is ready once the
        first server reaches every other one through the spanning tree. Its
        timers are wall-clock ones (a forward delay of 4 s, lab/mininet_build.py),
        so the patience is `timeout` seconds without a new server reached."""
        first, *others = self.fabric.endpoints
        node = self.host(first.name)
        pending = [h.ip for h in others]

        def ready():
            pending[:] = [ip for ip in pending
                          if "1 received" not in node.cmd(f"ping -n -c1 -W1 {ip}")]
            return not pending

        waited = wait_progressing(ready, lambda: len(pending), stall_s=timeout,
                                  cap_s=CONTROLLER_START_WALL_S, interval=0)
        if not waited.ready:
            raise LabError(f"spanning tree had not converged: {first.name} cannot reach "
                           f"{pending[0]} and {waited.reason('it')}")
        return {"versions": {}}

    # --- use -------------------------------------------------------------------------

    def host(self, name: str):
        return self.net.get(name)

    def netns(self, server: str) -> str:
        """The path of a server's network namespace, for a process that makes
        sockets there from outside (programs/netns.py)."""
        return f"/proc/{self.host(server).pid}/ns/net"

    def popen(self, server: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a process inside a server's namespace; the lab stops it at teardown."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        self._here()
        return self.host(server).popen(args, **kwargs)

    def set_link(self, a: str, b: str, up: bool, index: int = 0, silent: bool = False) -> None:
        """Take the index-th link between nodes a and b down or up (both ends:
        a switch's through its Open vSwitch, a server's with `ip link`);
        `silent`: its queues drop every frame, or keep them again, while the
        carrier stays up (only BFD, routing.bfd_ms, can tell)."""
        links = [l for l in self.fabric.links if {l.a, l.b} == {a, b}]
        link = links[index]
        ends = [(link.a_intf, link.a), (link.b_intf, link.b)]
        if not silent:
            ends = self._set_switch_ports(ends, up)
        marking = {s.name for s in self.fabric.network_switches} if self.ecn.marking else set()
        for intf, node in ends:
            frame = frame_bytes(self.fabric.mtu) if node in marking else 0
            for cmd in link_commands(intf, link.spec, up, silent, frame):
                self.host(node).cmd(cmd)

    # --- what a keeper uses (lab/protocol.py KeptLab) -------------------------------

    def nodes(self) -> Dict[str, int]:
        """Every node, servers and switches, by name: the pid of its shell."""
        if self.net is None:
            return {}
        return {n.name: n.pid for n in self.net.hosts + self.net.switches}

    def register(self, pid: int) -> None:
        """A process started in a node from outside the lab (a kept lab's
        exec): its teardown, or --cleanup after a SIGKILL, stops it too."""
        records.registered_dir(self.tag).mkdir(exist_ok=True)
        records.register(self.tag, pid)

    def resync(self) -> None:
        """Node shells an interruption cut in the middle of a command
        (Mininet's `waiting`): interrupted and read up to their prompt, so
        that the next commands find them ready."""
        for node in (self.net.hosts + self.net.switches if self.net is not None else []):
            if getattr(node, "waiting", False):
                with contextlib.suppress(Exception):
                    node.sendInt()
                    node.waitOutput()

    def holdings(self) -> dict:
        """What the lab holds now, which its teardown removes."""
        present = host.existing_interfaces()
        alive = [p for p in self.processes if p.poll() is None]
        controller = self.controller.process if self.controller is not None else None
        return {"bridges": host.tagged_bridges(self.tag),
                "interfaces": [n for n in self.names() if n in present],
                "processes": len(alive) + (controller is not None and controller not in alive
                                           and controller.poll() is None)}

    def _set_switch_ports(self, ends: list, up: bool) -> list:
        """Take the switches' ends of a link down or up through Open vSwitch
        itself, both at once (lab/portmod.py); the ends left to `ip link` are
        returned: the servers', and any whose port-mod failed."""
        switches = {s.name: s for s in self.net.switches} if self.net is not None else {}
        ours = [(intf, node) for intf, node in ends if node in switches]
        rest = [end for end in ends if end not in ours]
        try:
            ports = [(node, next(p for i, p in switches[node].ports.items() if i.name == intf),
                      portmod.hw_addr(intf)) for intf, node in ours]
        except (StopIteration, OSError) as exc:
            self.log(f"lab: no port-mod for {ours} ({exc!r}); using ip link")
            return ends
        for end, why in zip(ours, portmod.set_ports(ports, up)):
            if why is not None:
                self.log(f"lab: port-mod of {end[0]} failed ({why}); using ip link")
                rest.append(end)
        return rest

    # --- teardown ----------------------------------------------------------------

    def stop(self) -> None:
        """Tear the lab down, once. A stop signal arriving meanwhile waits
        until the teardown is done (held_signals), then takes its course."""
        with held_signals():
            if self._stopped:
                return
            self._stopped = True
            t0 = time.monotonic()
            self._teardown()
            self.timings["teardown_s"] = time.monotonic() - t0

    def _teardown(self) -> None:
        """Each step runs whatever the one before it hit; the first error is
        raised at the end, and the record is kept for --cleanup."""
        steps = self._sandbox_steps() if self.sandbox is not None else self._host_steps()
        errors = []
        for step in steps:
            try:
                step()
            except Exception as exc:      # noqa: BLE001 - keep tearing down
                errors.append(exc)
        if errors:                        # the record stays, for --cleanup
            raise LabError(f"teardown was incomplete: {errors[0]}; "
                           "`sudo python run_topology.py --cleanup` finishes it")
        if self.sandbox is not None:
            shutil.rmtree(self.sandbox.folder, ignore_errors=True)
        self.record_path.unlink(missing_ok=True)
        shutil.rmtree(records.registered_dir(self.tag), ignore_errors=True)

    def _sandbox_steps(self) -> list:
        """Every process the lab started is killed at once (nothing in there
        needs a gentle end) and the sandbox let go: with them goes every
        namespace and interface the lab made. Then the node shells'
        terminals are closed."""
        return [lambda: records.kill_registered(self.tag),
                lambda: [kill_now(p) for p in self.processes],
                self.sandbox.leave,
                lambda: [_close_pty(n) for n in self.net.hosts + self.net.switches]
                if self.net is not None else None]

    def _host_steps(self) -> list:
        """A lab in the host's namespace (a machine's part of a cluster run):
        its processes asked to stop, its bridges and interfaces removed by
        name, then its node shells and the controller."""
        controller = self.controller.process if self.controller is not None else None
        shells = [p for p in self.processes if is_mininet_shell(p)]
        others = [p for p in self.processes if not is_mininet_shell(p) and p is not controller]
        steps = [lambda: [stop_process(p) for p in others],
                 lambda: records.kill_registered(self.tag)]
        if self.net is not None or shells:
            steps.append(lambda: host.remove_network(host.tagged_bridges(self.tag),
                                                       self.names()))
        steps.append(lambda: [stop_process_group(p) for p in shells])
        if self.net is not None:
            steps.append(lambda: [_close_pty(n) for n in self.net.hosts + self.net.switches])
        if self.controller is not None:
            steps.append(self.controller.stop)
        return steps

    def _track(self, proc: subprocess.Popen) -> None:
        self.processes.append(proc)
        self._write_record()

    def _write_record(self) -> None:
        self.processes = [p for p in self.processes if p.poll() is None]
        records.write_json(self.record_path, {
            "fabric": self.fabric.source,
            "owner": os.environ.get(records.OWNER_VARIABLE),
            # where to look in (nsenter --net=/proc/PID/ns/net, OVS_RUNDIR=...)
            "sandbox": self.sandbox and self.sandbox.holder and {
                "netns_pid": self.sandbox.holder.pid, "ovs_rundir": str(self.sandbox.folder)},
            "interfaces": [] if self.sandboxed else self.names(),
            "processes": [(p.pid, records.start_time(p.pid)) for p in self.processes],
        })


@contextlib.contextmanager
def held_signals():
    """The stop signals, held for the `with` block and delivered after it: a
    Ctrl-C or SIGTERM in the middle of a teardown lets it finish first. In
    the main thread the handlers note the signal (a mask would hold it for
    that thread only, and Python runs handlers there); elsewhere it is
    masked."""
    if threading.current_thread() is not threading.main_thread():
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return
    arrived: List[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: arrived.append(signum))
                for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():    # None: a handler not set from Python
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        if arrived:
            signal.raise_signal(arrived[0])


def kill_now(proc: subprocess.Popen) -> None:
    """SIGKILL a process the lab started (a Mininet node's shell: its whole
    group, the jobs it runs in the background too), reap it, close its pipes."""
    if proc.poll() is None:
        try:
            if is_mininet_shell(proc):
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
    stop_process(proc, grace=5, ask=False)


def _close_pty(node) -> None:
    """As Mininet's own cleanup does: the pty master through the file object
    that wraps it (closing the bare fd would let that object close a reused
    number later), the slave end directly."""
    if getattr(node, "shell", None) is not None:
        node.stdin.close()
        os.close(node.slave)
        node.shell = None


def bfd_at_rate(shown: str, ms: int) -> bool:
    """Whether `ovs-appctl bfd/show` shows sessions, every one sending at
    `ms` and told the peer's minimum is `ms` too (the poll sequence that
    takes a session from its 1 s start to its rate is over at both ends)."""
    tx = re.findall(r"^\s*TX Interval: Approx (\d+)ms", shown, re.M)
    remote = re.findall(r"^\s*Remote Minimum TX Interval: (\d+)ms", shown, re.M)
    return bool(tx) and len(tx) == len(remote) and \
        all(int(v) <= ms for v in tx + remote)
