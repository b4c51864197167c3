"""Real labs that must leave the host as they found it: what a lab could
leave behind, counting only what this test run or benchmark started; a lab
built and checked; no test bed up before a test brings its own."""

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from lab import records

# Every process a test run starts inherits it (tests/conftest.py sets it):
# our_state counts only those.
OWNER_VARIABLE = records.OWNER_VARIABLE
LAB_PROCESS = re.compile(r"mininet:|-m controller|-m programs\.|iperf3? |mnexec|run_topology\.py --keeper"
                         r"|unshare --net sleep|ovsdb-server /run/fabric-lab|ovs-vswitchd unix:/run/fabric-lab")
# any command a sandboxed lab ran (its ovs-vsctl, tc, ip): they carry the lab's OVS_RUNDIR
SANDBOXED = b"OVS_RUNDIR=/run/fabric-lab/"


def foreign_records(owner: str) -> list:
    """The records of live labs that another owner started (their process
    lacks FABRIC_LAB_OWNER=owner): theirs, not a leak of ours."""
    mark, theirs = f"{OWNER_VARIABLE}={owner}".encode(), []
    for path in records.records():
        pid = records.record_owner(path)
        try:
            if records.pid_alive(pid) and \
                    mark not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                theirs.append(path)
        except OSError:
            continue
    return theirs


def foreign_names(owner: str) -> set:
    """The root-namespace names claimed by live labs of another owner. A lab
    claims its names in its record before it creates them."""
    names = set()
    for path in foreign_records(owner):
        try:
            names.update(json.loads(path.read_text()).get("interfaces", []))
        except (OSError, ValueError):
            continue
    return names


def lab_processes(owner: "str | None") -> list:
    """Lab-like processes (Mininet shells, controllers, programs, iperf,
    mnexec, anything a sandboxed lab ran) other than this one; with `owner`, only those started under
    FABRIC_LAB_OWNER=owner (a process keeps its environment when orphaned)."""
    mark = f"{OWNER_VARIABLE}={owner}".encode() if owner else None
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            if int(pid) == os.getpid() or not (
                    LAB_PROCESS.search(cmd) or any(e.startswith(SANDBOXED) for e in env)):
                continue
            if mark and mark not in env:
                continue
        except OSError:
            continue
        procs.append(f"{pid} {cmd.strip()}")
    return sorted(procs)


def host_state(owner: "str | None" = None) -> dict:
    """What a lab could leave behind on this host: bridges, veths, named
    namespaces and lab-like processes; it only looks. Tests and benchmarks
    compare it before and after a lab to show that the teardown left
    nothing. With `owner`, what someone else's lab or test run holds on this
    host is not taken for a leak: only the processes started under
    FABRIC_LAB_OWNER=owner count, and bridges and veths claimed by another
    owner's live lab do not, nor the test bed's machines' veths."""
    foreign = foreign_names(owner) if owner else set()
    bridges = []
    if shutil.which("ovs-vsctl"):
        bridges = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                 text=True).stdout.split()
    # the test bed's machines hang on its bridge: a test bed has checks of
    # its own (ensure_no_testbed, tests/privileged/test_testbed.py), and
    # another test run's comes and goes beside ours
    from devtools.testbed import BRIDGE
    on_bed = f" master {BRIDGE} " if owner else None
    veths = [line.split(":")[1].strip().split("@")[0] for line in subprocess.run(
        ["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
        text=True).stdout.splitlines() if line.count(":") >= 2
        and not (on_bed and on_bed in line)]
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    return {"bridges": sorted(b for b in bridges if b not in foreign),
            "veths": sum(v not in foreign for v in veths), "netns": sorted(netns),
            "processes": lab_processes(owner), "dead_records": dead_records(owner)}


def dead_records(owner: "str | None" = None) -> list:
    """The records, and sandboxes' Open vSwitch folders, of labs whose
    process is gone: left for --cleanup. With `owner`, only the labs started
    under FABRIC_LAB_OWNER=owner (their records say so)."""
    left = []
    for path in records.records():
        if records.pid_alive(records.record_owner(path)):
            continue
        try:
            mark = json.loads(path.read_text()).get("owner")
        except (OSError, ValueError):
            mark = None
        if owner is None or mark == owner:
            left.append(path.name)
            folder = path.with_suffix(".ovs")
            if folder.exists():
                left.append(folder.name)
    return sorted(left)


def sandbox_of(pid: int, proc=None) -> dict:
    """Where the lab that process `pid` runs keeps its network (its record's
    `sandbox`: the pid whose namespace it is, Open vSwitch's folder), once
    it has made it; waits while `proc` (that process) lives."""
    while True:
        for path in records.records():
            if records.record_owner(path) == pid:
                try:
                    sandbox = json.loads(path.read_text()).get("sandbox")
                except (OSError, ValueError):
                    continue
                if sandbox:
                    return sandbox
        assert proc is None or proc.poll() is None, "the run ended before its lab had a sandbox"
        time.sleep(0.01)


def in_sandbox(sandbox: dict, args: list) -> str:
    """The output of a command run in a lab's network namespace, its Open
    vSwitch tools speaking to the lab's own daemons."""
    env = dict(os.environ, OVS_RUNDIR=sandbox["ovs_rundir"], OVS_DBDIR=sandbox["ovs_rundir"])
    return subprocess.run(["nsenter", f"--net=/proc/{sandbox['netns_pid']}/ns/net", *args],
                          capture_output=True, text=True, env=env).stdout


def our_state() -> dict:
    """host_state counting only what this test run started (the owner in
    its FABRIC_LAB_OWNER): another test run or lab on the host is not this
    run's leak."""
    return host_state(owner=os.environ.get(OWNER_VARIABLE))


@contextlib.contextmanager
def built(fabric, tmp_path_factory):
    """A real lab of `fabric`; afterwards the host must be as it was."""
    from lab.lifecycle import Lab
    before = our_state()
    with Lab(fabric, tmp_path_factory.mktemp(fabric.name)) as lab:
        yield lab
    assert our_state() == before, "the lab left something behind"


def ensure_no_testbed() -> None:
    """No test bed is up when a test is to bring its own: a live one fails
    the test (a privileged test never passes by skipping); the record of one
    whose machines are all gone is removed by devtools/testbed.py's own teardown,
    which touches only what that record names."""
    import pytest
    from devtools import testbed
    if not testbed.RECORD.exists():
        return
    with testbed.locked():
        record = testbed.load_record()
        if record is None:
            pytest.fail(f"{testbed.RECORD} exists but cannot be read: "
                        "`sudo scripts/lab testbed status`, then `down`")
        alive = [m["name"] for m in record.get("machines", []) if testbed.running(m)]
        if alive:
            pytest.fail(f"a test bed is already up ({', '.join(alive)} running): "
                        "`sudo scripts/lab testbed down` first")
        left = testbed.teardown(record)
    assert not left, f"a dead test bed's remains would not go: {left}"
    assert not testbed.RECORD.exists()


def wait_until_moving(intf="leaf1-eth1", nbytes=1 << 20, timeout=120, sandbox=None):
    """Until a server's link has carried `nbytes` more: a collective is
    under way (the latency probe alone moves 10 kB a second). `sandbox`: the
    lab's (sandbox_of) when another process runs it."""
    from lab.counters import interface_counters
    where = sandbox["netns_pid"] if sandbox else "thread-self"

    def tx():
        return interface_counters("tx_bytes", where)[intf]
    start, deadline = tx(), time.monotonic() + timeout
    while tx() - start < nbytes:
        assert time.monotonic() < deadline, "no collective traffic"
        time.sleep(0.01)
