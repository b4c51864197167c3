"""One machine's part of a cluster run, driven over ssh by the machine that
runs run_topology.py (the head, lab/cluster/cluster.py):

    python -m lab.cluster.machine serve                      # JSON lines on stdin/stdout
    python -m lab.cluster.machine exec TAG NETNS -- ARGV...  # a program in one server

``serve`` builds the slice of the fabric placed on this machine
(topologies/placement.py) as an ordinary lab (lab/lifecycle.py) of the nodes
and links that are all here, with the same Mininet, the same shaping, the
same record under /run/fabric-lab and so the same ``--cleanup``; the links
that cross machines become VXLAN tunnels (lab/cluster/tunnels.py) on the switches'
ports. Its switches connect to the controller on the head: over TLS when
the build message carries TLS credentials (this machine's switch key and
certificate, the run's CA certificate; written 0600 into the part's own
folder, given to Open vSwitch with ``ovs-vsctl set-ssl``, the controller's
target ``ssl:``; the SSL setting is removed at teardown), else in plain TCP.
Then it answers
the head, one reply line per request line:

    {"cmd": "build", ...}          -> {"event": "built", "tag", "pids", "datapath", "ecn", ...}
    {"cmd": "sample"}              -> a monitor sample of this machine's switch ports
    {"cmd": "link", "ends", "up", "silent"}  -> {"event": "done"}: interfaces down or up
    {"cmd": "clock"}               -> {"event": "clock", "t": this machine's monotonic clock}
    {"cmd": "usage"}               -> {"event": "usage", ...}: CPU seconds of this
                                      machine's processes and of its ovs-vswitchd; bytes
                                      sent by the devices under its tunnels, bytes and
                                      frames by its tunnels, bytes by its switch ports
    {"cmd": "stop"}                -> teardown, {"event": "stopped", "teardown_s"}

and tears its lab down on "stop", on the end of its input (the head, or its
ssh, went away), on SIGTERM/SIGINT/SIGHUP, and when its parent (sshd) dies.
An error is one line, {"event": "error", "error": sentence}, after which the
lab is torn down and the process exits.

``exec`` starts a program in a server of that lab, as Mininet's popen would:
it registers its pid with the lab (records.register: the lab's teardown and
``--cleanup`` kill it), asks for SIGTERM when its parent (this ssh session)
dies, enters the server's network namespace and, if the head's clock runs
apart from this machine's, a time namespace whose monotonic clock reads as
the head's, then becomes the program: its stdin and stdout are the ssh
session's, so the head reads and writes it as a local child.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

from lab import host, records
from lab.host import Interrupted, LabError
from lab.controller_process import RemoteController
from lab.lifecycle import Lab
from lab.cluster.certificates import write_credentials
from lab.cluster.tunnels import Tunnel, TunnelEnd, make_commands, wire_mtu
from lab.shaping import frame_bytes, link_commands
from topologies.fabric import Fabric, fabric_from_spec

PR_SET_PDEATHSIG = 1
CLONE_NEWTIME = 0x80
STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PART_PREFIX = "fabric-lab-part-"


def local_fabric(whole: Fabric, mine) -> Fabric:
    """The part of `whole` made of the nodes in `mine` and the links with both ends there."""
    return dataclasses.replace(
        whole, switches=tuple(s for s in whole.switches if s.name in mine),
        endpoints=tuple(h for h in whole.endpoints if h.name in mine),
        links=tuple(l for l in whole.links if l.a in mine and l.b in mine))


def route_mtu(address: str) -> Tuple[str, int]:
    """(device, MTU) of the route this machine takes to `address`."""
    out = host.run(["ip", "-o", "route", "get", address]).stdout.split()
    dev = out[out.index("dev") + 1] if "dev" in out else "?"
    try:
        return dev, int(Path(f"/sys/class/net/{dev}/mtu").read_text())
    except (OSError, ValueError):
        return dev, 0


class SliceLab(Lab):
    """The lab of one machine's nodes; its switches' controller is elsewhere."""

    def __init__(self, whole: Fabric, mine, ends: List[Tuple[Tunnel, TunnelEnd]],
                 controller: RemoteController, run_dir: Path, datapath: str = "auto",
                 tls: Optional[dict] = None):
        super().__init__(local_fabric(whole, mine), run_dir, datapath, log=lambda *a: None,
                         controller=controller)
        self.whole, self.ends = whole, ends
        self.tls = tls                       # {"key", "cert", "ca"} PEM text, or None: tcp
        self.ssl_set = False
        self.neighbours = whole.endpoints
        self.extra_names = [end.device for _, end in ends]
        # the controller checks every port of a switch as it connects: not
        # before the tunnels are ports too
        self.connect_later = True

    # its switches meet the tunnels and the head's controller on this
    # machine's own network, not in a sandbox
    sandboxed = False

    # the hooks of Lab.start(): no controller here, and the switches meet the
    # head's once the tunnels are ports too

    def claim(self) -> None:
        self.datapath = host.preflight(self.fabric, self.requested_datapath, self.extra_names)
        self._check_wire()
        if self.tls:
            self._check_ssl_free()
        records.registered_dir(self.tag).mkdir(parents=True, exist_ok=True)

    sandboxed = False                  # its switches meet the machines' network

    def build(self) -> None:
        self._build_network()
        self._tunnels()
        self._bfd()
        self._connect()

    def settle(self) -> None:
        """The head waits until its controller has programmed every switch."""

    def _teardown(self) -> None:
        try:
            super()._teardown()
        finally:
            if self.ssl_set:
                host.run(["ovs-vsctl", "--timeout=30", "del-ssl"], check=False, timeout=60)
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def _check_ssl_free(self) -> None:
        """Open vSwitch holds one SSL setting for the whole machine: take it
        only when it is unset, or left by a part of an earlier run (its files
        in a fabric-lab-part- folder), never when someone else set it."""
        out = host.run(["ovs-vsctl", "--timeout=30", "get-ssl"], timeout=60).stdout
        key = next((l.split(":", 1)[1].strip() for l in out.splitlines()
                    if l.startswith("Private key:")), "")
        if key and not Path(key).parent.parent.name.startswith(PART_PREFIX):
            raise LabError(f"Open vSwitch on this machine already has an SSL setting (private "
                           f"key {key}), which a TLS cluster run would replace: remove it "
                           "(`ovs-vsctl del-ssl`) if nothing needs it, or set cluster.tls: false")

    def _bfd_interfaces(self) -> List[str]:
        return super()._bfd_interfaces() + [end.device for _, end in self.ends]

    def _check_wire(self) -> None:
        need = wire_mtu(self.fabric)
        for address in sorted({end.remote for _, end in self.ends}):
            dev, mtu = route_mtu(address)
            if mtu < need:
                raise LabError(
                    f"the wire to {address} ({dev}) has MTU {mtu}, and {self.fabric.mtu}-byte "
                    f"frames in VXLAN need {need}: raise {dev}'s MTU to {need} on both "
                    "machines, or lower fabric.mtu")

    def _tunnels(self) -> None:
        for tunnel, end in self.ends:
            spec = self.whole.links[tunnel.vni - 1].spec
            for cmd in make_commands(tunnel, end, spec, self.fabric.mtu):
                host.run(cmd, timeout=60)
            knob = Path(f"/proc/sys/net/ipv6/conf/{end.device}/disable_ipv6")
            if knob.exists():
                knob.write_text("1")

    def _connect(self) -> None:
        """Every switch here to the controller, in one ovs-vsctl batch, as
        Mininet would have (its reconnect backoff included)."""
        args = ["ovs-vsctl", "--timeout=30"]
        target = f'"tcp:{self.controller.ip}:{self.controller.port}"'
        if self.tls:
            files = write_credentials(self.run_dir / "tls", self.tls)
            args += ["--", "set-ssl", str(files["key"]), str(files["cert"]), str(files["ca"])]
            target = f'"ssl:{self.controller.ip}:{self.controller.port}"'
            self.ssl_set = True
        for i, sw in enumerate(self.fabric.switches):
            args += ["--", f"--id=@c{i}", "create", "Controller", f"target={target}",
                     "max_backoff=1000", "--", "set", "bridge", sw.name, f"controller=[@c{i}]"]
        if self.fabric.switches or self.tls:
            host.run(args, timeout=120)

    def set_ends(self, ends: List[Tuple[str, str]], up: bool, silent: bool = False) -> None:
        """Interfaces (node, interface) down or up (`silent`: their queues,
        lab/shaping.link_commands): in the server's namespace for a server,
        in the root namespace for a switch."""
        spec = {i: l.spec for l in self.whole.links for i in (l.a_intf, l.b_intf)}
        marking = {s.name for s in self.whole.network_switches} if self.ecn.marking else set()
        for node, intf in ends:
            frame = frame_bytes(self.whole.mtu) if node in marking else 0
            for cmd in link_commands(intf, spec[intf], up, silent, frame):
                if any(h.name == node for h in self.fabric.endpoints):
                    self.host(node).cmd(cmd)
                else:
                    host.run(cmd.split())


def build(msg: dict) -> SliceLab:
    whole = fabric_from_spec(msg["spec"], msg["source"])
    mine = {name for name, m in msg["node"].items() if m == msg["machine"]}
    ends = []
    for t in msg["tunnels"]:
        tunnel = Tunnel(t["vni"], t["kind"], tuple(TunnelEnd(**e) for e in t["ends"]))
        ends += [(tunnel, end) for end in tunnel.ends if end.machine == msg["machine"]]
    # its files (neighbour tables, TLS credentials) in a folder of its own
    # (0700), gone with it
    return SliceLab(whole, mine, ends, RemoteController(*msg["controller"]),
                    Path(tempfile.mkdtemp(prefix=PART_PREFIX)), msg["datapath"], msg.get("tls"))


def cpu_of_this_machine() -> float:
    """CPU seconds of every process this machine's /proc shows, and of their
    reaped children (in a test-bed machine: its own PID namespace)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def answer(lab: SliceLab, msg: dict) -> dict:
    from lab.counters import read_counters
    cmd = msg.get("cmd")
    if cmd == "sample":
        return {"event": "sample", **read_counters(set(lab.names()))}
    if cmd == "link":
        lab.set_ends([tuple(e) for e in msg["ends"]], msg["up"], msg.get("silent", False))
        return {"event": "done"}
    if cmd == "clock":
        return {"event": "clock", "t": time.monotonic()}
    if cmd == "usage":
        from lab.counters import ovs_cpu_seconds, tx_bytes
        every = tx_bytes()
        wire = {route_mtu(end.remote)[0] for _, end in lab.ends}
        return {"event": "usage", "cpu_s": cpu_of_this_machine(),
                "ovs_cpu_s": ovs_cpu_seconds(),
                "wire_tx_bytes": sum(every.get(d, 0) for d in wire),
                "tunnel_tx_bytes": sum(every.get(d, 0) for d in lab.extra_names),
                "tunnel_tx_packets": sum(int(Path(f"/sys/class/net/{d}/statistics/tx_packets")
                                             .read_text()) for d in lab.extra_names),
                "switch_tx_bytes": sum(every.get(d, 0) for d in lab.names())}
    return {"event": "error", "error": f"unknown request {cmd!r}"}


