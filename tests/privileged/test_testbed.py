"""The test bed of machines on one host (devtools/testbed.py, `scripts/lab testbed`):
two machines come up with their own sshd and Open vSwitch, reach each other,
run the project's environment, pass the cluster preflight (and fail it, one
line, when one's switch daemon is stopped), leave the host's Open vSwitch
alone, and `down` leaves nothing behind. Slow only when the root file system has to be
built first (debootstrap, a minute or more); a few seconds once it is cached."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import testbed
from harness.labs import ensure_no_testbed

REPO = Path(__file__).resolve().parents[2]
MACHINES = {"m1": "10.77.0.11", "m2": "10.77.0.12"}
pytestmark = [] if testbed.rootfs_current() else [pytest.mark.slow]


def lab(*args, timeout=60):
    return subprocess.run([str(REPO / "scripts" / "lab"), "testbed", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def ssh(ip, command, timeout=30):
    """Plain ssh: the host's ssh_config.d snippet from `up` supplies user, key and batch mode."""
    return subprocess.run(["ssh", ip, command], capture_output=True, text=True, timeout=timeout)


def preflight(ips):
    return subprocess.run([sys.executable, "-m", "lab.cluster.cluster_preflight", ",".join(ips)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def host_ovs():
    """What identifies the host's own Open vSwitch: its database and its daemons."""
    uuid = subprocess.run(["ovs-vsctl", "--timeout=5", "get", "Open_vSwitch", ".", "_uuid"],
                          capture_output=True, text=True).stdout.strip()
    pids = sorted(p.read_text().strip() for p in Path("/run/openvswitch").glob("*.pid"))
    return uuid, pids


def host_bridges():
    return set(subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                              text=True).stdout.split())


def leftovers(record):
    """Whatever of the record is still on the host."""
    left = [line for line in Path("/proc/mounts").read_text().splitlines()
            if str(testbed.STATE) in line]
    left += [name for name in [record["bridge"]] + [m["veth"] for m in record["machines"]]
             if Path(f"/sys/class/net/{name}").exists()]
    left += [f"pid {m[k]}" for m in record["machines"] for k in ("init", "unshare")
             if testbed.alive(m[k], m[f"{k}_start"])]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/root").startswith(str(testbed.STATE)):
                left.append(f"process {pid} chrooted in a machine")
        except OSError:
            continue
    left += [str(p) for p in (testbed.SNIPPET, testbed.RECORD) if p.exists()]
    left += [str(p) for p in testbed.STATE.glob("m*")]
    return left


def test_testbed_up_ssh_ovs_ping_venv_and_down_leaves_nothing():
    ensure_no_testbed()          # a live one fails the test; a dead one's record is removed
    ovs_before = host_ovs()
    up = lab("up", "2", timeout=1800)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        for name, ip in MACHINES.items():
            assert f"{name}  {ip}  ssh ready in" in up.stdout
        again = lab("up", "2")
        assert again.returncode == 1 and "already up" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1 and "Traceback" not in again.stderr
        record = json.loads(testbed.RECORD.read_text())
        for name, ip in MACHINES.items():
            assert ssh(ip, "hostname").stdout.strip() == name
            bridge = f"tbt{name}"
            show = ssh(ip, f"ovs-vsctl add-br {bridge} -- set bridge {bridge} "
                           f"datapath_type=netdev && ovs-vsctl show && ip -br link show {bridge}")
            assert show.returncode == 0, show.stderr
            assert f"Bridge {bridge}" in show.stdout and ovs_before[0] not in show.stdout
            assert bridge not in host_bridges() and not Path(f"/sys/class/net/{bridge}").exists()
        ping = ssh(MACHINES["m1"], f"ping -c 3 -W 2 {MACHINES['m2']}")
        assert ping.returncode == 0 and " 0% packet loss" in ping.stdout, ping.stdout
        # room for a fabric's 9000-byte frames in VXLAN between machines: 9050, unfragmented
        jumbo = ssh(MACHINES["m1"], f"ping -c 1 -W 2 -M do -s 9022 {MACHINES['m2']}")
        assert jumbo.returncode == 0, jumbo.stdout + jumbo.stderr
        venv = ssh(MACHINES["m1"], f"{REPO}/.venv/bin/python -c "
                                   "'import numpy, mininet; print(\"venv ok\")'")
        assert venv.stdout.strip() == "venv ok", venv.stderr
        # the cluster preflight on real machines: both ready; then m2's switch
        # daemon gone (its database still answers), and only m2 is reported
        ready = preflight(MACHINES.values())
        assert ready.returncode == 0, ready.stdout + ready.stderr
        ssh(MACHINES["m2"], "ovs-appctl -t ovs-vswitchd exit")
        broken = preflight(MACHINES.values())
        assert broken.returncode == 1
        lines = broken.stdout.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"{MACHINES['m2']}: Open vSwitch is not running"), broken.stdout
        assert lab("status").returncode == 0
    finally:
        down = lab("down")
    assert down.returncode == 0, down.stderr
    assert not leftovers(record)
    assert host_ovs() == ovs_before
    nothing = lab("down")
    assert nothing.returncode == 0 and "not up" in nothing.stdout
