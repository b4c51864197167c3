"""The controller's core without a switch: switch events in, OpenFlow messages
out. The messages are replayed on fake flow tables (tests/flowtable.py), read
back from the wire, and compared with the plan compute_plan makes."""

import json
import logging
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from os_ken.lib.packet import arp, ethernet, ipv4, packet
from os_ken.ofproto import (ofproto_protocol, ofproto_v1_3, ofproto_v1_3_parser,
                             ofproto_v1_5)

from controller import ofmsg
from controller.app import FabricController
from controller.core import FabricCore, PortInfo, fabric_interfaces
from controller.routes import compute_plan
from controller.status import write_status
from harness.fabrics import leaf_spine
from tests.flowtable import (apply_all, flow_mod_from_wire, group_mod_from_wire,
                             packet_out_from_wire, trace, wire)
from topologies.fabric import load_fabric

REPO = Path(__file__).resolve().parents[1]
VERSIONS = {"of13": ofproto_v1_3.OFP_VERSION, "of15": ofproto_v1_5.OFP_VERSION}


def datapath(version="of15"):
    """A fresh connection's datapath: each call is a distinct object."""
    return ofproto_protocol.ProtocolDesc(VERSIONS[version])


class Switches:
    """A fabric's switches as the core sees them: each connects over its own
    datapath, keeps a flow table of what it was sent, and answers barriers
    when told to."""

    def __init__(self, fabric, version="of15"):
        self.fabric, self.version = fabric, version
        self.core = FabricCore(fabric, clock=lambda: 1234.5)
        self.tables = {}
        self.dps = {}

    def dpid(self, name):
        return self.fabric.switch(name).dpid

    def ports(self, name):
        interfaces = fabric_interfaces(self.fabric)[name]
        return [PortInfo(no, intf, True) for no, intf in interfaces.items()]

    def connect(self, name, ports=None):
        self.dps[name] = datapath(self.version)
        ports = self.ports(name) if ports is None else ports
        return self.deliver(self.core.switch_connected(self.dpid(name), self.dps[name], ports))

    def port(self, name, port_no, up):
        return self.deliver(self.core.port_changed(self.dpid(name), port_no, up))

    def deliver(self, outbox):
        apply_all(self.tables, outbox)
        return outbox

    def answer_barriers(self, outbox):
        for name, msg in outbox:
            if type(msg).__name__ == "OFPBarrierRequest":
                self.core.barrier_reply(self.dpid(name), msg.xid)

    def connect_all(self):
        for switch in self.fabric.switches:
            self.answer_barriers(self.connect(switch.name))
        return self

    def plans(self):
        return {name: table.plan() for name, table in self.tables.items()}


def names(outbox):
    return {name for name, _ in outbox}


def barriers(outbox):
    return [(name, msg.xid) for name, msg in outbox if type(msg).__name__ == "OFPBarrierRequest"]


# --- connecting and programming -----------------------------------------------------

@pytest.mark.parametrize("version", ["of13", "of15"])
def test_a_connecting_switch_gets_a_clear_its_plan_and_a_barrier(version):
    f = leaf_spine(2, 3, 2)
    switches = Switches(f, version)
    out = switches.connect("leaf1")
    assert names(out) == {"leaf1"}
    msgs = [msg for _, msg in out]
    dp = switches.dps["leaf1"]
    expected = ofmsg.plan_messages(dp, None, compute_plan(f)["leaf1"])
    assert [wire(m) for m in msgs[:-1]] == [wire(m) for m in expected]
    clear_flows = flow_mod_from_wire(msgs[0])
    assert clear_flows.command == dp.ofproto.OFPFC_DELETE and not clear_flows.match.items()
    assert group_mod_from_wire(msgs[1])[:2] == (dp.ofproto.OFPGC_DELETE, dp.ofproto.OFPG_ALL)
    assert type(msgs[-1]).__name__ == "OFPBarrierRequest" and msgs[-1].xid is not None
    assert switches.plans() == {"leaf1": compute_plan(f)["leaf1"]}
    status = switches.core.status()
    assert (status["connected"], status["programmed"], status["generation"]) == (["leaf1"], [], 1)
    assert status["versions"] == {"leaf1": {"of13": "OpenFlow13", "of15": "OpenFlow15"}[version]}