def serve(lines, reply) -> int:
    """The loop of `serve`; `reply(dict)` writes one line to the head."""
    def interrupt(signum, _frame):
        for sig in STOP:
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    for sig in STOP:
        signal.signal(sig, interrupt)
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    lab, code = None, 0
    try:
        for line in lines:
            msg = json.loads(line)
            if msg.get("cmd") == "stop":
                break
            if msg.get("cmd") == "build":
                lab = build(msg)
                lab.start()
                reply({"event": "built", "tag": lab.tag, "datapath": lab.datapath,
                       "warnings": lab.warnings, "build_s": lab.timings["start_s"],
                       "ecn": lab.ecn.to_dict(),
                       "pids": {h.name: lab.host(h.name).pid for h in lab.fabric.endpoints}})
            else:
                reply(answer(lab, msg))
    except (LabError, OSError, ValueError, KeyError) as exc:
        code = 1
        reply({"event": "error", "error": str(exc) if isinstance(exc, LabError)
               else f"{type(exc).__name__}: {exc}"})
    except Interrupted:
        code = 130
    finally:
        if lab is not None:
            try:
                lab.stop()
                reply({"event": "stopped", "teardown_s": lab.timings.get("teardown_s", 0.0)})
            except (LabError, OSError) as exc:
                code = 1
                reply({"event": "error", "error": str(exc)})
    return code


