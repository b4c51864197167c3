"""A lab with BFD is handed over only once every session runs at its rate:
the moment it is ready, Open vSwitch shows each one sending every 10 ms and
knowing its peer does too (not still at the 1 s a session starts at)."""

import pytest

from harness.fabrics import leaf_spine
from harness.labs import built
from lab import host
from lab.lifecycle import bfd_at_rate

pytestmark = pytest.mark.privileged


def test_a_bfd_lab_is_ready_with_every_session_at_its_rate(tmp_path_factory):
    fabric = leaf_spine(2, 2, 1, rate=20, prefix="bf").edited(
        lambda spec: spec["routing"].update(bfd_ms=10))
    with built(fabric, tmp_path_factory) as lab:
        lab._here()
        shown = host.run(["ovs-appctl", "bfd/show"]).stdout
        assert shown.count("---- ") == 8                  # 4 links, both ends
        assert bfd_at_rate(shown, 10), shown