def test_a_switch_is_programmed_only_when_its_latest_barrier_returns():
    f = leaf_spine(3, 3, 1)
    switches = Switches(f)
    core, leaf1 = switches.core, f.switch("leaf1").dpid
    [(_, first)] = barriers(switches.connect("leaf1"))
    core.barrier_reply(leaf1, first + 1000)                # a stale or foreign xid
    assert core.status()["programmed"] == []
    [(_, second)] = barriers(switches.port("leaf1", 2, False))   # a change before the reply
    assert second != first
    core.barrier_reply(leaf1, first)                        # the reply to the earlier barrier
    assert core.status()["programmed"] == []
    # leaf2 connecting changes nothing for leaf1, which still owes a barrier: a new one
    sent = dict(barriers(switches.connect("leaf2")))
    core.barrier_reply(leaf1, sent["leaf2"])              # another switch's barrier
    core.barrier_reply(leaf1, second)                     # no longer the latest
    assert core.status()["programmed"] == []
    core.barrier_reply(leaf1, sent["leaf1"])
    assert core.status()["programmed"] == ["leaf1"]


def test_every_switch_ends_programmed_with_its_plan():
    f = leaf_spine(2, 3, 2, parallel=2)
    switches = Switches(f).connect_all()
    status = switches.core.status()
    assert status["programmed"] == status["connected"] == sorted(s.name for s in f.switches)
    assert switches.plans() == compute_plan(f)
    assert status["generation"] == len(f.switches)           # one plan per connection


# --- ports going down and up --------------------------------------------------------

def test_a_port_going_down_drops_its_bucket_where_it_was_used():
    f = leaf_spine(3, 3, 1)
    switches = Switches(f).connect_all()
    before = compute_plan(f)
    leaf2_to_spine1 = f.uplinks("leaf2")[0].a_port
    after = compute_plan(f, frozenset({("leaf2", leaf2_to_spine1)}))
    out = switches.port("leaf2", leaf2_to_spine1, False)
    changed = {name for name in before if before[name] != after[name]}
    assert names(out) == changed and "leaf1" in changed and "spine2" not in changed
    assert {name for name, _ in barriers(out)} == changed
    ofp = switches.dps["leaf1"].ofproto
    leaf1_groups = [group_mod_from_wire(m) for name, m in out
                    if name == "leaf1" and type(m).__name__ == "OFPGroupMod"]
    spine1_port = f.uplinks("leaf1")[0].a_port            # leaf1's bucket via spine1
    assert leaf1_groups == [(ofp.OFPGC_MODIFY, 2, tuple(p for p in before["leaf1"].groups[2]
                                                        if p != spine1_port))]
    assert switches.plans() == after
    status = switches.core.status()
    assert status["down_ports"] == [f"leaf2:{leaf2_to_spine1}"]
    assert status["programmed"] == sorted(set(before) - changed)


def test_the_port_coming_back_restores_the_plan():
    f = leaf_spine(3, 3, 1)
    switches = Switches(f).connect_all()
    switches.answer_barriers(switches.port("leaf2", 2, False))
    generation = switches.core.status()["generation"]
    assert switches.port("leaf2", 2, False) == []           # no change, nothing sent
    out = switches.port("leaf2", 2, True)
    assert switches.plans() == compute_plan(f)
    assert names(out) == {n for n, p in compute_plan(f, frozenset({("leaf2", 2)})).items()
                          if p != compute_plan(f)[n]}
    switches.answer_barriers(out)
    status = switches.core.status()
    assert status["down_ports"] == [] and status["generation"] == generation + 1
    assert status["programmed"] == sorted(s.name for s in f.switches)


def test_ports_the_fabric_does_not_cable_are_ignored():
    switches = Switches(leaf_spine(2, 2, 1)).connect_all()
    assert switches.port("leaf1", 99, False) == []
    assert switches.core.status()["down_ports"] == []


