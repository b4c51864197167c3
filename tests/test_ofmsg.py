"""OpenFlow messages built from plans: serialised by os-ken and decoded by
os-ken and, where it is installed, by Open vSwitch's own ovs-ofctl."""

import shutil
import struct
import subprocess

import pytest
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.ofproto import ofproto_parser, ofproto_protocol, ofproto_v1_3, ofproto_v1_5

from controller import ofmsg
from controller.routes import SwitchPlan, compute_plan
from harness.fabrics import leaf_spine
from tests.flowtable import FlowTable

OF13 = ofproto_protocol.ProtocolDesc(ofproto_v1_3.OFP_VERSION)
OF15 = ofproto_protocol.ProtocolDesc(ofproto_v1_5.OFP_VERSION)
ovs_ofctl = pytest.mark.skipif(not shutil.which("ovs-ofctl"),
                               reason="ovs-ofctl not installed (run scripts/lab setup)")


def wire(msg) -> bytes:
    msg.serialize()
    return bytes(msg.buf)


def decode(dp, msg):
    buf = wire(msg)
    version, msg_type, msg_len, xid = ofproto_parser.header(buf)
    return ofproto_parser.msg(dp, version, msg_type, msg_len, xid, buf)


def ofp_print(msg) -> str:
    out = subprocess.run(["ovs-ofctl", "ofp-print", wire(msg).hex()],
                         capture_output=True, text=True, check=True)
    return out.stdout


def test_selection_method_property_layout():
    words = ofmsg.selection_method_words()
    body = struct.pack(f"!{len(words)}I", *words)
    assert len(body) == 28                       # 40-byte property minus its 12-byte header
    assert body[4:11] == b"dp_hash" and body[11:20] == b"\0" * 9
    assert struct.unpack("!Q", body[20:])[0] == 0  # L4 hash, basis 0


@ovs_ofctl
def test_of15_select_group_hashes_l4_in_ovs_terms():
    text = ofp_print(ofmsg.group_mod(OF15, 2, (3, 4, 5, 6)))
    assert "type=select" in text and "selection_method=dp_hash" in text
    for i, port in enumerate((3, 4, 5, 6)):
        assert f"bucket=bucket_id:{i},watch_port:{port},actions=output:{port}" in text


@ovs_ofctl
def test_of13_select_group_watches_ports():
    text = ofp_print(ofmsg.group_mod(OF13, 7, (3, 4)))
    assert "group_id=7,type=select" in text and "selection_method" not in text
    assert "bucket=watch_port:3,actions=output:3,bucket=watch_port:4,actions=output:4" in text


@pytest.mark.parametrize("dp", [OF13, OF15], ids=["of13", "of15"])
def test_route_flow_mods_decode(dp):
    add = decode(dp, ofmsg.route_flow_mod(dp, "10.0.2.1", ("group", 2)))
    assert add.command == dp.ofproto.OFPFC_ADD and add.priority == ofmsg.PRIORITY_ROUTE
    assert dict(add.match.items()) == {"eth_type": 0x0800, "ipv4_dst": "10.0.2.1"}
    assert add.instructions[0].actions[0].group_id == 2
    out = decode(dp, ofmsg.route_flow_mod(dp, "10.0.1.1", ("output", 1)))
    assert out.instructions[0].actions[0].port == 1
    gone = decode(dp, ofmsg.route_flow_mod(dp, "10.0.1.1", None, delete=True))
    assert gone.command == dp.ofproto.OFPFC_DELETE_STRICT


@pytest.mark.parametrize("dp", [OF13, OF15], ids=["of13", "of15"])
def test_arp_goes_to_the_controller(dp):
    flow = decode(dp, ofmsg.arp_flow_mod(dp))
    assert dict(flow.match.items()) == {"eth_type": 0x0806}
    assert flow.instructions[0].actions[0].port == dp.ofproto.OFPP_CONTROLLER


@pytest.mark.parametrize("shape", [(2, 2, 2, 1), (4, 8, 4, 1), (2, 3, 2, 2)], ids=str)
def test_a_fresh_switch_is_cleared_then_fully_programmed(shape):
    f = leaf_spine(*shape)
    plan = compute_plan(f)["leaf1"]
    msgs = ofmsg.plan_messages(OF15, None, plan)
    kinds = [type(m).__name__ for m in msgs]
    assert kinds[:2] == ["OFPFlowMod", "OFPGroupMod"]          # clear flows, groups
    groups = [m for m in msgs[2:] if type(m).__name__ == "OFPGroupMod"]
    assert len(groups) == shape[1] - 1                          # one per remote leaf
    uplinks = tuple(l.a_port for l in f.uplinks("leaf1"))
    assert all([b.actions[0].port for b in g.buckets] == list(uplinks) for g in groups)
    flows = [m for m in msgs[2:] if type(m).__name__ == "OFPFlowMod"]
    assert len(flows) == len(f.endpoints) + 1                    # a route per server + ARP
    # groups come before the first route that uses one
    assert kinds.index("OFPGroupMod", 2) < max(i for i, k in enumerate(kinds) if k == "OFPFlowMod")


