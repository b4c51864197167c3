"""The single-path baseline on a real fabric (its own module: two labs with the
same switch names cannot run at once)."""

import pytest

from tests.fabrics import leaf_spine
from tests.test_lab import built, udp_flows, uplink_bytes
from traffic import checks

pytestmark = pytest.mark.privileged


@pytest.fixture(scope="module")
def single4(tmp_path_factory):
    with built(leaf_spine(4, 2, 2, policy="single-path"), tmp_path_factory) as lab:
        yield lab


def test_single_path_uses_one_spine(single4):
    assert checks.all_pairs_reachability(single4).complete
    per_spine = uplink_bytes(single4, "leaf1", lambda: udp_flows(single4, "h1", "h3"))
    total = sum(per_spine.values())
    assert total >= 16 * 60 * 1000
    assert sorted(per_spine.values())[-1] >= 0.99 * total, per_spine
