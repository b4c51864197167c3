"""Shared fixtures. Tests marked `privileged` build real networks: they need
root and a running Open vSwitch, and skip with the reason otherwise. Each one
is checked to leave the host exactly as it found it."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAB_PROCESS = re.compile(r"mininet:|-m controller|traffic\.flows|iperf3? |mnexec")


def _skip_reason():
    if os.geteuid() != 0:
        return "needs root: builds real Mininet networks (run `sudo scripts/lab test`)"
    from topologies.system import ovs_running
    if not ovs_running():
        return "Open vSwitch is not running (run `sudo scripts/lab setup`)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "privileged" in item.keywords:
            reason = reason or _skip_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


def host_state():
    """What a lab could leave behind: bridges, veths, named namespaces, processes."""
    bridges = []
    if shutil.which("ovs-vsctl"):
        bridges = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                                 text=True).stdout.split()
    veths = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                           text=True).stdout.splitlines()
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if LAB_PROCESS.search(cmd) and int(pid) != os.getpid():
            procs.append(f"{pid} {cmd.strip()}")
    return {"bridges": sorted(bridges), "veths": len(veths), "netns": sorted(netns),
            "processes": sorted(procs)}


@pytest.fixture
def clean_host():
    """Asserts, after the test, that the host is as it was before it."""
    before = host_state()
    yield
    after = host_state()
    assert after == before, f"the lab left something behind: {after} (before: {before})"
