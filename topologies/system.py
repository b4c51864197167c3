"""What the lab needs from the host, checked before anything is built, and the
record of what a running lab owns (so an interrupted one can be cleaned up
exactly, never by process name).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, List

from topologies.fabric import Fabric

RECORDS = Path("/run/fabric-lab")
TOOLS = ("mnexec", "ovs-vsctl", "ovs-ofctl", "tc", "ip", "ethtool", "ping", "iperf3")


class LabError(Exception):
    """The host cannot run this lab; the message is one sentence saying why."""


def run(args: List[str], timeout: float = 30, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise LabError(f"{' '.join(args[:3])} failed: {detail[-1] if detail else proc.returncode}")
    return proc


def ovs_running() -> bool:
    try:
        return run(["ovs-vsctl", "--timeout=3", "show"], timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


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
    needs_netem = [k for k in ("server_leaf", "leaf_spine")
                   if any(l.spec.needs_netem for l in fabric.links if l.kind == k)]
    if needs_netem and not netem_available():
        raise LabError(
            f"{fabric.source}: links.{needs_netem[0]} asks for delay or loss, which needs "
            "the kernel's sch_netem qdisc, and this kernel has none: set delay_ms and "
            "loss_percent to 0 here, or use the Vagrant lab VM")


def existing_interfaces() -> set:
    return set(os.listdir("/sys/class/net"))


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


def preflight(fabric: Fabric, datapath: str) -> str:
    """Refuse early, with one sentence, anything that would fail half-way.
    Returns the datapath to use ('kernel' or 'user')."""
    if os.geteuid() != 0:
        raise LabError("building a fabric needs root (network namespaces, Open vSwitch): "
                       "run it with sudo")
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise LabError(f"missing {', '.join(missing)}: run `sudo scripts/lab setup` first")
    if not ovs_running():
        raise LabError("Open vSwitch is not running (ovs-vsctl cannot reach ovsdb-server): "
                       "start it with `sudo scripts/lab setup`")
    check_netem(fabric)
    taken = sorted((existing_interfaces() | existing_bridges()) & set(lab_names(fabric)))
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


# --- the record of what a lab owns ----------------------------------------------

def write_record(pid: int, record: dict) -> Path:
    RECORDS.mkdir(parents=True, exist_ok=True)
    path = RECORDS / f"{pid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)
    return path


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def dead_records() -> Iterable[Path]:
    if not RECORDS.is_dir():
        return []
    return [p for p in sorted(RECORDS.glob("*.json")) if not pid_alive(int(p.stem))]