def test_a_port_down_at_connection_is_planned_around():
    f = leaf_spine(2, 2, 1)
    switches = Switches(f)
    ports = [PortInfo(p.number, p.name, p.number != 3) for p in switches.ports("leaf1")]
    switches.connect("leaf1", ports)
    assert switches.plans()["leaf1"] == compute_plan(f, frozenset({("leaf1", 3)}))["leaf1"]
    assert switches.core.status()["down_ports"] == ["leaf1:3"]


# --- switches leaving and coming back -----------------------------------------------

def test_a_disconnected_switch_is_forgotten_and_a_reconnect_resends_everything():
    f = leaf_spine(3, 3, 1)
    switches = Switches(f).connect_all()
    core, leaf1 = switches.core, f.switch("leaf1").dpid
    old_dp = switches.dps["leaf1"]
    assert core.switch_gone(leaf1, old_dp) == []
    status = core.status()
    assert "leaf1" not in status["connected"] and "leaf1" not in status["programmed"]
    assert "leaf1" not in status["versions"]
    generation = status["generation"]
    assert switches.port("leaf1", 2, False) == []             # recorded, not planned for
    assert core.status()["generation"] == generation
    assert core.status()["down_ports"] == ["leaf1:2"]
    switches.port("leaf1", 2, True)
    down = frozenset({("leaf2", 2)})
    assert "leaf1" not in names(switches.port("leaf2", 2, False))   # gone: sent nothing
    out = switches.connect("leaf1")           # its table still holds the old plan
    leaf1_msgs = [m for name, m in out if name == "leaf1"]
    assert [wire(m) for m in leaf1_msgs[:-1]] == [
        wire(m) for m in ofmsg.plan_messages(switches.dps["leaf1"], None,
                                             compute_plan(f, down)["leaf1"])]
    assert switches.plans() == compute_plan(f, down)
    switches.answer_barriers(out)
    assert "leaf1" in core.status()["programmed"]


def test_the_end_of_an_old_connection_leaves_the_new_one_alone():
    f = leaf_spine(2, 2, 1)
    switches = Switches(f).connect_all()
    old_dp = switches.dps["leaf1"]
    out = switches.connect("leaf1")               # reconnected before the old one closed
    assert [wire(m) for _, m in out[:-1]] == [wire(m) for m in ofmsg.plan_messages(
        switches.dps["leaf1"], None, compute_plan(f)["leaf1"])]   # cleared and resent
    switches.answer_barriers(out)
    assert switches.core.switch_gone(f.switch("leaf1").dpid, old_dp) == []
    status = switches.core.status()
    assert "leaf1" in status["connected"] and "leaf1" in status["programmed"]


def test_an_unknown_datapath_is_ignored():
    f = leaf_spine(2, 2, 1)
    core = FabricCore(f)
    unknown = 0xDEAD
    assert core.switch_connected(unknown, datapath(), []) == []
    assert core.port_changed(unknown, 1, False) == []
    assert core.barrier_reply(unknown, 1) == []
    assert core.packet_in(unknown, 1, arp_request(f.endpoints[0], f.endpoints[1].ip)) == []
    assert core.switch_gone(unknown, datapath()) == []
    status = core.status()
    assert (status["connected"], status["down_ports"], status["generation"]) == ([], [], 0)
    assert status["errors"] == []


# --- what the switches say ------------------------------------------------------------

def test_ports_unlike_the_fabric_are_reported_as_errors():
    f = leaf_spine(2, 2, 1)
    switches = Switches(f)
    ports = {p.number: p for p in switches.ports("leaf1")}
    ports[1] = PortInfo(1, "eth9", True)          # misnamed, still used
    del ports[2]                                  # missing: down
    switches.connect("leaf1", list(ports.values()))
    status = switches.core.status()
    assert status["errors"] == ["leaf1 port 1 is 'eth9', expected 'leaf1-eth1'",
                                "leaf1 has no port 2 (leaf1-eth2)"]
    assert status["down_ports"] == ["leaf1:2"]
    assert switches.plans()["leaf1"] == compute_plan(f, frozenset({("leaf1", 2)}))["leaf1"]


