"""Markers and the clean-host fixture. Everything under tests/privileged/
builds real networks (marker `privileged`): it needs root and a running Open
vSwitch, and skips with the reason otherwise. Tests marked `slow` take
minutes; CI runs them too. Each lab test checks that it leaves the host
exactly as it found it."""

import os

import pytest

from lab.records import host_state


def _skip_reason():
    if os.geteuid() != 0:
        return "needs root: builds real Mininet networks (run `sudo scripts/lab test`)"
    from lab.host import ovs_running
    if not ovs_running():
        return "Open vSwitch is not running (run `sudo scripts/lab setup`)"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "privileged" in item.path.parts:
            item.add_marker(pytest.mark.privileged)
        if "privileged" in item.keywords:
            reason = reason or _skip_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def clean_host():
    """Asserts, after the test, that the host is as it was before it."""
    before = host_state()
    yield
    after = host_state()
    assert after == before, f"the lab left something behind: {after} (before: {before})"
