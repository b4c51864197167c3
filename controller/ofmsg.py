"""OpenFlow messages for a switch plan: built, never sent.

Every function takes `dp`, anything with ``ofproto`` and ``ofproto_parser``
(a live datapath, or os-ken's ``ProtocolDesc`` in tests), and returns os-ken
message objects. The app sends them; tests serialise and decode them.

OpenFlow 1.3 and 1.5. Both are offered by the lab's switches and the highest
common one is used. The difference that matters is ECMP hashing: an OpenFlow 1.3
select group in Open vSwitch hashes TCP ports but not UDP ports, so every UDP
flow between two servers (RoCEv2 is UDP/4791 with source-port entropy) lands on
one spine. OpenFlow 1.5 group mods carry Open vSwitch's selection-method
property, and ``dp_hash`` with the L4 algorithm hashes the 5-tuple of TCP and
UDP alike, in the datapath. With an OpenFlow 1.3-only switch the controller
still works, with TCP-only spreading.
"""

from __future__ import annotations

import struct
from typing import List, Optional

from os_ken.lib.packet import arp, ethernet, ipv4, packet, tcp
from os_ken.ofproto import ofproto_v1_5

from controller.routes import SwitchPlan

COOKIE = 0xFAB1AB
COOKIE_CONNECTION = 0xFAB1AC     # adaptive: the connections' own flows
PRIORITY_ARP = 200
PRIORITY_FLOW = 120              # adaptive: one TCP connection, counted and maybe placed
PRIORITY_SYN = 110               # adaptive: a SYN to be hashed goes to the controller
PRIORITY_ROUTE = 100
PRIORITY_UPLINK = 50
ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_ARP = 0x0806
IP_PROTO_TCP = 6
TCP_SYN = 0x002

NTR_VENDOR_ID = 0x0000154D       # Netronome: OVS's selection-method extension
NTRT_SELECTION_METHOD = 1
OVS_HASH_ALG_L4 = 0              # dp_hash over the 5-tuple (UDP ports included)


def is_of15(dp) -> bool:
    return dp.ofproto.OFP_VERSION >= ofproto_v1_5.OFP_VERSION


def selection_method_words(method: str = "dp_hash", param: int = OVS_HASH_ALG_L4 << 32):
    """Body of OVS's ntr_group_prop_selection_method after the experimenter
    header: 4 pad bytes, the method name in 16 bytes, a 64-bit parameter
    (for dp_hash: the hash algorithm in the upper half, the basis in the lower),
    as the big-endian 32-bit words os-ken's experimenter property carries."""
    body = struct.pack("!4x16sQ", method.encode(), param)
    return [w for (w,) in struct.iter_unpack("!I", body)]


def hash_basis(dp) -> int:
    """A basis for the switch's 5-tuple hash, different on every switch. With
    one basis everywhere, every tier hashes a flow alike: a flow that took
    bucket 1 at the edge takes bucket 1 at the aggregation switch too, and in a
    3-tier fat-tree half the cores never see a packet (hash polarisation)."""
    dpid = getattr(dp, "id", None) or 0
    return (dpid * 0x9E3779B1) & 0xFFFFFFFF