def test_rejected_messages_are_reported_and_only_the_last_ones_kept():
    f = leaf_spine(2, 2, 1)
    core = FabricCore(f)
    core.error(f.switch("spine2").dpid, 5, 6)
    core.error(None, 1, 2)                        # before the handshake named it
    assert core.status()["errors"] == ["spine2 rejected a message: type 5 code 6",
                                       "? rejected a message: type 1 code 2"]
    for code in range(30):
        core.error(f.switch("leaf1").dpid, 1, code)
    errors = core.status()["errors"]
    assert len(errors) == 20 and errors[-1].endswith("code 29")


# --- ARP ------------------------------------------------------------------------------

def arp_request(asker, ip):
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=asker.mac, ethertype=0x0806))
    p.add_protocol(arp.arp(opcode=arp.ARP_REQUEST, src_mac=asker.mac, src_ip=asker.ip,
                           dst_mac="00:00:00:00:00:00", dst_ip=ip))
    p.serialize()
    return bytes(p.data)


@pytest.mark.parametrize("version", ["of13", "of15"])
def test_an_arp_request_for_a_known_address_is_answered_out_of_its_port(version):
    f = leaf_spine(2, 2, 2)
    switches = Switches(f, version).connect_all()
    asker, target = f.endpoint("h1"), f.endpoint("h3")
    out = switches.core.packet_in(f.switch("leaf1").dpid, asker.port, arp_request(asker, target.ip))
    [(name, msg)] = out
    ports, frame = packet_out_from_wire(msg)
    assert name == "leaf1" and ports == (asker.port,)
    reply = packet.Packet(frame)
    eth, answer = reply.get_protocol(ethernet.ethernet), reply.get_protocol(arp.arp)
    assert (eth.src, eth.dst) == (target.mac, asker.mac)
    assert (answer.opcode, answer.src_ip, answer.src_mac, answer.dst_ip) == (
        arp.ARP_REPLY, target.ip, target.mac, asker.ip)
    assert switches.core.status()["arp_replies"] == 1


def test_nothing_answers_an_unknown_address_or_other_packets():
    f = leaf_spine(2, 2, 2)
    switches = Switches(f).connect_all()
    leaf1, asker = f.switch("leaf1").dpid, f.endpoint("h1")
    assert switches.core.packet_in(leaf1, 1, arp_request(asker, "10.9.9.9")) == []
    ip = packet.Packet()
    ip.add_protocol(ethernet.ethernet(dst="02:00:00:00:02:01", src=asker.mac, ethertype=0x0800))
    ip.add_protocol(ipv4.ipv4(src=asker.ip, dst=f.endpoint("h3").ip))
    ip.serialize()
    assert switches.core.packet_in(leaf1, 1, bytes(ip.data)) == []
    assert switches.core.status()["arp_replies"] == 0


def test_a_switch_not_connected_answers_nothing():
    f = leaf_spine(2, 2, 2)
    switches = Switches(f)
    switches.connect("leaf2")
    asker = f.endpoint("h1")
    assert switches.core.packet_in(f.switch("leaf1").dpid, 1,
                                   arp_request(asker, f.endpoint("h3").ip)) == []


# --- multi-GPU fabrics --------------------------------------------------------------

def fabric_file(name):
    return load_fabric(REPO / "topologies" / name)


def test_nvlink_addresses_are_answered_by_the_nvswitch():
    f = fabric_file("multi-gpu.yaml")
    switches = Switches(f).connect_all()
    asker, target = f.endpoint("h1g1"), f.endpoint("h1g3")
    request = arp_request(replace(asker, ip=asker.nv_ip, mac=asker.nv_mac), target.nv_ip)
    [(name, msg)] = switches.core.packet_in(f.switch(asker.nvswitch).dpid, asker.nv_port, request)
    ports, frame = packet_out_from_wire(msg)
    assert (name, ports) == (asker.nvswitch, (asker.nv_port,))
    assert packet.Packet(frame).get_protocol(arp.arp).src_mac == target.nv_mac


