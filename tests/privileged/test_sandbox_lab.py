"""Labs in sandboxes of their own (lab/sandbox.py): two kept labs and a run
at once on one host, each with #wrong 0, one taken down leaving the others
intact; the host's interfaces and Open vSwitch untouched by a lab; a stop
signal in the middle of a teardown waiting for it to finish; a lab whose
process is SIGKILLed leaving no process behind, only its record."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from harness import REPO, TOPOLOGIES
from harness.commands import ENV, run, start
from harness.labs import host_state, our_state
from lab.kept import kept

LAB = REPO / "scripts" / "lab"
DEFAULT = str(TOPOLOGIES / "default.yaml")
SMALL = ("-b", "64K", "-e", "64K", "-n", "2", "-w", "0")
NAMES = [f"a{os.getpid()}", f"b{os.getpid()}"]


def lab(command, name, *args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(LAB), command, "--name", name, *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def wrong_of(out: str) -> list:
    """The #wrong column of an nccl-tests table."""
    rows = [l.split() for l in out.splitlines() if l.startswith("       ")]
    return [int(r[8]) for r in rows if len(r) > 8 and r[3] in ("sum", "prod", "min", "max", "avg")]


@pytest.fixture
def two_kept_labs(tmp_path):
    before = our_state()
    try:
        for name in NAMES:
            proc = run("--up", DEFAULT, "--name", name, "--results", str(tmp_path), timeout=300)
            assert proc.returncode == 0, proc.stderr + proc.stdout
        yield before
    finally:
        for name in NAMES:
            kept.select(name)
            if kept.keeper_alive(kept.read_record()):
                lab("down", name)
        kept.select()


def test_two_kept_labs_and_a_run_at_once_each_right_and_apart(two_kept_labs, tmp_path):
    """The same fabric three times on one host: same switch names, same
    addresses; each lab's collective is right, and taking one down leaves
    the other whole."""
    a, b = NAMES
    infos = [json.loads(lab("inspect", name, "--json").stdout) for name in NAMES]
    same = [[(h["name"], h["ip"], h["mac"]) for h in info["servers"]] for info in infos]
    assert same[0] == same[1] and len(same[0]) == 4              # same names and addresses
    # a third lab, a plain run, while both are up
    alone = run(*SMALL, "--results", str(tmp_path), timeout=600)
    assert alone.returncode == 0, alone.stderr
    assert wrong_of(alone.stdout) == [0]
    for name in NAMES:
        proc = run("--lab", "--name", name, *SMALL, "--results", str(tmp_path), timeout=600)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert wrong_of(proc.stdout) == [0], proc.stdout
    down = lab("down", a)
    assert down.returncode == 0, down.stderr
    assert "removed 4 bridges" in down.stdout
    # b is whole: it answers, reaches every pair and runs a collective right
    info = json.loads(lab("inspect", b, "--json").stdout)
    assert info["keeper"]["pid"] == infos[1]["keeper"]["pid"]
    h4 = next(h["ip"] for h in info["servers"] if h["name"] == "h4")
    ping = lab("exec", b, "h1", "--", "ping", "-c1", "-W5", h4)
    assert ping.returncode == 0 and "1 received" in ping.stdout
    proc = run("--lab", "--name", b, *SMALL, "--results", str(tmp_path), timeout=600)
    assert wrong_of(proc.stdout) == [0], proc.stdout + proc.stderr
    assert "no lab named" in lab("inspect", a).stderr
    assert lab("down", b).returncode == 0
    deadline = time.monotonic() + 60             # a cap: the keepers exit once down
    while our_state() != two_kept_labs and time.monotonic() < deadline:
        time.sleep(0.2)
    assert our_state() == two_kept_labs