def group_mod(dp, gid: int, ports, command: str = "add"):
    """A select group with a bucket per port; each bucket watches its port, so
    the datapath stops using a dead link before the controller hears of it."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    cmd = {"add": ofp.OFPGC_ADD, "modify": ofp.OFPGC_MODIFY, "delete": ofp.OFPGC_DELETE}[command]
    if command == "delete":
        return parser.OFPGroupMod(dp, command=cmd, type_=ofp.OFPGT_SELECT, group_id=gid)
    if not is_of15(dp):
        buckets = [parser.OFPBucket(weight=1, watch_port=p,
                                    actions=[parser.OFPActionOutput(p)]) for p in ports]
        return parser.OFPGroupMod(dp, cmd, ofp.OFPGT_SELECT, gid, buckets)
    buckets = [parser.OFPBucket(
        bucket_id=i, actions=[parser.OFPActionOutput(p)],
        properties=[parser.OFPGroupBucketPropWeight(type_=ofp.OFPGBPT_WEIGHT, weight=1),
                    parser.OFPGroupBucketPropWatch(type_=ofp.OFPGBPT_WATCH_PORT, watch=p)])
        for i, p in enumerate(ports)]
    method = parser.OFPGroupPropExperimenter(
        type_=ofp.OFPGPT_EXPERIMENTER, experimenter=NTR_VENDOR_ID,
        exp_type=NTRT_SELECTION_METHOD,
        data=selection_method_words(param=OVS_HASH_ALG_L4 << 32 | hash_basis(dp)))
    return parser.OFPGroupMod(dp, command=cmd, type_=ofp.OFPGT_SELECT, group_id=gid,
                              buckets=buckets, properties=[method])


def route_flow_mod(dp, ip: str, action, delete: bool = False):
    """IPv4 traffic to one server: out of a port or into an ECMP group."""
    parser = dp.ofproto_parser
    match = parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ipv4_dst=ip)
    if delete:
        return _delete_flow(dp, PRIORITY_ROUTE, match)
    return _add_flow(dp, PRIORITY_ROUTE, match, [_action(dp, action)])


def uplink_flow_mod(dp, in_port: int, out_port: Optional[int], delete: bool = False):
    """A server's PCIe switch: IPv4 from a GPU's port that no route delivers
    inside the server leaves by that GPU's NIC."""
    parser = dp.ofproto_parser
    match = parser.OFPMatch(in_port=in_port, eth_type=ETH_TYPE_IPV4)
    if delete:
        return _delete_flow(dp, PRIORITY_UPLINK, match)
    return _add_flow(dp, PRIORITY_UPLINK, match, [parser.OFPActionOutput(out_port)])


def _delete_flow(dp, priority, match):
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPFlowMod(dp, cookie=COOKIE, command=ofp.OFPFC_DELETE_STRICT,
                             priority=priority, match=match,
                             out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)


def arp_flow_mod(dp):
    """ARP goes to the controller, which answers from the fabric's table:
    nothing is ever flooded around the loops of a leaf-spine."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return _add_flow(dp, PRIORITY_ARP, parser.OFPMatch(eth_type=ETH_TYPE_ARP),
                     [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)])


def _add_flow(dp, priority, match, actions, command=None, idle_timeout=0, cookie=COOKIE):
    ofp, parser = dp.ofproto, dp.ofproto_parser
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(dp, cookie=cookie, command=ofp.OFPFC_ADD if command is None
                             else command, priority=priority, match=match,
                             idle_timeout=idle_timeout, instructions=inst)


def _action(dp, action):
    parser = dp.ofproto_parser
    kind, value = action
    return parser.OFPActionGroup(value) if kind == "group" else parser.OFPActionOutput(value)


def syn_flow_mod(dp, delete: bool = False):
    """Adaptive: a TCP SYN (or SYN-ACK) goes to the controller, which answers
    with the connection's own flow (`connection_flow_mod`) and sends it on."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    match = parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ip_proto=IP_PROTO_TCP,
                            tcp_flags=(TCP_SYN, TCP_SYN))
    if delete:
        return _delete_flow(dp, PRIORITY_SYN, match)
    return _add_flow(dp, PRIORITY_SYN, match,
                     [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)])


def connection_match(dp, key):
    src, dst, sport, dport = key
    return dp.ofproto_parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ip_proto=IP_PROTO_TCP,
                                      ipv4_src=src, ipv4_dst=dst, tcp_src=sport, tcp_dst=dport)


def connection_flow_mod(dp, key, action, idle_timeout: int):
    """Adaptive: one TCP connection's exact flow, its counter the controller
    reads; its action the route's group, or the port it was placed on. Always
    an add: it replaces the flow's action and keeps its counters, and makes
    the flow again where it is gone (Open vSwitch deletes the flows of a
    group it deletes, as when a failure leaves one path)."""
    return _add_flow(dp, PRIORITY_FLOW, connection_match(dp, key), [_action(dp, action)],
                     idle_timeout=idle_timeout, cookie=COOKIE_CONNECTION)


