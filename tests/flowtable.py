"""A fake flow table, in the spirit of FAUCET's fakeoftable: where does this
packet go?

`FlowTable` is one switch as the OpenFlow messages sent to it leave it. Each
message is serialised and read back from the wire as the switch would read it
(flow mods by os-ken's parser; group mods by `group_mod_from_wire`, since
os-ken parses no OpenFlow 1.3 group mod and misreads OpenFlow 1.5 bucket
properties), with a switch's rules: adding an existing group or modifying a
missing one is an error, a flow may only use a group that exists, and deleting
a group deletes the flows that use it. `plan()` reads the table back as the
SwitchPlan it implements, so a test can compare it with compute_plan.

`trace` follows a packet hop by hop through the plans of every switch, over
every bucket of every group: every path it can take.
"""

from __future__ import annotations

import struct
from typing import Dict, Iterable, Tuple

from os_ken.ofproto import ofproto_parser

from controller import ofmsg
from controller.routes import SwitchPlan
from topologies.fabric import Fabric

Action = Tuple[str, int]              # ("output", port) or ("group", group id)


def wire(msg) -> bytes:
    msg.serialize()
    return bytes(msg.buf)


def flow_mod_from_wire(msg):
    """The flow mod as os-ken decodes its serialised bytes."""
    buf = wire(msg)
    version, msg_type, msg_len, xid = ofproto_parser.header(buf)
    return ofproto_parser.msg(msg.datapath, version, msg_type, msg_len, xid, buf)


def group_mod_from_wire(msg) -> Tuple[int, int, Tuple[int, ...]]:
    """(command, group id, output port of each bucket) of a serialised group
    mod. Every bucket must watch the port it outputs to."""
    dp, buf = msg.datapath, wire(msg)
    command, _, gid = struct.unpack_from("!HBxI", buf, 8)
    if ofmsg.is_of15(dp):     # then bucket_array_len, command_bucket_id; group properties
        (array_len,) = struct.unpack_from("!H", buf, 16)       # after the buckets
        offset, end, bucket_header = 24, 24 + array_len, "!HHI"  # len, action array len, id
    else:                     # len, weight, watch port, watch group
        offset, end, bucket_header = 16, len(buf), "!HHII4x"
    ports = []
    while offset < end:
        length, second, third = struct.unpack_from(bucket_header, buf, offset)[:3]
        start = offset + struct.calcsize(bucket_header)
        action = dp.ofproto_parser.OFPAction.parser(buf, start)
        if ofmsg.is_of15(dp):  # properties after the actions: weight, watch port
            props = buf[start + second:offset + length]
            watch = dict(struct.unpack_from("!HxxI", props, i)
                         for i in range(0, len(props), 8))[dp.ofproto.OFPGBPT_WATCH_PORT]
        else:
            watch = third
        assert watch == action.port, f"bucket outputs to {action.port} but watches {watch}"
        ports.append(action.port)
        offset += length
    return command, gid, tuple(ports)


def packet_out_from_wire(msg) -> Tuple[Tuple[int, ...], bytes]:
    """(output ports, frame) of a serialised packet-out: what the switch sends
    where. os-ken parses no packet-out, so this reads the OpenFlow layout."""
    dp, buf = msg.datapath, wire(msg)
    if ofmsg.is_of15(dp):     # buffer id, actions length, pad, then a match
        (actions_len,) = struct.unpack_from("!H", buf, 12)
        match = dp.ofproto_parser.OFPMatch.parser(buf, 16)
        offset = 16 + (match.length + 7) // 8 * 8
    else:                     # buffer id, in_port, actions length, pad
        (actions_len,) = struct.unpack_from("!H", buf, 16)
        offset = 24
    ports, end = [], offset + actions_len
    while offset < end:
        action = dp.ofproto_parser.OFPAction.parser(buf, offset)
        ports.append(action.port)
        offset += action.len
    return tuple(ports), buf[end:]