def test_a_lab_touches_neither_the_hosts_interfaces_nor_its_open_vswitch(tmp_path):
    from lab.lifecycle import Lab
    from topologies.fabric import load_fabric
    outside = host_state()
    host_ns = subprocess.Popen(["sleep", "600"])            # a way back to the host's namespace
    with Lab(load_fabric(DEFAULT), tmp_path) as lab_:
        inside = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True,
                                text=True).stdout.split()
        assert inside == ["leaf1", "leaf2", "spine1", "spine2"]     # the lab's own OVS
        seen = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        assert "leaf1-eth1" in seen and "h1-eth0" not in seen       # h1's end is in h1
        record = json.loads(lab_.record_path.read_text())
        assert record["interfaces"] == [] and record["sandbox"]["netns_pid"] > 0
        # from the host's side (its namespace, its Open vSwitch): as it was
        host_env = {k: v for k, v in os.environ.items() if not k.startswith("OVS_")}
        now = subprocess.run(["nsenter", f"--net=/proc/{host_ns.pid}/ns/net", sys.executable, "-c",
                              "import json; from harness.labs import host_state; "
                              "print(json.dumps(host_state()))"], capture_output=True,
                             text=True, env=host_env, cwd=REPO)
        now = json.loads(now.stdout)
        assert (now["bridges"], now["veths"]) == (outside["bridges"], outside["veths"])
    host_ns.kill()
    host_ns.wait()
    assert not lab_.record_path.exists()
    assert "OVS_RUNDIR" not in os.environ or os.environ["OVS_RUNDIR"] != str(lab_.sandbox.folder)
    assert not lab_.sandbox.folder.exists()


def test_a_stop_signal_during_teardown_waits_for_it(tmp_path, clean_host):
    """SIGINT arrives while the sandbox is being let go: the teardown
    finishes, then the Ctrl-C takes its course."""
    from lab.lifecycle import Lab
    from topologies.fabric import load_fabric
    lab_ = Lab(load_fabric(DEFAULT), tmp_path)
    lab_.start()
    leave = lab_.sandbox.leave

    def interrupted_leave():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)                   # the handler has run by now, in this thread
        leave()
    lab_.sandbox.leave = interrupted_leave
    # Ctrl-C's own handler, whatever an earlier test left (run_topology's
    # in-process runs ignore stop signals once one came)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            lab_.stop()
    finally:
        signal.signal(signal.SIGINT, saved)
    assert lab_._stopped and "teardown_s" in lab_.timings
    assert not lab_.record_path.exists()
    assert all(p.poll() is not None for p in lab_.processes)


def test_a_sigkilled_lab_leaves_no_process_only_its_record(tmp_path):
    before = our_state()
    proc = start("--cli", "--no-traffic", "--results", str(tmp_path))
    try:
        seen = ""
        while "reach" not in seen:
            line = proc.stdout.readline()
            assert line, "the run ended before the lab was up"
            seen += line
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 60          # its processes die with it (a cap)
    while our_state()["processes"] != before["processes"] and time.monotonic() < deadline:
        time.sleep(0.1)
    after = our_state()
    assert after["processes"] == before["processes"]
    assert (after["bridges"], after["veths"]) == (before["bridges"], before["veths"])
    left = [name for name in after["dead_records"] if name not in before["dead_records"]]
    assert len(left) == 2 and any(re.fullmatch(rf"{proc.pid}-\d+\.json", n) for n in left)
    out = run("--cleanup")
    assert out.returncode == 0 and f"cleaned up after lab {proc.pid}-" in out.stdout
    assert our_state() == before


def test_a_process_the_lab_did_not_track_ends_with_it(tmp_path_factory):
    """A command started in the lab's namespace that the lab never heard of
    (as Mininet's ovs-vsctl is, when a stop signal cuts a build short and
    leaves it waiting for a database that is gone) is ended with the lab:
    nothing may keep its namespace alive."""
    from harness.fabrics import leaf_spine
    from harness.labs import built
    from lab import sandbox
    with built(leaf_spine(2, 2, 1, prefix="sg"), tmp_path_factory):
        out = subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True)
        stray = int(out.stdout)
        assert sandbox.is_alive(stray)
        assert sandbox.current() is not None
        assert os.stat(f"/proc/{stray}/ns/net").st_ino == \
            os.stat(f"/proc/{sandbox.current().holder.pid}/ns/net").st_ino
    assert not sandbox.is_alive(stray)