def connection_stats_request(dp):
    """The counters of the connections' flows (and only theirs)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    # OpenFlow 1.5's flow-stats multipart (17) is new, and Open vSwitch answers
    # it "bad multipart"; its flow-description one (1) is 1.3's flow stats
    request = parser.OFPFlowDescStatsRequest if is_of15(dp) else parser.OFPFlowStatsRequest
    return request(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                      COOKIE_CONNECTION, 0xFFFFFFFFFFFFFFFF, parser.OFPMatch())


def packet_out_action(dp, data: bytes, action):
    """A packet sent on as `action` would (out of a port, or into a group)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    actions = [_action(dp, action)]
    if is_of15(dp):
        return parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                                   match=parser.OFPMatch(in_port=ofp.OFPP_CONTROLLER),
                                   actions=actions, data=data)
    return parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                               actions=actions, data=data)


def clear_messages(dp) -> list:
    """Remove every flow and group: a switch starts from an empty table."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return [parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                              out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                              match=parser.OFPMatch()),
            parser.OFPGroupMod(dp, command=ofp.OFPGC_DELETE, group_id=ofp.OFPG_ALL)]


def plan_messages(dp, old: Optional[SwitchPlan], new: SwitchPlan) -> List:
    """Messages that turn a switch holding `old` (None: unknown, so clear it)
    into one holding `new`. Groups are created before the flows that use them
    and deleted after."""
    msgs = []
    if old is None:
        msgs += clear_messages(dp)
        old = SwitchPlan()
    if new.arp_to_controller and not old.arp_to_controller:
        msgs.append(arp_flow_mod(dp))
    if new.syn_to_controller != old.syn_to_controller:
        msgs.append(syn_flow_mod(dp, delete=not new.syn_to_controller))
    for gid, ports in sorted(new.groups.items()):
        if gid not in old.groups:
            msgs.append(group_mod(dp, gid, ports, "add"))
        elif old.groups[gid] != ports:
            msgs.append(group_mod(dp, gid, ports, "modify"))
    for ip, action in sorted(new.routes.items()):
        if old.routes.get(ip) != action:
            msgs.append(route_flow_mod(dp, ip, action))
    for ip in sorted(set(old.routes) - set(new.routes)):
        msgs.append(route_flow_mod(dp, ip, None, delete=True))
    for in_port, out_port in sorted(new.uplinks.items()):
        if old.uplinks.get(in_port) != out_port:
            msgs.append(uplink_flow_mod(dp, in_port, out_port))
    for in_port in sorted(set(old.uplinks) - set(new.uplinks)):
        msgs.append(uplink_flow_mod(dp, in_port, None, delete=True))
    for gid in sorted(set(old.groups) - set(new.groups)):
        msgs.append(group_mod(dp, gid, (), "delete"))
    return msgs


def tcp_syn_key(frame: bytes):
    """(source IP, destination IP, source port, destination port) of a TCP
    SYN or SYN-ACK frame; None for anything else."""
    pkt = packet.Packet(frame)
    ip, seg = pkt.get_protocol(ipv4.ipv4), pkt.get_protocol(tcp.tcp)
    if ip is None or seg is None or not seg.bits & TCP_SYN:
        return None
    return (ip.src, ip.dst, seg.src_port, seg.dst_port)


def arp_reply(frame: bytes, table) -> Optional[bytes]:
    """The ARP reply to a request frame, if `table` (IP -> MAC) knows the
    target; None for anything else."""
    pkt = packet.Packet(frame)
    req = pkt.get_protocol(arp.arp)
    if req is None or req.opcode != arp.ARP_REQUEST or req.dst_ip not in table:
        return None
    mac = table[req.dst_ip]
    reply = packet.Packet()
    reply.add_protocol(ethernet.ethernet(dst=req.src_mac, src=mac,
                                         ethertype=ETH_TYPE_ARP))
    reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=mac, src_ip=req.dst_ip,
                               dst_mac=req.src_mac, dst_ip=req.src_ip))
    reply.serialize()
    return bytes(reply.data)


def packet_out(dp, port: int, data: bytes):
    return packet_out_action(dp, data, ("output", port))