@pytest.mark.parametrize("name", ["multi-gpu.yaml", "leaf-spine-4gpu.yaml", "fat-tree-k4.yaml"])
def test_a_whole_fabric_is_programmed_and_delivers(name):
    f = fabric_file(name)
    switches = Switches(f).connect_all()
    assert switches.core.status()["programmed"] == sorted(s.name for s in f.switches)
    plans = switches.plans()
    assert plans == compute_plan(f)
    src = f.endpoints[0]
    for dst in f.endpoints[1:]:
        assert all(p[-1] == dst.name for p in trace(f, plans, src.name, dst.ip))


def test_a_gpu_whose_nic_fails_leaves_by_another_nic():
    """multi-gpu.yaml: one NIC per server, so use a fabric with two."""
    f = fabric_file("multi-gpu.yaml").edited(lambda spec: spec["server"].update(nics=2))
    switches = Switches(f).connect_all()
    gpu = next(h for h in f.endpoints if h.node and h.gpu == 1)
    out = switches.port(gpu.node, gpu.nic_port, False)
    down = frozenset({(gpu.node, gpu.nic_port)})
    assert gpu.node in names(out)
    assert switches.plans() == compute_plan(f, down)
    assert switches.plans()[gpu.node].uplinks[gpu.node_port] != gpu.nic_port


# --- the shim's surroundings --------------------------------------------------------

def test_the_log_says_what_happened(caplog):
    f = leaf_spine(2, 2, 1)
    switches = Switches(f)
    with caplog.at_level(logging.INFO, logger="controller.core"):
        assert not switches.core.admit(0xDEAD, ("10.77.0.12", 40000))
        switches.connect("leaf1")
        switches.port("leaf1", 2, False)
        switches.core.switch_gone(f.switch("leaf1").dpid, switches.dps["leaf1"])
    assert [r.getMessage() for r in caplog.records] == [
        "refused a switch with datapath id 000000000000dead from 10.77.0.12: no switch of "
        "the fabric has it", "leaf1 connected (OpenFlow15)",
        "leaf1 port 2 down", "leaf1 disconnected"]


def test_status_reports_the_clock_and_the_process():
    core = FabricCore(leaf_spine(2, 2, 1), clock=lambda: 42.0)
    status = core.status()
    assert set(status) == {"pid", "time", "generation", "connected", "programmed", "versions",
                           "down_ports", "arp_replies", "errors", "refused"}
    assert status["time"] == 42.0 and isinstance(status["pid"], int)


