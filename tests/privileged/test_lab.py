"""Real fabrics: Mininet, Open vSwitch and the os-ken controller, with real
packets: reachability, ECMP spreading of UDP and TCP flows over every spine,
shaping, link failure, and the single-path baseline beside it (its lab has
its own node names, so both labs can exist at once). Each lab is checked to
leave nothing behind when it is torn down."""

import re
import subprocess
from pathlib import Path

import pytest

from lab.reachability import all_pairs_reachability
from harness.fabrics import leaf_spine
from harness.labs import built
from harness.traffic import group_bucket_packets, tcp_flows, udp_flows, uplink_bytes


@pytest.fixture(scope="module")
def ecmp4(tmp_path_factory):
    """4 spines x 4 leaves x 2 servers, ECMP."""
    with built(leaf_spine(4, 4, 2), tmp_path_factory) as lab:
        yield lab


@pytest.fixture(scope="module")
def single4(tmp_path_factory):
    """4 spines x 2 leaves x 2 servers, single-path, node names prefixed 'p'."""
    with built(leaf_spine(4, 2, 2, policy="single-path", prefix="p"), tmp_path_factory) as lab:
        yield lab


def test_all_pairs_reach_each_other_on_a_4_spine_fabric(ecmp4):
    reach = all_pairs_reachability(ecmp4)
    assert reach.complete, reach.failures
    assert reach.total == 8 * 7
    assert ecmp4.controller_status()["versions"] == {s.name: "OpenFlow15"
                                                     for s in ecmp4.fabric.switches}


def test_udp_flows_spread_over_every_spine(ecmp4):
    per_spine = uplink_bytes(ecmp4, "leaf1", lambda: udp_flows(ecmp4, "h1", "h3"))
    total = sum(per_spine.values())
    assert total >= 16 * 60 * 900                  # nearly all of 16 x 60 frames of 1042 B
    # each spine carries at least half of one flow's share: every spine is used
    assert all(v >= total / 16 / 2 for v in per_spine.values()), per_spine
    buckets = group_bucket_packets("leaf1", 2)
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
    assert "pfifo 10:" in inside and "pfifo 5:" in inside and "limit 100p" in inside
    listen = subprocess.run(["ss", "-Hltn", f"sport = :{ecmp4.controller.port}"], capture_output=True,
                            text=True).stdout.split()
    assert listen[3] == f"127.0.0.1:{ecmp4.controller.port}"


def _class_sent(intf: str) -> dict:
    """bytes and packets each HTB class of a switch interface has sent (tc
    has no JSON for classes)."""
    out = subprocess.run(["tc", "-s", "class", "show", "dev", intf], capture_output=True,
                         text=True, check=True).stdout
    return {handle: (int(b), int(p)) for handle, b, p in
            re.findall(r"class htb (\S+) .*\n Sent (\d+) bytes (\d+) pkt", out)}


def test_acks_leave_by_their_own_class_and_data_by_the_data_class(ecmp4):
    to_h1, to_h2 = (next(l.b_intf if l.b == "leaf1" else l.a_intf for l in ecmp4.fabric.links
                         if {l.a, l.b} == {"leaf1", h}) for h in ("h1", "h2"))
    before = {i: _class_sent(i) for i in (to_h1, to_h2)}
    tcp_flows(ecmp4, "h1", "h2", sports="42000:42015")
    after = {i: _class_sent(i) for i in (to_h1, to_h2)}
    sent = {i: {c: (after[i][c][0] - before[i][c][0], after[i][c][1] - before[i][c][1])
                for c in ("1:5", "1:10")} for i in after}
    data_bytes, _ = sent[to_h2]["1:10"]
    ack_bytes, acks = sent[to_h1]["1:5"]
    assert data_bytes >= 16 * 200_000, sent
    assert acks >= 16 * 10 and ack_bytes / acks < 128, sent       # toward the sender: ACKs
    assert sent[to_h1]["1:10"][0] < ack_bytes, sent               # and nothing big
    assert sent[to_h2]["1:5"][0] < data_bytes / 20, sent          # the data went by 1:10


OVS_LOG = Path("/var/log/openvswitch/ovs-vswitchd.log")


def test_every_frame_the_fabric_drops_is_dropped_where_a_queue_counts_it(ecmp4):
    """Open vSwitch's userspace datapath sends through one packet socket: with
    a small send buffer it drops frames (logging "error sending") before any
    shaped queue sees them. 16 TCP flows into one server fill its queue."""
    assert ecmp4.warnings == []
    start = OVS_LOG.stat().st_size if OVS_LOG.exists() else 0
    tcp_flows(ecmp4, "h1", "h3", sports="43000:43015", nbytes=400_000)
    with OVS_LOG.open(errors="replace") as log:
        log.seek(start)
        lost = [line for line in log if "error sending" in line]
    assert lost == [], lost[:3]


def test_a_link_down_keeps_every_pair_reachable_and_coming_back_restores_it(ecmp4):
    ecmp4.set_link("leaf2", "spine1", up=False)
    try:
        ecmp4.wait_programmed(timeout=10, until=lambda s: {"leaf2:3", "spine1:2"} <= set(s["down_ports"]))
        reach = all_pairs_reachability(ecmp4)
        assert reach.complete, reach.failures
        # traffic towards leaf2 from another leaf no longer crosses spine1
        per_spine = uplink_bytes(ecmp4, "leaf1", lambda: udp_flows(ecmp4, "h1", "h3"))
        assert per_spine["spine1"] < 1000 and sum(per_spine.values()) >= 16 * 60 * 900
    finally:
        ecmp4.set_link("leaf2", "spine1", up=True)
    ecmp4.wait_programmed(timeout=10, until=lambda s: s["down_ports"] == [])
    per_spine = uplink_bytes(ecmp4, "leaf1", lambda: udp_flows(ecmp4, "h1", "h3"))
    assert all(v > 0 for v in per_spine.values()), per_spine


def test_single_path_uses_one_spine(single4):
    assert all_pairs_reachability(single4).complete
    per_spine = uplink_bytes(single4, "pleaf1", lambda: udp_flows(single4, "ph1", "ph3"))
    total = sum(per_spine.values())
    assert total >= 16 * 60 * 900
    assert sorted(per_spine.values())[-1] >= 0.99 * total, per_spine
