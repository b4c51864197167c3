"""What the lab needs from the host, checked before anything is built, and the
record of what a running lab owns (so an interrupted one can be cleaned up
exactly, never by process name).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
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
    """Both daemons answer: ovsdb-server (ovs-vsctl) and ovs-vswitchd (ovs-appctl)."""
    try:
        return all(run(args, timeout=10, check=False).returncode == 0 for args in (
            ["ovs-vsctl", "--timeout=3", "show"],
            ["ovs-appctl", "--timeout=3", "-t", "ovs-vswitchd", "version"]))
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
        raise LabError("Open vSwitch is not running (ovsdb-server or ovs-vswitchd does not "
                       "answer): start it with `sudo scripts/lab setup`")
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
#
# /run/fabric-lab/<pid>-<n>.json, rewritten as the lab grows: its bridges (also
# tagged in OVSDB with external_ids:fabric_lab=<pid>-<n>), its root-namespace
# interfaces, and every process it started as (pid, start time), so a pid reused
# by an unrelated process is never signalled. A lock serialises the window from
# the name check to the record that claims the names.

def write_json(path: Path, data) -> None:
    """Write JSON so that readers never see half a file."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def start_time(pid: int) -> int:
    """The kernel's start time of a process (clock ticks after boot), 0 if gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


@contextlib.contextmanager
def names_lock():
    RECORDS.mkdir(parents=True, exist_ok=True)
    with open(RECORDS / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (killed, not yet reaped) is dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def records() -> List[Path]:
    return sorted(RECORDS.glob("*-*.json")) if RECORDS.is_dir() else []


def record_owner(path: Path) -> int:
    return int(path.stem.split("-")[0])


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


def cleanup_dead_labs(log=print) -> int:
    """Remove what labs that died without teardown left, from their records:
    their processes (same pid and start time), the bridges tagged with their
    record, and their interfaces unless a live lab has claimed the names since."""
    live, dead = [], []
    for path in records():
        (live if pid_alive(record_owner(path)) else dead).append(path)
    claimed = set()
    for path in live:
        try:
            claimed.update(json.loads(path.read_text()).get("interfaces", []))
        except (OSError, ValueError):
            pass
    for tmp in RECORDS.glob("*.json.tmp") if RECORDS.is_dir() else []:
        if not pid_alive(int(tmp.name.split("-")[0])):
            tmp.unlink(missing_ok=True)          # a record write cut short by SIGKILL
    for path in dead:
        record = json.loads(path.read_text())
        killed = 0
        for pid, started in record.get("processes", []):
            if start_time(pid) == started:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        bridges = tagged_bridges(path.stem)
        present = existing_interfaces()
        interfaces = [n for n in record.get("interfaces", []) if n not in claimed and n in present]
        remove_network(bridges, interfaces)
        log(f"cleaned up after lab {path.stem} ({record.get('fabric')}): {killed} processes, "
            f"{len(bridges)} bridges, {len(interfaces)} interfaces")
        path.unlink()
    return len(dead)