class FlowTable:
    """One switch's flows and groups, as the messages it was sent left them."""

    def __init__(self):
        self.flows: Dict[Tuple[int, tuple], Action] = {}   # (priority, match) -> action
        self.groups: Dict[int, Tuple[int, ...]] = {}       # group id -> bucket ports

    def apply(self, msg) -> None:
        kind = type(msg).__name__
        if kind == "OFPFlowMod":
            self._flow_mod(flow_mod_from_wire(msg))
        elif kind == "OFPGroupMod":
            self._group_mod(msg.datapath.ofproto, *group_mod_from_wire(msg))
        # barriers and packet-outs leave the tables as they are

    def _flow_mod(self, mod) -> None:
        ofp = mod.datapath.ofproto
        match = tuple(sorted(mod.match.items()))
        if mod.command == ofp.OFPFC_ADD:
            (instruction,) = mod.instructions
            (action,) = instruction.actions
            if type(action).__name__ == "OFPActionGroup":
                assert action.group_id in self.groups, f"no group {action.group_id}"
                self.flows[(mod.priority, match)] = ("group", action.group_id)
            else:
                self.flows[(mod.priority, match)] = ("output", action.port)
        elif mod.command == ofp.OFPFC_MODIFY_STRICT:
            assert (mod.priority, match) in self.flows, f"no flow {match} to modify"
            (instruction,) = mod.instructions
            (action,) = instruction.actions
            self.flows[(mod.priority, match)] = (
                ("group", action.group_id) if type(action).__name__ == "OFPActionGroup"
                else ("output", action.port))
        elif mod.command == ofp.OFPFC_DELETE_STRICT:
            self.flows.pop((mod.priority, match), None)
        elif mod.command == ofp.OFPFC_DELETE:    # every flow the match covers
            self.flows = {key: action for key, action in self.flows.items()
                          if not set(match) <= set(key[1])}
        else:
            raise AssertionError(f"unexpected flow mod command {mod.command}")

    def _group_mod(self, ofp, command, gid, ports) -> None:
        if command == ofp.OFPGC_ADD:
            assert gid not in self.groups, f"group {gid} already exists"
            self.groups[gid] = ports
        elif command == ofp.OFPGC_MODIFY:
            assert gid in self.groups, f"no group {gid} to modify"
            self.groups[gid] = ports
        elif command == ofp.OFPGC_DELETE:
            gone = set(self.groups) if gid == ofp.OFPG_ALL else {gid}
            self.groups = {g: p for g, p in self.groups.items() if g not in gone}
            self.flows = {key: action for key, action in self.flows.items()
                          if not (action[0] == "group" and action[1] in gone)}
        else:
            raise AssertionError(f"unexpected group mod command {command}")

    def plan(self) -> SwitchPlan:
        """The plan this table implements (the adaptive policy's connection
        flows are in `connections`)."""
        routes, uplinks, arp, syn = {}, {}, False, False
        for (_, match), (kind, value) in self.flows.items():
            fields = dict(match)
            if "tcp_src" in fields:
                continue
            if "tcp_flags" in fields:
                syn = kind == "output"
            elif "ipv4_dst" in fields:
                routes[fields["ipv4_dst"]] = (kind, value)
            elif "in_port" in fields:
                uplinks[fields["in_port"]] = value
            elif fields == {"eth_type": 0x0806} and kind == "output":
                arp = True
        return SwitchPlan(dict(self.groups), routes, arp, uplinks, syn)

    def connections(self) -> Dict[tuple, Action]:
        """Adaptive: (source IP, destination IP, ports) -> the action of its flow."""
        return {(f["ipv4_src"], f["ipv4_dst"], f["tcp_src"], f["tcp_dst"]): action
                for (_, match), action in self.flows.items()
                for f in [dict(match)] if "tcp_src" in f}


def apply_all(tables: Dict[str, FlowTable], outbox: Iterable[Tuple[str, object]]) -> None:
    """Apply (switch name, message) pairs to the switches' tables."""
    for name, msg in outbox:
        tables.setdefault(name, FlowTable()).apply(msg)


def trace(fabric: Fabric, plans: Dict[str, SwitchPlan], src: str, dst_ip: str,
          max_hops: int = 16) -> Tuple[Tuple[str, ...], ...]:
    """Every path a packet from endpoint `src` to `dst_ip` can take under
    `plans` (all buckets of every group), as tuples of node names. A path that
    ends anywhere but at the destination endpoint means the plan is broken."""
    peer = {}
    for link in fabric.links:
        peer[(link.a, link.a_port)] = (link.b, link.b_port)
        peer[(link.b, link.b_port)] = (link.a, link.a_port)
    endpoints = {h.name for h in fabric.endpoints}
    first = peer[(src, 0)]
    paths, stack = [], [((src, first[0]), first[1])]
    while stack:
        path, in_port = stack.pop()
        node = path[-1]
        if node in endpoints or len(path) > max_hops:
            paths.append(path)
            continue
        plan = plans[node]
        route = plan.routes.get(dst_ip)
        if route is None and in_port in plan.uplinks:
            route = ("output", plan.uplinks[in_port])
        if route is None:
            paths.append(path + ("<drop>",))
            continue
        kind, value = route
        ports = plan.groups[value] if kind == "group" else (value,)
        for port in ports:
            far, far_port = peer[(node, port)]
            stack.append((path + (far,), far_port))
    return tuple(sorted(paths))