def _reply_to(stream):
    def reply(msg: dict) -> None:
        try:
            stream.write(json.dumps(msg) + "\n")
            stream.flush()
        except (BrokenPipeError, OSError):       # the head is gone: teardown goes on
            pass
    return reply


def enter_time(offset: float) -> None:
    """Make this process's monotonic clock, after exec, read `offset`
    seconds more than this machine's (the head's clock), in a time namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWTIME) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWTIME)")
    sec = int(offset // 1)
    nsec = int(round((offset - sec) * 1e9))
    Path("/proc/self/timens_offsets").write_text(f"monotonic {sec} {nsec}\n")


def exec_in(tag: str, netns: str, argv: List[str], offset: float = 0.0) -> None:
    from programs.netns import set_netns
    records.register(tag, os.getpid())
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if offset:
        enter_time(offset)
    fd = os.open(netns, os.O_RDONLY)
    set_netns(fd)
    os.close(fd)
    os.execvp(argv[0], argv)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"]:
        # replies on a copy of stdout; whatever else writes to stdout (a
        # library, a child inheriting it) goes to stderr, not into them
        replies = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        return serve(sys.stdin, _reply_to(replies))
    if argv[:1] == ["exec"] and "--" in argv and len(argv) > argv.index("--") + 1:
        split = argv.index("--")
        tag, netns, *rest = argv[1:split]
        offset = float(rest[0]) if rest else 0.0
        try:
            exec_in(tag, netns, argv[split + 1:], offset)
        except OSError as exc:
            print(f"error: cannot start {argv[split + 1]} in {netns}: {exc}", file=sys.stderr)
            return 127
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
