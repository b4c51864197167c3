"""What the lab needs from the host, checked before anything is built, and
the host operations the lab runs: commands, Open vSwitch, the datapath, netem,
which names are taken.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, List

from topologies.fabric import Fabric

# The userspace datapath sends every switch port's frames through one packet
# socket; its send buffer holds every frame waiting in any shaped queue of the
# fabric, and frames past it are dropped where no queue counts them.
# scripts/setup.sh raises net.core.wmem_default to this before ovs-vswitchd starts.
OVS_SEND_BUFFER = 64 << 20

TOOLS = ("mnexec", "ovs-vsctl", "ovs-ofctl", "tc", "ip", "ethtool", "ping", "iperf3")
OWN_OVS_TOOLS = ("unshare", "ovsdb-tool", "ovsdb-server", "ovs-vswitchd")


class LabError(Exception):
    """The host cannot run this lab; the message is one sentence saying why."""


class Interrupted(BaseException):
    """SIGTERM, SIGHUP (or SIGINT) turned into an exception: it unwinds like
    Ctrl-C, so whatever is running tears its lab down on the way out."""


def run(args: List[str], timeout: float = 30, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabError(f"{' '.join(args[:3])} failed: {detail[-1] if detail else proc.returncode}")
    return proc


def ovs_running() -> bool:
    """Both daemons answer: ovsdb-server (ovs-vsctl) and ovs-vswitchd (ovs-appctl)."""
    try:
        return all(run(args, timeout=10, check=False).returncode == 0 for args in (
            ["ovs-vsctl", "--timeout=3", "show"],
            ["ovs-appctl", "--timeout=3", "-t", "ovs-vswitchd", "version"]))
    except (OSError, subprocess.TimeoutExpired):
        return False


def parse_send_buffer(ss_output: str) -> "int | None":
    """The send buffer of ovs-vswitchd's sending packet socket (protocol 0, no
    interface) in `ss -0 -m -a -p` output; None when it has not opened one."""
    for line in ss_output.splitlines():
        if '"ovs-vswitchd"' in line and "[0]:*" in line:
            m = re.search(r"\btb(\d+)", line)
            if m:
                return int(m.group(1))
    return None


def ovs_send_buffer_warning() -> "str | None":
    """A sentence when the userspace datapath's send buffer (or, before it
    opens, the default it will open with) is under OVS_SEND_BUFFER."""
    try:
        have = parse_send_buffer(run(["ss", "-0", "-m", "-a", "-p"], check=False).stdout)
        if have is None:
            have = int(Path("/proc/sys/net/core/wmem_default").read_text())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    if have >= OVS_SEND_BUFFER:
        return None
    return (f"Open vSwitch's send buffer is {have >> 10} KiB, room for about "
            f"{have // 16384} full 9000-byte frames queued across the whole fabric: frames past "
            "it are dropped uncounted; run `sudo scripts/lab setup` with no lab running "
            "(it raises net.core.wmem_default and restarts Open vSwitch)")


def detect_datapath() -> str:
    """'kernel' when the openvswitch module is (or can be) loaded, else 'user'."""
    if not Path("/sys/module/openvswitch").exists() and shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True, check=False)
    return "kernel" if Path("/sys/module/openvswitch").exists() else "user"


def netem_available() -> bool:
    """Try a netem qdisc on the loopback of a throwaway network namespace: the
    namespace vanishes with the command, so nothing on the host is touched."""
    if not shutil.which("unshare"):
        return False
    proc = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root",
                           "netem", "delay", "1ms"], capture_output=True, check=False)
    return proc.returncode == 0


def check_netem(fabric: Fabric) -> None:
    """Delay and loss need sch_netem: say so, naming the key, where it is missing."""
    needs_netem = [k for k, link in fabric.link_classes.items() if link.needs_netem]
    if needs_netem and not netem_available():
        raise LabError(
            f"{fabric.source}: links.{needs_netem[0]} asks for delay or loss, which needs "
            "the kernel's sch_netem qdisc, and this kernel has none: set delay_ms and "
            "loss_percent to 0 here, or use the Vagrant lab VM")


def existing_interfaces() -> set:
    """The interfaces of this thread's network namespace (a sandboxed lab's,
    while it is in one: /sys/class/net would show the host's)."""
    lines = Path("/proc/thread-self/net/dev").read_text().splitlines()[2:]
    return {line.partition(":")[0].strip() for line in lines}


def existing_bridges() -> set:
    out = run(["ovs-vsctl", "--timeout=5", "list-br"], check=False).stdout
    return set(out.split())


def lab_names(fabric: Fabric) -> List[str]:
    """Every root-namespace name the lab creates: bridges and switch-side ports."""
    names = [s.name for s in fabric.switches]
    switch_names = set(names)
    for link in fabric.links:
        names += [i for node, i in ((link.a, link.a_intf), (link.b, link.b_intf))
                  if node in switch_names]
    return names


def preflight(fabric: Fabric, datapath: str, extra_names: Iterable[str] = (),
              own_ovs: bool = False) -> str:
    """Refuse early, with one sentence, anything that would fail half-way.
    Returns the datapath to use ('kernel' or 'user'). A lab with `own_ovs`
    (lab/sandbox.py) starts its own Open vSwitch in namespaces of its own:
    it needs the programs, not the host's daemons, and no free names."""
    if os.geteuid() != 0:
        raise LabError("building a fabric needs root (network namespaces, Open vSwitch): "
                       "run it with sudo")
    missing = [t for t in TOOLS + (OWN_OVS_TOOLS if own_ovs else ()) if not shutil.which(t)]
    if missing:
        raise LabError(f"missing {', '.join(missing)}: run `sudo scripts/lab setup` first")
    if not own_ovs and not ovs_running():
        raise LabError("Open vSwitch is not running (ovsdb-server or ovs-vswitchd does not "
                       "answer): start it with `sudo scripts/lab setup`")
    check_netem(fabric)
    taken = [] if own_ovs else sorted((existing_interfaces() | existing_bridges())
                                      & set(lab_names(fabric) + list(extra_names)))
    if taken:
        raise LabError(
            f"{taken[0]} already exists on this host ({len(taken)} of the fabric's names "
            "are taken): another lab is running, or one was killed; "
            "`sudo python run_topology.py --cleanup` removes what a dead lab left")
    if datapath == "auto":
        datapath = detect_datapath()
    if datapath == "kernel" and not Path("/sys/module/openvswitch").exists():
        raise LabError("the kernel datapath needs the openvswitch kernel module, which this "
                       "kernel does not have: use --datapath user")
    return datapath


def remove_network(bridges: Iterable[str], interfaces: Iterable[str]) -> None:
    """Delete bridges, then whichever of `interfaces` still exist (deleting one
    end of a veth deletes its peer, in a server's namespace or not)."""
    bridges = list(bridges)
    if bridges:
        args = ["ovs-vsctl", "--timeout=20"]
        for br in bridges:
            args += ["--", "--if-exists", "del-br", br]
        run(args, timeout=60, check=False)
    present = existing_interfaces()
    doomed = [n for n in interfaces if n in present]
    if doomed:
        run(["ip", "-force", "-batch", "-"], check=False, timeout=60,
            input="".join(f"link del dev {n}\n" for n in doomed))


def tagged_bridges(tag: str) -> List[str]:
    out = run(["ovs-vsctl", "--timeout=5", "--bare", "--columns=name", "find", "Bridge",
               f"external_ids:fabric_lab={tag}"], check=False).stdout
    return out.split()
