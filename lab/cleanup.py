"""Cleaning up after labs killed without their teardown (SIGKILL): from each
dead lab's record (lab/records.py), exactly what it owned, on this host and,
for a cluster run's head, on its machines; never by process name. A kept
lab's keeper (lab/kept/kept.py) killed so leaves its record and socket too."""

from __future__ import annotations

import json
import shutil

from lab.kept import kept
from lab.cluster.cluster import cleanup_machines
from lab.host import existing_interfaces, remove_network, tagged_bridges
from lab.sandbox import end_carrying
from lab.records import (RECORDS, kill_if_same, kill_registered, pid_alive, record_owner,
                         records, registered_dir)


def cleanup_dead_labs(log=print, owner=None) -> int:
    """Remove what labs that died without teardown left, from their records:
    their processes (same pid and start time), the bridges tagged with their
    record, and their interfaces unless a live lab has claimed the names since;
    and a dead keeper's record and socket. With `owner`, only the labs that
    process (a dead keeper) ran. How many records it removed."""
    live, dead = [], []
    for path in records():
        if pid_alive(record_owner(path)):
            live.append(path)
        elif owner is None or record_owner(path) == owner:
            dead.append(path)
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
        killed = sum(kill_if_same(pid, started) for pid, started in record.get("processes", []))
        killed += kill_registered(path.stem)
        rundir = (record.get("sandbox") or {}).get("ovs_rundir")
        if rundir:                               # what it ran in its sandbox, untracked
            killed += len(end_carrying(rundir))
        shutil.rmtree(registered_dir(path.stem), ignore_errors=True)
        shutil.rmtree(RECORDS / f"{path.stem}.ovs", ignore_errors=True)   # a sandbox's
        bridges = tagged_bridges(path.stem)
        present = existing_interfaces()
        interfaces = [n for n in record.get("interfaces", []) if n not in claimed and n in present]
        remove_network(bridges, interfaces)
        log(f"cleaned up after lab {path.stem} ({record.get('fabric')}): {killed} processes, "
            f"{len(bridges)} bridges, {len(interfaces)} interfaces")
        if record.get("cluster"):              # a cluster run's head: its machines too
            cleanup_machines(record["cluster"]["machines"], record["cluster"]["user"], log)
        path.unlink()
    return len(dead) + cleanup_dead_keeper(log)


def cleanup_dead_keeper(log=print) -> int:
    """The records and sockets of kept labs whose keeper is gone (their labs'
    own records, owned by the keepers' pids, are cleaned up as any dead lab's)."""
    removed, selected = 0, kept.SELECTED
    for name in kept.names():
        kept.select(name)
        record = kept.read_record()
        if kept.keeper_alive(record):
            continue
        kept.remove_record()
        log(f"removed the record and socket of the kept lab {name!r} whose keeper "
            f"(pid {record and record.get('pid')}) died")
        removed += 1
    kept.select(selected)
    return removed
