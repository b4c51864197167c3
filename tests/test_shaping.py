"""How links are shaped and what the host must give them, as pure functions:
the tc lines (an ACK class served first, the data class the default, the
filter that tells them apart), the window a connection may use, and the
Open vSwitch send buffer read from `ss`."""

from lab.host import OVS_SEND_BUFFER, parse_send_buffer
from lab.shaping import (connection_windows, frame_bytes, queue_commands, tc_commands,
                         window_bytes)
from harness import REPO
from topologies.fabric import LinkSpec


class L:
    def __init__(self, kind, rate, delay=0.0):
        self.kind = kind
        self.spec = LinkSpec(rate_mbit=rate, queue_packets=32, delay_ms=delay, loss_percent=0)


def test_pure_acks_get_a_class_served_first_and_everything_else_the_data_class():
    cmds = tc_commands("x", LinkSpec(20, 32, 0, 0), 9000)
    assert cmds[0] == "qdisc replace dev x root handle 1: htb default 10"
    ack = next(c for c in cmds if "classid 1:5 " in c)
    data = next(c for c in cmds if "classid 1:10 " in c)
    assert "prio 0" in ack and "prio 1" in data and "ceil 20mbit" in ack and "ceil 20mbit" in data
    # the two classes share the link's rate, no more
    assert "rate 1mbit" in ack and "rate 19mbit" in data
    probe, flt, bfd = (next(c for c in cmds if "prio 2" in c), next(c for c in cmds
                       if "prio 1" in c and c.startswith("filter")),
                       next(c for c in cmds if "prio 3" in c))
    # BFD's control packets (UDP to 3784) too: a full data queue must not end a session
    assert "match u16 0x0ec8 0xffff at 22" in bfd and bfd.endswith("flowid 1:5")
    assert "match ip protocol 6 0xff" in flt and "0xff80 at 2" in flt      # TCP, < 128 B
    assert "match u8 0x10 0xff at 33" in flt and flt.endswith("flowid 1:5")  # ACK flag alone
    # UDP to the failure probe's ports 9296-9311 (0x2450-0x245f) too
    assert "match ip protocol 17 0xff" in probe and "match u16 0x2450 0xfff0 at 22" in probe
    assert probe.endswith("flowid 1:5")
    assert sum("pfifo limit 32" in c for c in cmds) == 2
    # a silent failure: the same two queues, holding nothing
    # (no handle: with one, a netem queue could not be replaced by a pfifo)
    assert queue_commands("x", LinkSpec(20, 32, 0, 0), drop=True) == [
        "qdisc replace dev x parent 1:10 pfifo limit 0",
        "qdisc replace dev x parent 1:5 pfifo limit 0"]


def test_with_delay_both_classes_are_delayed_alike():
    cmds = tc_commands("x", LinkSpec(20, 32, 5, 1), 1500)
    netem = [c for c in cmds if " netem " in c]
    assert len(netem) == 2 and all("delay 5ms loss 1%" in c for c in netem)


def test_a_window_covers_its_link_over_the_round_trip_and_never_under_a_few_frames():
    assert window_bytes(20, 0, 9000) == 4 * frame_bytes(9000)               # frames decide
    assert window_bytes(1000, 0, 9000) == int(1000e6 / 8 * 0.010)          # the rate does
    # 10 ms on each of the 6 links of the longest path, both ways
    assert window_bytes(100, 10, 1500) == int(100e6 / 8 * (0.010 + 2 * 6 * 0.010))


def test_peers_in_a_server_get_nvlinks_window_and_the_others_their_nics():
    links = [L("server_leaf", 10), L("leaf_spine", 40), L("intra_node", 100), L("pcie", 50)]
    assert connection_windows(links, 1500) == (window_bytes(10, 0, 1500),
                                               window_bytes(100, 0, 1500))
    one_gpu = [L("server_leaf", 10), L("leaf_spine", 40, delay=1)]
    network, inside = connection_windows(one_gpu, 1500)
    assert network == inside == window_bytes(10, 1, 1500)


SS = """Netid State  Recv-Q Send-Q Local Address:Port Peer Address:PortProcess
p_raw UNCONN 0 0 *:leaf1-eth1 * users:(("ovs-vswitchd",pid=9,fd=70)) skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d0)
p_raw UNCONN 0 0 [0]:* * users:(("tcpdump",pid=5,fd=3)) skmem:(r0,rb1,t0,tb1,f0,w0,o0,bl0,d0)
p_raw UNCONN 0 0 [0]:* * users:(("ovs-vswitchd",pid=9,fd=68)) skmem:(r0,rb212992,t0,tb67108864,f0,w0,o0,bl0,d0)
"""


