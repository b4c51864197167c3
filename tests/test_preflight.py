"""The cluster preflight with a fake runner: which commands each machine gets,
and exactly the failing machines reported, one line each. Nothing reaches a
network (the subprocess runner is tried on local programs only)."""

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lab.cluster import cluster_preflight
from lab.cluster.cluster_preflight import PYTHON_PROBE, SSH, checks_for, preflight, run_command

PROJECT = Path("/opt/fabric-lab")
COMMIT = "9b1e0d2c4a7f" + "0" * 28
VERSION = "3.11.7 (main, Dec  8 2023, 14:22:46) [GCC 12.2.0]"
OVS_DOWN = ("ovs-vsctl: unix:/var/run/openvswitch/db.sock: database connection failed "
            "(No such file or directory)")


class FakeMachines:
    """A runner: `broken` maps a host to what is wrong with it."""

    def __init__(self, broken=None, local_ok=True):
        self.broken, self.local_ok, self.calls = broken or {}, local_ok, []

    def __call__(self, argv, timeout):
        self.calls.append(list(argv))
        if argv[0] != "ssh":                                  # this machine
            if argv[0] == "git":
                return (0, COMMIT) if self.local_ok else (128, "fatal: not a git repository")
            return 0, VERSION
        assert list(argv[:len(SSH)]) == list(SSH) and argv[len(SSH)] == "--"
        user, host = argv[len(SSH) + 1].split("@")
        return self.remote(host, argv[-1])

    def remote(self, host, command):
        wrong = self.broken.get(host)
        if wrong == "ssh":
            return 255, f"ssh: connect to host {host} port 22: Connection refused"
        if command == "true" or command == "sudo -n true":
            return (1, "sudo: a password is required") if wrong == "sudo" and "sudo" in command \
                else (0, "")
        if "ovs-vsctl" in command:
            return (1, OVS_DOWN) if wrong == "ovs" else (0, "1b2c...\n    ovs_version: \"3.1.0\"")
        if command.startswith("git"):
            return (0, "3f2a9c1b7d4e" + "1" * 28) if wrong == "commit" else (0, COMMIT)
        if wrong == "python":
            return 1, "Traceback (most recent call last):\n  ...\nModuleNotFoundError: " \
                      "No module named 'numpy'"
        return 0, ("3.11.2 (main)" if wrong == "version" else VERSION)


def test_every_machine_ready_gives_no_lines():
    runner = FakeMachines()
    assert preflight(["a", "10.77.0.12"], project=PROJECT, runner=runner) == []
    remote = [c[-1] for c in runner.calls if c[0] == "ssh" and c[-2] == "root@a"]
    assert remote == ["true", "ovs-vsctl --timeout=3 show >/dev/null && "
                      "ovs-appctl --timeout=3 -t ovs-vswitchd version",
                      "git -C /opt/fabric-lab rev-parse HEAD",
                      f"/opt/fabric-lab/.venv/bin/python -c {shlex.quote(PYTHON_PROBE)}"]


def test_exactly_the_failing_machines_are_reported_by_their_first_failure():
    broken = {"m2": "ovs", "m3": "ssh", "m5": "commit", "m6": "python", "m7": "version"}
    lines = preflight([f"m{i}" for i in range(1, 9)], project=PROJECT,
                      runner=FakeMachines(broken))
    assert lines == [
        f"m2: Open vSwitch is not running (ovs-vsctl show: {OVS_DOWN})",
        "m3: cannot log in with ssh as root without a password (ssh: connect to host m3 port "
        "22: Connection refused)",
        "m5: the project is at another commit (3f2a9c1b7d4e; here 9b1e0d2c4a7f)",
        "m6: the project's Python environment cannot import numpy and mininet "
        "(.venv/bin/python: ModuleNotFoundError: No module named 'numpy')",
        f"m7: the project's Python differs (3.11.2 (main); here {VERSION})",
    ]


def test_a_machine_that_fails_ssh_gets_no_further_commands():
    runner = FakeMachines({"b": "ssh"})
    preflight(["a", "b"], project=PROJECT, runner=runner)
    assert [c[-1] for c in runner.calls if c[0] == "ssh" and c[-2] == "root@b"] == ["true"]


def test_another_user_needs_passwordless_sudo():
    checks = checks_for("lab", PROJECT, COMMIT, VERSION)
    assert [c.remote for c in checks][:3] == [
        "true", "sudo -n true", "sudo -n ovs-vsctl --timeout=3 show >/dev/null && "
        "sudo -n ovs-appctl --timeout=3 -t ovs-vswitchd version"]
    lines = preflight(["a", "b"], user="lab", project=PROJECT,
                      runner=FakeMachines({"b": "sudo"}))
    assert lines == ["b: lab cannot run sudo without a password (sudo -n true: sudo: a "
                     "password is required)"]


def test_a_project_path_with_spaces_is_quoted():
    checks = checks_for("root", Path("/srv/fabric lab"), COMMIT, VERSION)
    assert checks[2].remote == "git -C '/srv/fabric lab' rev-parse HEAD"


def test_this_machine_without_a_commit_is_said_first():
    lines = preflight(["a"], project=PROJECT, runner=FakeMachines(local_ok=False))
    assert lines[0] == ("local: cannot read the project's commit here (git rev-parse: fatal: "
                        "not a git repository)")


def test_the_subprocess_runner_times_out_and_reports_missing_programs():
    assert run_command([sys.executable, "-c", "print('hi')"]) == (0, "hi")
    assert run_command([sys.executable, "-c", "import time; time.sleep(5)"], 0.3) == (
        124, "no answer within 0.3 s")
    status, output = run_command(["/nonexistent/fabric-lab-program"])
    assert status == 127 and "cannot run" in output


def test_main_prints_the_lines_and_exits_1(monkeypatch, capsys):
    monkeypatch.setattr(cluster_preflight, "run_command", FakeMachines({"b": "ovs"}))
    assert cluster_preflight.main(["a,b"]) == 1
    assert capsys.readouterr().out == f"b: Open vSwitch is not running (ovs-vsctl show: {OVS_DOWN})\n"
    monkeypatch.setattr(cluster_preflight, "run_command", FakeMachines())
    assert cluster_preflight.main(["a,b"]) == 0
    assert capsys.readouterr().out.startswith("all 2 machines ready")


@pytest.mark.parametrize("argv,message", [
    (["a,-oProxyCommand=x"], "error: HOST,HOST: expected a host name such as gpu-node1 or an "
                             "IPv4 address such as 10.77.0.11, got '-oProxyCommand=x' as "
                             "machine 2\n"),
    (["a,a"], "error: HOST,HOST: expected each machine once, got 'a' twice\n"),
    (["a", "--user", "x y"], "error: --user: expected a user name such as root (a-z, 0-9, "
                             "'_', '-'), got 'x y'\n"),
])
def test_bad_machines_are_one_sentence_and_nothing_runs(argv, message):
    proc = subprocess.run([sys.executable, "-m", "lab.cluster.cluster_preflight", *argv],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == message and proc.stdout == ""
