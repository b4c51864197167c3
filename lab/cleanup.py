"""Cleaning up after labs killed without their teardown (SIGKILL): from each
dead lab's record (lab/records.py), exactly what it owned, on this host and,
for a cluster run's head, on its machines; never by process name."""

from __future__ import annotations

import json
import shutil

from lab.cluster import cleanup_machines
from lab.host import existing_interfaces, remove_network, tagged_bridges
from lab.records import (RECORDS, kill_if_same, kill_registered, pid_alive, record_owner,
                         records, registered_dir)


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
        killed = sum(kill_if_same(pid, started) for pid, started in record.get("processes", []))
        killed += kill_registered(path.stem)
        shutil.rmtree(registered_dir(path.stem), ignore_errors=True)
        bridges = tagged_bridges(path.stem)
        present = existing_interfaces()
        interfaces = [n for n in record.get("interfaces", []) if n not in claimed and n in present]
        remove_network(bridges, interfaces)
        log(f"cleaned up after lab {path.stem} ({record.get('fabric')}): {killed} processes, "
            f"{len(bridges)} bridges, {len(interfaces)} interfaces")
        if record.get("cluster"):              # a cluster run's head: its machines too
            cleanup_machines(record["cluster"]["machines"], record["cluster"]["user"], log)
        path.unlink()
    return len(dead)