def test_the_status_file_is_replaced_whole(tmp_path):
    path = tmp_path / "controller-status.json"
    write_status(path, {"generation": 1})
    write_status(path, {"generation": 2, "errors": []})
    assert path.read_text() == '{"generation": 2, "errors": []}'
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_writers_at_once_never_leave_a_mixed_status(tmp_path):
    """Connections refused at once (controller/tls.py) write the status
    from several threads: each write is whole, none fails, nothing is left."""
    path = tmp_path / "controller-status.json"
    failures = []

    def writer(n):
        for i in range(300):
            try:
                write_status(path, {"writer": n, "i": i, "pad": "x" * (n * 37 % 200)})
            except OSError as exc:
                failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if path.exists():
            json.loads(path.read_text())                # whole, or it raises here
    for t in threads:
        t.join()
    assert failures == [] and json.loads(path.read_text())["i"] == 299
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_controller_imports_nothing_of_the_lab():
    code = ("import sys, controller.app, controller.__main__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'lab', 'mininet'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


class FakeDatapath:
    """What the app gets from os-ken: an OpenFlow 1.3 datapath with its ports,
    which records what is sent to it."""

    def __init__(self, fabric, name, down=()):
        self.id = fabric.switch(name).dpid
        self.ofproto, self.ofproto_parser = ofproto_v1_3, ofproto_v1_3_parser
        link_down, live = ofproto_v1_3.OFPPS_LINK_DOWN, ofproto_v1_3.OFPPS_LIVE
        self.ports = {no: ofproto_v1_3_parser.OFPPort(no, "02:00:00:00:00:01", intf.encode(),
                                                      0, link_down if no in down else live,
                                                      0, 0, 0, 0, 0, 0)
                      for no, intf in fabric_interfaces(fabric)[name].items()}
        self.sent = []
        self.address, self.closed = ("10.77.0.12", 40000), False

    def send_msg(self, msg):
        self.sent.append(msg)

    def close(self):
        self.closed = True


def started_app(f, tmp_path, monkeypatch):
    """The os-ken app as the lab starts it: the fabric's spec and a status file."""
    spec, status_path = tmp_path / "spec.json", tmp_path / "status.json"
    spec.write_text(json.dumps(f.spec))
    monkeypatch.setenv("FABRIC_LAB_SPEC", str(spec))
    monkeypatch.setenv("FABRIC_LAB_STATUS", str(status_path))
    return FabricController(), status_path


def test_the_app_sends_what_the_core_returns_and_writes_the_status(tmp_path, monkeypatch):
    f = leaf_spine(2, 2, 1)
    app, status_path = started_app(f, tmp_path, monkeypatch)
    assert json.loads(status_path.read_text())["connected"] == []
    dp = FakeDatapath(f, "leaf1", down={3})
    app.on_connected(SimpleNamespace(datapath=dp))
    assert [wire(m) for m in dp.sent[:-1]] == [wire(m) for m in ofmsg.plan_messages(
        dp, None, compute_plan(f, frozenset({("leaf1", 3)}))["leaf1"])]
    status = json.loads(status_path.read_text())
    assert (status["connected"], status["versions"]) == (["leaf1"], {"leaf1": "OpenFlow13"})
    assert status["down_ports"] == ["leaf1:3"] and status["programmed"] == []
    app.on_barrier(SimpleNamespace(msg=SimpleNamespace(datapath=dp, xid=dp.sent[-1].xid)))
    assert json.loads(status_path.read_text())["programmed"] == ["leaf1"]
    port = dp.ports[3]._replace(state=ofproto_v1_3.OFPPS_LIVE)
    app.on_port_status(SimpleNamespace(msg=SimpleNamespace(
        datapath=dp, desc=port, reason=ofproto_v1_3.OFPPR_MODIFY)))
    assert json.loads(status_path.read_text())["down_ports"] == []
    # link up but not live (its BFD session is down): down to the controller
    for state, down in ((0, ["leaf1:3"]), (ofproto_v1_3.OFPPS_LIVE, [])):
        app.on_port_status(SimpleNamespace(msg=SimpleNamespace(
            datapath=dp, desc=port._replace(state=state), reason=ofproto_v1_3.OFPPR_MODIFY)))
        assert json.loads(status_path.read_text())["down_ports"] == down
    sent = len(dp.sent)
    request = arp_request(f.endpoint("h1"), f.endpoint("h2").ip)
    app.on_packet_in(SimpleNamespace(msg=SimpleNamespace(
        datapath=dp, match={"in_port": 1}, data=request)))
    assert len(dp.sent) == sent + 1 and type(dp.sent[-1]).__name__ == "OFPPacketOut"
    app.on_dead(SimpleNamespace(datapath=dp))
    status = json.loads(status_path.read_text())
    assert (status["connected"], status["arp_replies"]) == ([], 1)


def test_the_app_disconnects_a_datapath_id_the_fabric_does_not_have(tmp_path, monkeypatch):
    """Refused: closed before anything is sent to it, the status names its
    datapath id among the errors (once, however often it comes back), the
    fabric's own switches are not disturbed."""
    f = leaf_spine(2, 2, 1)
    app, status_path = started_app(f, tmp_path, monkeypatch)
    rogue = FakeDatapath(f, "leaf1")
    rogue.id = 0xFF
    for _ in range(3):
        app.on_connected(SimpleNamespace(datapath=rogue))
        app.on_dead(SimpleNamespace(datapath=rogue))
    assert rogue.closed and rogue.sent == []
    status = json.loads(status_path.read_text())
    assert status["errors"] == ["refused a switch with datapath id 00000000000000ff from "
                                "10.77.0.12: no switch of the fabric has it"]
    assert status["refused"] == {"datapath id 00000000000000ff": 3}
    assert status["connected"] == []
    leaf1 = FakeDatapath(f, "leaf1")
    app.on_connected(SimpleNamespace(datapath=leaf1))
    assert not leaf1.closed and leaf1.sent
    assert json.loads(status_path.read_text())["connected"] == ["leaf1"]
