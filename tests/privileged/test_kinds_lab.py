"""Every kind of fabric in topologies/ built for real: run_topology.py builds
it, every endpoint reaches every other, and the teardown leaves nothing.
Each lab is torn down before the next one is built."""

import json

import pytest

from harness import TOPOLOGIES
from harness.commands import run
from harness.labs import built
from harness.traffic import flows_command, read_counter, settled
from topologies.fabric import load_fabric



@pytest.mark.parametrize("name,endpoints", [
    ("fat-tree-k4", 16), ("single-switch", 8), ("full-mesh", 6), ("rail-optimized", 32),
    ("leaf-spine-4gpu", 32), ("oversubscribed", 12)])
def test_each_kind_builds_and_every_endpoint_reaches_every_other(tmp_path, clean_host,
                                                                   name, endpoints):
    proc = run(str(TOPOLOGIES / f"{name}.yaml"), "--no-traffic", "--json",
               "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    reach = json.loads(proc.stdout)["reachability"]
    assert reach["ok"] == reach["total"] == endpoints * (endpoints - 1)


def test_udp_flows_between_pods_spread_over_every_core(tmp_path_factory):
    """A k=4 fat-tree has 4 equal-cost paths between pods, one per core: 64
    UDP flows (distinct source ports) from a server of pod 1 to one of pod 4
    put traffic through all of them: every switch hashes with its own basis,
    so the edge's choice does not fix the aggregation switch's."""
    fabric = load_fabric(TOPOLOGIES / "fat-tree-k4.yaml")
    cores = [l for l in fabric.links if l.kind == "spine_core"]
    with built(fabric, tmp_path_factory) as lab:
        dst = fabric.endpoint("h16").ip
        assert "1 received" in lab.host("h1").cmd(f"ping -n -c1 -W5 {dst}")   # ARP first
        before = {l.b_intf: read_counter(l.b_intf, "rx_bytes") for l in cores}
        # 64 flows x 2 rounds a second x 1042 B = 1.1 Mbit/s: well under the
        # 5 Mbit/s links, so no queue drops and the spread is the hashing's
        proc = lab.popen("h1", flows_command(
            "udp", "--dst", dst, "--sports", "40000:40063", "--packets", "5", "--pps", "2"),
            text=True)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out)["packets_sent"] == 64 * 5
        after = settled(lambda: {l.b_intf: read_counter(l.b_intf, "rx_bytes") for l in cores})
    per_core = {}
    for l in cores:
        per_core[l.b] = per_core.get(l.b, 0) + after[l.b_intf] - before[l.b_intf]
    assert sorted(per_core) == ["core1", "core2", "core3", "core4"]
    # every core carries a fair share (64 flows over 4 paths: about 16 each);
    # with one hash basis on every switch, two cores carried nothing
    assert sum(per_core.values()) >= 0.9 * 64 * 5 * 1000                  # it arrived
    mean = sum(per_core.values()) / 4
    assert min(per_core.values()) > mean / 4, per_core