def test_the_send_buffer_is_read_from_ovs_vswitchds_sending_socket_only():
    assert parse_send_buffer(SS) == OVS_SEND_BUFFER
    assert parse_send_buffer(SS.splitlines()[0] + "\n" + SS.splitlines()[1]) is None


def test_spanning_tree_is_rooted_at_the_top_tiers_first_switch_every_run():
    from lab.mininet_build import stp_priority
    from topologies.fabric import load_fabric
    for name, root in (("default.yaml", "spine1"), ("fat-tree-k4.yaml", "core1")):
        fabric = load_fabric(REPO / "topologies" / name)
        ranked = sorted(fabric.switches, key=stp_priority)
        assert ranked[0].name == root
        assert len({stp_priority(sw) for sw in fabric.switches}) == len(fabric.switches)


# --- ECN where the network technology marks and the kernel can (lab/ecn.py) ------------

def test_where_the_lab_marks_the_switches_data_queues_are_red_at_k_and_the_servers_not():
    from lab.ecn import EcnPlan
    from lab.mininet_build import shaping_plan
    from topologies.fabric import load_fabric
    f = load_fabric("topologies/default.yaml")
    marked, plain = shaping_plan(f, True), shaping_plan(f, False)
    red = [c for c in marked["leaf1-eth1"] if " red " in c]
    # 20 Mbit/s, queue 32 frames of 9014 B: K = 6 frames, marking every ECN-capable frame from K
    assert red == ["qdisc replace dev leaf1-eth1 parent 1:10 handle 10: red limit 288448 "
                   "min 54084 max 63098 avpkt 9014 burst 7 bandwidth 20mbit probability 1 ecn"]
    assert not any(" red " in c for c in marked["h1-eth0"])            # a NIC does not mark
    assert not any(" red " in c for cmds in plain.values() for c in cmds)
    assert EcnPlan(True, True, True).note.startswith("switch egress queues mark ECN")
    assert "this kernel has no sch_red and no tcp_dctcp" in EcnPlan(True, False, False).note
    assert EcnPlan(False, False, False).note is None


def test_a_lab_on_several_machines_says_what_each_machines_kernel_does_about_ecn():
    """Each machine's kernel decides its own part (lab/cluster/): the lab's
    plan marks only where all of them mark, and its note names the ones that
    differ."""
    from lab.ecn import EcnPlan, combine
    full = {"asked": True, "marking": True, "dctcp": True}
    bare = {"asked": True, "marking": False, "dctcp": False}
    both = combine({"machine 1 (a)": full, "machine 2 (b)": full})
    assert (both.marking, both.dctcp) == (True, True)
    assert both.note.endswith("the servers run DCTCP on every machine")
    mixed = combine({"machine 1 (a)": full, "machine 2 (b)": bare})
    assert (mixed.asked, mixed.marking, mixed.dctcp) == (True, False, False)
    assert mixed.note == ("asked by the network technology; machine 1 (a) marks (RED at K) and "
                          "runs DCTCP; machine 2 (b) drops at its queues' tail, TCP without ECN "
                          "(no sch_red and no tcp_dctcp)")
    assert mixed.to_dict()["machines"] == [
        {"machine": "machine 1 (a)", "marking": True, "dctcp": True},
        {"machine": "machine 2 (b)", "marking": False, "dctcp": False}]
    none = combine({"machine 1 (a)": bare, "machine 2 (b)": bare})
    assert "no machine's kernel has sch_red and no tcp_dctcp" in none.note
    half = combine({"m1": {"asked": True, "marking": True, "dctcp": False}, "m2": bare})
    assert "m1 marks (RED at K), but its servers have no tcp_dctcp" in half.note
    assert not combine({"m1": {"asked": False, "marking": False, "dctcp": False}}).asked
    assert "machines" not in EcnPlan(True, True, True).to_dict()        # one machine's lab


def test_which_technologies_ask_for_ecn():
    from lab.ecn import asked
    from topologies.fabric import load_fabric
    f = load_fabric("topologies/default.yaml")
    assert asked(f) and asked(f.with_network("spectrum-x"))
    assert not asked(f.with_network("infiniband")) and not asked(f.with_network("tcp"))
    assert not asked(f.edited(lambda s: s["network"].update(ecn=False)))
