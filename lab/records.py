"""The record of what a running lab owns, so that a lab killed without its
teardown (SIGKILL) can be cleaned up exactly, never by process name.

/run/fabric-lab/<pid>-<n>.json, rewritten as the lab grows: its bridges (also
tagged in OVSDB with external_ids:fabric_lab=<pid>-<n>), its root-namespace
interfaces, and every process it started as (pid, start time), so a pid reused
by an unrelated process is never signalled. A lock serialises the window from
the name check to the record that claims the names.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import List

from lab.host import existing_interfaces, remove_network, tagged_bridges

RECORDS = Path("/run/fabric-lab")


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


def registered_dir(tag: str) -> Path:
    """Where processes started into a lab's servers from outside it (over ssh,
    in cluster mode: lab/machine.py's exec) register, one file per pid
    holding its start time."""
    return RECORDS / f"{tag}.procs"


def register(tag: str, pid: int) -> None:
    folder = registered_dir(tag)
    if not folder.is_dir():
        raise FileNotFoundError(f"no running lab {tag} on this machine")
    (folder / str(pid)).write_text(str(start_time(pid)))


def kill_registered(tag: str) -> int:
    """SIGKILL every registered process still running (same pid and start
    time); their files go, the folder stays for processes yet to come."""
    folder, killed = registered_dir(tag), 0
    for entry in folder.iterdir() if folder.is_dir() else []:
        try:
            pid, started = int(entry.name), int(entry.read_text() or 0)
        except (OSError, ValueError):
            entry.unlink(missing_ok=True)
            continue
        if started and start_time(pid) == started:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        entry.unlink(missing_ok=True)
    return killed


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
        killed += kill_registered(path.stem)
        shutil.rmtree(registered_dir(path.stem), ignore_errors=True)
        bridges = tagged_bridges(path.stem)
        present = existing_interfaces()
        interfaces = [n for n in record.get("interfaces", []) if n not in claimed and n in present]
        remove_network(bridges, interfaces)
        log(f"cleaned up after lab {path.stem} ({record.get('fabric')}): {killed} processes, "
            f"{len(bridges)} bridges, {len(interfaces)} interfaces")
        if record.get("cluster"):              # a cluster run's head: its machines too
            from lab.cluster import cleanup_machines
            cleanup_machines(record["cluster"]["machines"], record["cluster"]["user"], log)
        path.unlink()
    return len(dead)


OWNER_VARIABLE = "FABRIC_LAB_OWNER"   # host_state(owner): whose processes count
LAB_PROCESS = re.compile(r"mininet:|-m controller|traffic\.programs|iperf3? |mnexec")


def host_state(owner: "str | None" = None) -> dict:
    """What a lab could leave behind on this host: bridges, veths, named
    namespaces and lab-like processes. Tests and benchmarks compare it before
    and after a lab to show that the teardown left nothing; it only looks.
    With `owner`, only the processes started under FABRIC_LAB_OWNER=owner
    count (a process keeps its environment when orphaned), so a lab or a
    test run of someone else's on this host is not taken for a leak."""
    bridges = []
    if shutil.which("ovs-vsctl"):
        bridges = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                 text=True).stdout.split()
    veths = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                           text=True).stdout.splitlines()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    mark = f"{OWNER_VARIABLE}={owner}".encode() if owner else None
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if not LAB_PROCESS.search(cmd) or int(pid) == os.getpid():
                continue
            if mark and mark not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        procs.append(f"{pid} {cmd.strip()}")
    return {"bridges": sorted(bridges), "veths": len(veths), "netns": sorted(netns),
            "processes": sorted(procs)}
