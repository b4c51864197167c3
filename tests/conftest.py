"""Markers, the lab precondition and the clean-host fixture.

Everything under tests/privileged/ builds real networks (marker
`privileged`). Without root those tests are skipped: a missing privilege is
the one reason a test may skip, and the summary says so in one line. As root,
a lab that cannot start (Open vSwitch down, Mininet missing) is a broken
machine, not a reason to skip: every privileged test then fails with that
reason, so the run exits non-zero instead of passing on the pure tests alone.
Tests marked `slow` take minutes; CI runs them too. Each lab test checks that
it leaves the host exactly as it found it (its own processes: those that
inherit this run's FABRIC_LAB_OWNER)."""

import collections
import os
import shutil

import pytest

from harness.labs import OWNER_VARIABLE, our_state

# Every process this run starts inherits it: the clean-host checks count only those.
os.environ.setdefault(OWNER_VARIABLE, f"pytest-{os.getpid()}")

NOT_ROOT = "needs root: builds real Mininet networks (run `sudo scripts/lab test`)"


def lab_unavailable_reason():
    """Why a lab cannot start on this host although we are root; None when it can."""
    from lab.host import ovs_running
    if not ovs_running():
        return ("Open vSwitch is not running, so no lab can start "
                "(`sudo scripts/lab setup` starts it; see /var/log/openvswitch/)")
    if not shutil.which("mnexec"):
        return "Mininet's mnexec is not installed, so no lab can start (`sudo scripts/lab setup`)"
    return None


def pytest_collection_modifyitems(config, items):
    privileged = []
    for item in items:
        if "privileged" in item.path.parts:
            item.add_marker(pytest.mark.privileged)
        if "privileged" in item.keywords:
            privileged.append(item)
    if not privileged:
        return
    if os.geteuid() != 0:
        for item in privileged:
            item.add_marker(pytest.mark.skip(reason=NOT_ROOT))
        return
    reason = lab_unavailable_reason()
    if reason:
        config.stash[LAB_UNAVAILABLE] = reason
        for item in privileged:
            item.add_marker(pytest.mark.lab_unavailable)


LAB_UNAVAILABLE = pytest.StashKey[str]()


def pytest_runtest_setup(item):
    """Fails a privileged test, as root, on a host where no lab can start,
    before any of its fixtures tries to build one."""
    if item.get_closest_marker("lab_unavailable"):
        pytest.fail(item.config.stash[LAB_UNAVAILABLE], pytrace=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "lab_unavailable: set by conftest when no lab can start")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Skips, one line per reason; and, as root, why the lab tests failed."""
    reasons = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in sorted(reasons.items()):
        terminalreporter.write_line(f"skipped {count}: {reason}")
    if LAB_UNAVAILABLE in config.stash:
        terminalreporter.write_line(
            f"privileged tests FAILED: {config.stash[LAB_UNAVAILABLE]}", red=True, bold=True)


@pytest.fixture
def clean_host():
    """Asserts, after the test, that the host is as it was before it."""
    before = our_state()
    yield
    after = our_state()
    assert after == before, f"the lab left something behind: {after} (before: {before})"
