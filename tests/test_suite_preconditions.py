"""The suite itself: as root, a host where no lab can start fails the privileged
tests with the reason (the run exits non-zero); without root they are skipped,
and the summary says why in one line."""

import os
import subprocess
import sys

import pytest

from harness import REPO

# Cheap privileged tests to run under a broken host: they never get to build a
# lab, because the precondition fails them first.
SELECTION = ["tests/privileged/test_lab.py", "-k", "not slow", "-p", "no:cacheprovider"]


def pytest_run(env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *SELECTION], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the unprivileged case is the other test")
def test_as_root_open_vswitch_unreachable_fails_the_run_with_the_reason(tmp_path):
    # OVS_RUNDIR points ovs-vsctl and ovs-appctl at a folder with no daemon's
    # socket: to the suite, Open vSwitch is down.
    proc = pytest_run({"OVS_RUNDIR": str(tmp_path)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "privileged tests FAILED: Open vSwitch is not running" in out
    last = out.splitlines()[-1]
    assert "passed" not in last and "skipped" not in last and " error" in last, out


def test_without_root_privileged_tests_skip_with_one_summary_line():
    if os.geteuid() == 0:
        # As root, drop to nobody for the run (the tree must be readable to it).
        proc = subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
             sys.executable, "-m", "pytest", "-q", *SELECTION],
            cwd=REPO, capture_output=True, text=True, timeout=300,
            env={**os.environ, "HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"})
    else:
        proc = pytest_run({})
    out = proc.stdout + proc.stderr
    if "Permission denied" in out:
        pytest.skip("the checkout is not readable by nobody")
    assert proc.returncode == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("skipped ")]
    assert len(lines) == 1 and "needs root" in lines[0], out
    count = int(lines[0].split()[1].rstrip(":"))
    assert count >= 1 and f"{count} skipped" in out.splitlines()[-1], out