def test_a_change_sends_only_the_difference():
    f = leaf_spine(2, 3, 1)
    old = compute_plan(f)["leaf1"]
    new = compute_plan(f, frozenset({("leaf2", 2)}))["leaf1"]
    msgs = ofmsg.plan_messages(OF15, old, new)
    ofp = OF15.ofproto
    # 10.0.2.1 now leaves by the one live uplink, and its group is dropped
    assert [(type(m).__name__, m.command) for m in msgs] == [
        ("OFPFlowMod", ofp.OFPFC_ADD), ("OFPGroupMod", ofp.OFPGC_DELETE)]
    assert msgs[0].instructions[0].actions[0].port == 3
    assert ofmsg.plan_messages(OF15, new, new) == []
    back = ofmsg.plan_messages(OF15, new, old)
    assert [(type(m).__name__, m.command) for m in back] == [
        ("OFPGroupMod", ofp.OFPGC_ADD), ("OFPFlowMod", ofp.OFPFC_ADD)]


@pytest.mark.parametrize("dp", [OF13, OF15], ids=["of13", "of15"])
@pytest.mark.parametrize("down", [{("leaf2", 2)}, {("leaf1", 1)}, {("leaf1", 3), ("leaf3", 2)}],
                         ids=str)
def test_a_switch_replaying_the_messages_holds_the_plan(dp, down):
    """Read back from the wire by a fake flow table, a fresh switch's messages
    leave it holding the plan, and so do the differences there and back."""
    f = leaf_spine(2, 3, 2)
    before, after = compute_plan(f), compute_plan(f, frozenset(down))
    for name in before:
        table = FlowTable()
        for old, new in ((None, before[name]), (before[name], after[name]),
                         (after[name], before[name])):
            for msg in ofmsg.plan_messages(dp, old, new):
                table.apply(msg)
            assert table.plan() == new, name


def test_removed_groups_go_after_their_routes():
    old = SwitchPlan(groups={2: (3, 4)}, routes={"10.0.2.1": ("group", 2)})
    msgs = ofmsg.plan_messages(OF13, old, SwitchPlan())
    assert [type(m).__name__ for m in msgs] == ["OFPFlowMod", "OFPGroupMod"]
    assert msgs[1].command == OF13.ofproto.OFPGC_DELETE


def arp_request(src_mac, src_ip, dst_ip):
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=src_mac, ethertype=0x0806))
    p.add_protocol(arp.arp(opcode=arp.ARP_REQUEST, src_mac=src_mac, src_ip=src_ip,
                           dst_mac="00:00:00:00:00:00", dst_ip=dst_ip))
    p.serialize()
    return bytes(p.data)


def test_arp_reply_answers_known_servers_only():
    table = {"10.0.2.1": "02:00:00:00:02:01"}
    reply = ofmsg.arp_reply(arp_request("02:00:00:00:01:01", "10.0.1.1", "10.0.2.1"), table)
    pkt = packet.Packet(reply)
    eth, a = pkt.get_protocol(ethernet.ethernet), pkt.get_protocol(arp.arp)
    assert (eth.dst, eth.src) == ("02:00:00:00:01:01", "02:00:00:00:02:01")
    assert (a.opcode, a.src_ip, a.src_mac, a.dst_ip) == (arp.ARP_REPLY, "10.0.2.1",
                                                         "02:00:00:00:02:01", "10.0.1.1")
    assert ofmsg.arp_reply(arp_request("02:00:00:00:01:01", "10.0.1.1", "10.9.9.9"), table) is None


@ovs_ofctl
@pytest.mark.parametrize("dp", [OF13, OF15], ids=["of13", "of15"])
def test_packet_out_sends_to_the_asking_port(dp):
    text = ofp_print(ofmsg.packet_out(dp, 3, b"\xff" * 60))
    assert "in_port=CONTROLLER" in text and "actions=output:3" in text


@ovs_ofctl
@pytest.mark.parametrize("dp", [OF13, OF15], ids=["of13", "of15"])
def test_a_pcie_switch_sends_each_gpu_out_of_its_nic(dp):
    """GPU ports 1..4 share NICs 5 and 6: one low-priority flow per GPU port,
    under the routes that deliver inside the server."""
    new = SwitchPlan(routes={"10.0.1.1": ("output", 1)}, uplinks={1: 5, 2: 6, 3: 5, 4: 6})
    msgs = ofmsg.plan_messages(dp, SwitchPlan(), new)
    texts = [ofp_print(m) for m in msgs]
    uplinks = [t for t in texts if "priority=50" in t]
    assert len(uplinks) == 4
    assert any("in_port=2" in t and "actions=output:6" in t for t in uplinks)
    # a GPU whose NIC went away leaves by the other one; a gone GPU port loses its flow
    moved = ofmsg.plan_messages(dp, new, SwitchPlan(routes=new.routes,
                                                    uplinks={1: 6, 2: 6, 3: 5}))
    kinds = [(m.command, m.priority) for m in moved]
    assert kinds == [(dp.ofproto.OFPFC_ADD, 50), (dp.ofproto.OFPFC_DELETE_STRICT, 50)]


@ovs_ofctl
def test_every_switch_hashes_with_its_own_basis():
    """One basis on every tier would make each tier's choice repeat the one
    before (hash polarisation: half the cores of a fat-tree left idle)."""
    class Switch:                                   # a datapath as the app has it
        def __init__(self, dpid):
            self.id, self.ofproto, self.ofproto_parser = dpid, OF15.ofproto, OF15.ofproto_parser
    bases = {ofmsg.hash_basis(Switch(d)) for d in (0x101, 0x102, 0x301, 0x302, 0x2001)}
    assert len(bases) == 5 and 0 not in bases
    text = ofp_print(ofmsg.group_mod(Switch(0x301), 2, (3, 4)))
    # the L4 algorithm (0) in the upper 32 bits, the basis in the lower
    assert f"selection_method_param={ofmsg.hash_basis(Switch(0x301))}," in text
