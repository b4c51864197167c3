"""Every kind of fabric in topologies/ built for real: run_topology.py builds
it, every endpoint reaches every other, and the teardown leaves nothing.
(A module of its own: these labs reuse the switch names of other modules'.)"""

import json

import pytest

from tests.conftest import REPO
from tests.test_run_topology import run

pytestmark = pytest.mark.privileged


@pytest.mark.parametrize("name,endpoints", [
    ("fat-tree-k4", 16), ("single-switch", 8), ("full-mesh", 6), ("rail-optimized", 32),
    ("leaf-spine-4gpu", 32), ("oversubscribed", 12)])
def test_each_kind_builds_and_every_endpoint_reaches_every_other(tmp_path, clean_host,
                                                                   name, endpoints):
    proc = run(str(REPO / "topologies" / f"{name}.yaml"), "--no-traffic", "--json",
               "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    reach = json.loads(proc.stdout)["reachability"]
    assert reach["ok"] == reach["total"] == endpoints * (endpoints - 1)
