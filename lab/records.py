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
import signal
from pathlib import Path
from typing import List


RECORDS = Path("/run/fabric-lab")
# A test run or benchmark gives the labs it starts its own mark in this
# variable; their records carry it, so its checks judge only its own labs.
OWNER_VARIABLE = "FABRIC_LAB_OWNER"


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
def folder_lock(folder: Path):
    """An exclusive lock on `folder` (its .lock file, made if missing) for
    the `with` block: one process at a time works on what the folder holds."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def names_lock():
    return folder_lock(RECORDS)


def registered_dir(tag: str) -> Path:
    """Where processes started into a lab's servers from outside it (over ssh,
    in cluster mode: lab/cluster/machine.py's exec) register, one file per pid
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
        killed += kill_if_same(pid, started)
        entry.unlink(missing_ok=True)
    return killed


def kill_if_same(pid: int, started: int) -> bool:
    """SIGKILL `pid` if it is still the process that started at `started`
    (clock ticks after boot: a reused pid is never signalled); True if it was."""
    if not started or start_time(pid) != started:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (killed, not yet reaped) is dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def records() -> List[Path]:
    """The labs' records (PID-N.json; a kept lab's keeper record is not one)."""
    if not RECORDS.is_dir():
        return []
    return sorted(p for p in RECORDS.glob("*-*.json") if re.fullmatch(r"\d+-\d+", p.stem))


def record_owner(path: Path) -> int:
    return int(path.stem.split("-")[0])
