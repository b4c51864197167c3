"""Real fabrics: Mininet, Open vSwitch and the os-ken controller, with real
packets. Each lab is checked to leave nothing behind when it is torn down."""

import contextlib
import json
import subprocess
import time

import pytest

from tests.conftest import host_state
from tests.fabrics import leaf_spine
from topologies.lab import Lab
from traffic import checks

pytestmark = pytest.mark.privileged


@contextlib.contextmanager
def built(fabric, tmp_path_factory):
    before = host_state()
    lab = Lab(fabric, tmp_path_factory.mktemp(fabric.name))
    with lab:
        yield lab
    assert host_state() == before, "the lab left something behind"


@pytest.fixture(scope="module")
def ecmp4(tmp_path_factory):
    """4 spines x 4 leaves x 2 servers, ECMP."""
    with built(leaf_spine(4, 4, 2), tmp_path_factory) as lab:
        yield lab


def uplink_bytes(lab, leaf, run):
    before = checks.uplink_counters(lab.fabric)[leaf]
    run()
    after = checks.uplink_counters(lab.fabric)[leaf]
    spine_of = {l.a_intf: l.b for l in lab.fabric.uplinks(leaf)}
    return {spine_of[i]: after[i] - before[i] for i in after}


def udp_flows(lab, src, dst, sports="40000:40015", packets=60):
    """16 UDP flows, paced so the sender's shaped link does not drop them."""
    ip = lab.fabric.server(dst).ip
    proc = lab.popen(src, checks.flows_command("udp", "--dst", ip, "--sports", sports,
                                               "--packets", str(packets), "--pps", "200"), text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["packets_sent"] == 16 * packets


def tcp_flows(lab, src, dst, sports="41000:41015", nbytes=200_000):
    ip = lab.fabric.server(dst).ip
    sink = lab.popen(dst, checks.flows_command("sink", "--port", "5001", "--connections", "16"),
                     text=True)
    assert json.loads(sink.stdout.readline()) == {"listening": 5001}
    sender = lab.popen(src, checks.flows_command("tcp", "--dst", ip, "--sports", sports,
                                                 "--bytes", str(nbytes)), text=True)
    _, err = sender.communicate(timeout=60)
    assert sender.returncode == 0, err
    received = json.loads(sink.communicate(timeout=60)[0])["received"]
    assert received == {str(p): nbytes for p in range(41000, 41016)}


def test_all_pairs_reach_each_other_on_a_4_spine_fabric(ecmp4):
    reach = checks.all_pairs_reachability(ecmp4)
    assert reach.complete, reach.failures
    assert reach.total == 8 * 7
    assert ecmp4.controller_status()["versions"] == {s.name: "OpenFlow15"
                                                     for s in ecmp4.fabric.switches}


def test_udp_flows_spread_over_every_spine(ecmp4):
    per_spine = uplink_bytes(ecmp4, "leaf1", lambda: udp_flows(ecmp4, "h1", "h3"))
    total = sum(per_spine.values())
    assert total >= 16 * 60 * 1000
    # each spine carries at least half of one flow's share: every spine is used
    assert all(v >= total / 16 / 2 for v in per_spine.values()), per_spine
    buckets = checks.group_bucket_packets("leaf1", 2)
    assert len(buckets) == 4 and all(b > 0 for b in buckets), buckets


def test_tcp_flows_spread_over_every_spine(ecmp4):
    per_spine = uplink_bytes(ecmp4, "leaf2", lambda: tcp_flows(ecmp4, "h3", "h5"))
    total = sum(per_spine.values())
    assert total >= 16 * 200_000
    assert all(v >= total / 16 / 2 for v in per_spine.values()), per_spine


def test_links_are_shaped_and_the_controller_listens_on_loopback_only(ecmp4):
    out = subprocess.run(["tc", "class", "show", "dev", "leaf1-eth3"], capture_output=True,
                         text=True).stdout
    assert "htb 1:1" in out and "rate 50Mbit" in out
    inside = ecmp4.host("h1").cmd("tc qdisc show dev h1-eth0")
    assert "pfifo 10:" in inside and "limit 100p" in inside
    listen = subprocess.run(["ss", "-Hltn", f"sport = :{ecmp4.of_port}"], capture_output=True,
                            text=True).stdout.split()
    assert listen[3] == f"127.0.0.1:{ecmp4.of_port}"


def test_a_link_down_keeps_every_pair_reachable_and_coming_back_restores_it(ecmp4):
    ecmp4.set_link("leaf2", "spine1", up=False)
    try:
        ecmp4.wait_programmed(timeout=10, until=lambda s: {"leaf2:3", "spine1:2"} <= set(s["down_ports"]))
        reach = checks.all_pairs_reachability(ecmp4)
        assert reach.complete, reach.failures
        # traffic towards leaf2 from another leaf no longer crosses spine1
        per_spine = uplink_bytes(ecmp4, "leaf1", lambda: udp_flows(ecmp4, "h1", "h3"))
        assert per_spine["spine1"] < 1000 and sum(per_spine.values()) >= 16 * 60 * 1000
    finally:
        ecmp4.set_link("leaf2", "spine1", up=True)
    ecmp4.wait_programmed(timeout=10, until=lambda s: s["down_ports"] == [])
    per_spine = uplink_bytes(ecmp4, "leaf1", lambda: udp_flows(ecmp4, "h1", "h3"))
    assert all(v > 0 for v in per_spine.values()), per_spine
