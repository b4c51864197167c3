"""A fabric spread over several machines (cluster mode): the lab as the rest
of the project sees it (lab/lifecycle.py's interface), run from the machine
that runs run_topology.py, the head.

1. preflight (lab/cluster/cluster_preflight.py): one line per machine that cannot
   take part, and nothing is started;
2. the os-ken controller starts here, listening only on the address this
   machine reaches the first machine from (or cluster.controller), in TLS
   with certificates made for the run in its folder (lab/cluster/certificates.py; plain TCP
   with cluster.tls: false); it lets in only the fabric's datapath ids;
3. each machine gets, over ssh, a `python -m lab.cluster.machine serve` that builds
   the nodes placed on it (topologies/placement.py) as an ordinary lab, the
   links that cross machines as VXLAN tunnels (lab/cluster/tunnels.py), its switches
   connected to the controller here (its own switch certificate and the
   run's CA certificate come in the build message); the machines build at
   the same time;
4. ready when the controller has programmed every switch of every machine.

A program in a server (`popen`) runs through ssh on the server's machine
(`lab.cluster.machine exec`), in the server's network namespace and, where that
machine's clock runs apart from this one's, in a time namespace that reads
this machine's monotonic clock: the agents' start times, the probes'
timestamps and the monitor's samples share one time line. The monitor asks
every machine for its counters (`counters`).

ssh checks every machine's host key (StrictHostKeyChecking=yes: a machine
whose key is not in known_hosts is refused by the preflight, in one sentence
saying how to add it); the test bed's machines come with a known_hosts of
their own (devtools/testbed.py).

Teardown: the programs (their ssh sessions: each program dies with its
session), then every machine's lab ("stop", all at once), then the ssh
sessions, then the controller. Each machine's ssh dies with this process
(setpriv --pdeathsig), and every machine's lab tears itself down, programs
included, when its ssh session ends, so even a SIGKILLed head leaves nothing
on the machines (the programs' ssh here end as their programs do); the
record under /run/fabric-lab names the machines, and `--cleanup` runs
`--cleanup` on each of them too.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from lab import ecn, records
from lab.cluster import cluster_preflight
from lab.host import LabError, run
from lab.controller_process import REPO
from lab.lifecycle import Lab
from lab.processes import stop_process
from lab.cluster.certificates import RunCertificates, make_certificates
from lab.cluster.tunnels import tunnels

PYTHON = REPO / ".venv" / "bin" / "python"
SSH_OPTIONS = ("-o", "BatchMode=yes", *cluster_preflight.HOST_KEYS, "-o", "ConnectTimeout=10",
               "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=6",
               "-o", "LogLevel=ERROR")
BUILD_TIMEOUT = 600.0       # a machine building its part (the SuperPOD unit: minutes)
ASK_TIMEOUT = 60.0
CLOCK_APART = 0.0005        # seconds: closer than this, a machine's clock is taken as ours
CLOCK_ROUNDS = 8


def ssh_command(user: str, host: str, remote: str, die_with_us: bool = True) -> List[str]:
    """ssh running `remote` (in the project, as root: sudo -n for another
    user); with `die_with_us`, ssh dies with the thread that starts it
    (PR_SET_PDEATHSIG follows the thread, not the process: only for ssh
    started from the main thread)."""
    sudo = "" if user == "root" else "sudo -n "
    return [*(["setpriv", "--pdeathsig", "TERM"] if die_with_us else []), "ssh", *SSH_OPTIONS,
            "--", f"{user}@{host}", f"cd {shlex.quote(str(REPO))} && exec {sudo}{remote}"]


def source_address(address: str) -> str:
    """The address this machine sends from to reach `address`."""
    out = run(["ip", "-o", "route", "get", address]).stdout.split()
    if "src" not in out:
        raise LabError(f"no route from this machine to {address}")
    return out[out.index("src") + 1]


def resolve(host: str) -> str:
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise LabError(f"cannot resolve the machine {host!r}: {exc}") from None


class Machine:
    """One machine's `lab.cluster.machine serve` over ssh, asked one thing at a time."""

    def __init__(self, index: int, host: str, address: str, user: str, run_dir: Path):
        self.index, self.host, self.address, self.user = index, host, address, user
        self.log = run_dir / f"machine{index + 1}.log"
        self.proc: Optional[subprocess.Popen] = None
        self.lock = threading.Lock()
        self.built: dict = {}
        self.offset = 0.0                      # our monotonic clock minus its
        self.pending = b""                     # read from its ssh, not yet a whole line

    @property
    def name(self) -> str:
        return f"machine {self.index + 1} ({self.host})"

    def start(self) -> subprocess.Popen:
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                ssh_command(self.user, self.host, f"{shlex.quote(str(PYTHON))} -m "
                            "lab.cluster.machine serve"), stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, bufsize=0, start_new_session=True)
        self.pending = b""
        return self.proc

    def send(self, msg: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        except (BrokenPipeError, OSError):
            raise LabError(f"{self.name} went away: {self._last_words()}") from None

    def read(self, timeout: float) -> dict:
        """The next reply line, read from the pipe itself (a buffered reader
        could hold a second line that select() then never reports)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                if not sel.select(max(0.0, deadline - time.monotonic())):
                    raise LabError(f"{self.name} did not answer within {timeout:.0f} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise LabError(f"{self.name} went away: {self._last_words()}")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        msg = json.loads(line)
        if msg.get("event") == "error":
            raise LabError(f"{self.name}: {msg['error']}")
        return msg

    def ask(self, msg: dict, timeout: float = ASK_TIMEOUT) -> dict:
        with self.lock:
            self.send(msg)
            return self.read(timeout)

    def measure_clock(self) -> float:
        """Our monotonic clock minus the machine's, from the exchange with the
        shortest round trip (its error is under half that round trip)."""
        best = None
        for _ in range(CLOCK_ROUNDS):
            t0 = time.monotonic()
            theirs = self.ask({"cmd": "clock"})["t"]
            t1 = time.monotonic()
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, (t0 + t1) / 2 - theirs)
        self.offset = best[1] if abs(best[1]) > CLOCK_APART else 0.0
        return best[1]

    def _last_words(self) -> str:
        try:
            lines = [l for l in self.log.read_text().splitlines() if l.strip()]
        except OSError:
            lines = []
        return lines[-1].strip() if lines else "ssh ended with no message"


class ClusterLab(Lab):
    def __init__(self, fabric, run_dir: Path, cluster, placement, datapath: str = "auto",
                 log=print, verbose: bool = False):
        super().__init__(fabric, run_dir, datapath, log, verbose)
        self.cluster, self.placement = cluster, placement
        self.machines: List[Machine] = []
        self.tunnels = []
        self.pids: Dict[str, int] = {}
        self.certificates: Optional[RunCertificates] = None

    # its switches meet the tunnels and the controller on the machines' own
    # network, not in a sandbox of this host's
    sandboxed = False

    # --- start ------------------------------------------------------------------

    # the hooks of Lab.start()

    def check(self) -> None:
        """Root, and every machine able to take part; then where each is."""
        t0 = time.monotonic()
        if os.geteuid() != 0:
            raise LabError("a cluster run needs root here too (its record under /run, the "
                           "controller): run it with sudo")
        problems = cluster_preflight.preflight(self.cluster.machines, self.cluster.user)
        if problems:           # one line per machine, as lab.cluster.cluster_preflight prints them
            raise LabError("not every machine can take part:\n" + "\n".join(
                f"  {line}" for line in problems))
        self.timings["preflight_s"] = time.monotonic() - t0
        addresses = {m: resolve(h) for m, h in enumerate(self.cluster.machines)}
        self.controller.ip = (resolve(self.cluster.controller) if self.cluster.controller
                              else source_address(addresses[0]))
        self.tunnels = tunnels(self.fabric, self.placement.node, addresses)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.cluster.tls:
            self.certificates = make_certificates(self.run_dir / "tls", self.tag,
                                                  self.controller.ip, list(self.cluster.machines))
            # TLS: its key and certificate, and the CA a switch's must be signed by
            self.controller.options = self.certificates.controller_options()
        self.machines = [Machine(m, h, addresses[m], self.cluster.user, self.run_dir)
                         for m, h in enumerate(self.cluster.machines)]

    def claim(self) -> None:
        """Nothing of this machine's root namespace: the names are the machines'."""

    def machine_tls(self, index: int) -> Optional[dict]:
        """What machine `index` needs for TLS (its switches' key and
        certificate, the CA's certificate), or None in plain TCP."""
        return self.certificates.for_machine(index) if self.certificates else None

    sandboxed = False                  # its switches meet the machines' network

    def build(self) -> None:
        self._build_machines()

    def settle(self) -> None:
        self.status = self.wait_programmed(timeout=120, until=self.ready)
        self.clock_offsets = [m.measure_clock() for m in self.machines]

    def _build_machines(self) -> None:
        for m in self.machines:          # from this thread: their ssh die with it
            self._track(m.start())
        build = {"cmd": "build", "spec": self.fabric.spec, "source": str(self.fabric.source),
                 "node": self.placement.node, "controller": [self.controller.ip, self.controller.port],
                 "datapath": self.requested_datapath,
                 "tunnels": [{"vni": t.vni, "kind": t.kind, "ends": [e.__dict__ for e in t.ends]}
                             for t in self.tunnels]}
        for m in self.machines:
            m.send({**build, "machine": m.index, "tls": self.machine_tls(m.index)})
        # they build at the same time; reading their replies in turn costs
        # nothing, and an interruption here needs no thread to wait for
        built = [_built(m) for m in self.machines]
        errors = [b for b in built if isinstance(b, LabError)]
        if errors:
            raise errors[0]
        for m, reply in zip(self.machines, built):
            m.built = reply
            self.pids.update(reply["pids"])
            self.warnings += [f"{m.name}: {w}" for w in reply["warnings"]]
        self.datapath = "/".join(sorted({m.built["datapath"] for m in self.machines}))
        # each machine's kernel decides its own part's ECN (lab/ecn.py)
        self.ecn = ecn.combine({m.name: m.built.get("ecn", {"asked": False, "marking": False,
                                                         "dctcp": False})
                                for m in self.machines})

    # --- use ----------------------------------------------------------------------

    def names(self) -> List[str]:
        return []                          # nothing in this machine's root namespace

    def machine_of(self, node: str) -> Machine:
        return self.machines[self.placement.node[node]]

    def host(self, name: str):
        raise LabError("a cluster run has no Mininet node here: its servers are on "
                       f"{self.machine_of(name).name}")

    def netns(self, server: str) -> str:
        return f"/proc/{self.pids[server]}/ns/net"

    def popen(self, server: str, args: List[str], **kwargs) -> subprocess.Popen:
        """A program in a server, on its machine; it dies with its ssh session.
        That ssh may be started from any thread (the failures' is one), so it
        does not die with its thread: if this process dies, the machine's
        own session ends, its part is torn down, its programs are killed,
        and their sessions, this ssh with them, end."""
        m = self.machine_of(server)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        remote = shlex.join([str(PYTHON), "-m", "lab.cluster.machine", "exec", m.built["tag"],
                             self.netns(server), *([repr(m.offset)] if m.offset else []),
                             "--", *map(str, args)])
        proc = subprocess.Popen(ssh_command(self.cluster.user, m.host, remote, False),
                                start_new_session=True, **kwargs)
        self._track(proc)
        return proc

    def set_link(self, a: str, b: str, up: bool, index: int = 0, silent: bool = False) -> None:
        link = [l for l in self.fabric.links if {l.a, l.b} == {a, b}][index]
        ends: Dict[int, list] = {}
        for node, intf in ((link.a, link.a_intf), (link.b, link.b_intf)):
            ends.setdefault(self.placement.node[node], []).append([node, intf])
        for m, its in ends.items():
            self.machines[m].ask({"cmd": "link", "ends": its, "up": up, "silent": silent})

    multi_machine = True

    def hosts(self) -> List[str]:
        return [m.host for m in self.machines]

    def counters(self, _intfs=None) -> dict:
        """A monitor sample of the whole fabric: every machine's, merged; the
        time is this machine's, its error the span of the asking."""
        t0 = time.monotonic()
        samples = [m.ask({"cmd": "sample"}) for m in self.machines]
        t1 = time.monotonic()
        merged = {"t": (t0 + t1) / 2, "t_err": (t1 - t0) / 2, "tx": {}, "queues": {},
                  "cpu": samples[0]["cpu"], "ovs_cpu_s": samples[0]["ovs_cpu_s"],
                  "machines": [{"cpu": s["cpu"], "ovs_cpu_s": s["ovs_cpu_s"]} for s in samples]}
        for s in samples:
            merged["tx"].update(s["tx"])
            merged["queues"].update(s["queues"])
        return merged

    def usage(self) -> List[dict]:
        """Per machine, so far: CPU seconds of its processes (cpu_s) and of
        its ovs-vswitchd (ovs_cpu_s); bytes sent on the wire its tunnels use
        (wire_tx_bytes), bytes and frames into its tunnels (tunnel_tx_bytes,
        tunnel_tx_packets) and bytes by all its switch ports (switch_tx_bytes)."""
        return [m.ask({"cmd": "usage"}) for m in self.machines]

    def summary(self) -> dict:
        return {"machines": [{"host": m.host, "address": m.address,
                              "build_s": round(m.built.get("build_s", 0.0), 2),
                              "teardown_s": m.built.get("teardown_s"),
                              "clock_offset_s": offset,
                              "ecn": {k: m.built.get("ecn", {}).get(k) for k in ("marking", "dctcp")}}
                             for m, offset in zip(self.machines, self.clock_offsets)],
                "controller": f"{self.controller.ip}:{self.controller.port}",
                "tls": self.certificates is not None,
                "tunnels": len(self.tunnels)}

    # --- teardown -------------------------------------------------------------------

    def _teardown(self) -> None:
        sessions = [m.proc for m in self.machines if m.proc is not None]
        programs = [p for p in self.processes
                    if p not in sessions and p is not self.controller.process]
        errors = []
        for step in (lambda: [stop_process(p, grace=5) for p in programs],
                     self._stop_machines,
                     lambda: [stop_process(p, grace=10) for p in sessions],
                     self.controller.stop):
            try:
                step()
            except Exception as exc:      # noqa: BLE001 - keep tearing down
                errors.append(exc)
        if errors:
            raise LabError(f"teardown was incomplete: {errors[0]}; `sudo python "
                           "run_topology.py --cleanup` here finishes it on every machine")
        self.record_path.unlink(missing_ok=True)

    def _stop_machines(self) -> None:
        running = [m for m in self.machines if m.proc is not None and m.proc.poll() is None]
        for m in running:
            try:
                m.send({"cmd": "stop"})
            except LabError:
                pass
        errors = []
        for m in running:
            try:
                while True:                    # a reply to an earlier request may come first
                    reply = m.read(BUILD_TIMEOUT)
                    if reply.get("event") == "stopped":
                        m.built["teardown_s"] = round(reply["teardown_s"], 2)
                        break
            except LabError as exc:
                if "went away" not in str(exc):
                    errors.append(exc)
        if errors:
            raise errors[0]

    def _write_record(self) -> None:
        self.processes = [p for p in self.processes if p.poll() is None]
        records.write_json(self.record_path, {
            "fabric": self.fabric.source, "interfaces": [],
            "processes": [(p.pid, records.start_time(p.pid)) for p in self.processes],
            "cluster": {"machines": list(self.cluster.machines), "user": self.cluster.user}})


def _built(m: Machine):
    try:
        return m.read(BUILD_TIMEOUT)
    except LabError as exc:
        return exc


def cleanup_machines(machines: List[str], user: str, log=print) -> None:
    """`run_topology.py --cleanup` on each machine of a dead cluster run."""
    for host in machines:
        proc = subprocess.run(ssh_command(user, host, f"{shlex.quote(str(PYTHON))} "
                                          "run_topology.py --cleanup"),
                              capture_output=True, text=True, timeout=300)
        for line in (proc.stdout + proc.stderr).strip().splitlines():
            log(f"{host}: {line}")
