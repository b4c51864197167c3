"""The routing policies beyond ecmp, without a switch: the senders' choice of
connection (flowlet, spray), the adaptive controller's tracking and placement
of elephants, replayed on fake flow tables, and the simulator's model of each."""

import pytest
from os_ken.lib.packet import ethernet, ipv4, packet, tcp

from controller import ofmsg
from controller.elephants import Adaptive
from controller.routes import compute_plan
from tests.flowtable import wire
from harness.fabrics import leaf_spine
from tests.test_controller_core import Switches, datapath
from runs.experiment import Experiment, MAX_PIECES, piece_bytes_for
from policies import policy
from policies.policy import Lane
from sim.network import Network, sim_channels

# --- the senders: flowlet and spray ------------------------------------------------


def lane(waiting=False, unsent=0, in_flight=0, last=0.0):
    return Lane(waiting, unsent, in_flight, last)


def test_spray_takes_the_ready_connection_with_least_unsent():
    lanes = [lane(unsent=9000), lane(waiting=True), lane(unsent=20_000), lane(unsent=100)]
    assert policy("spray").choose(lanes, 0, 1.0, 0.001, 16384, lambda n: 0) == 3
    # none ready (its own bytes waiting, or the kernel holding lowat or more): wait
    busy = [lane(waiting=True), lane(unsent=16384)]
    assert policy("spray").choose(busy, 0, 1.0, 0.001, 16384, lambda n: 0) is None


def test_a_flowlet_stays_on_its_connection_until_idle_with_everything_acknowledged():
    draw = lambda n: n - 1                                     # noqa: E731
    # still in flight: the same connection, even if others are idle
    lanes = [lane(), lane(unsent=100, in_flight=5000, last=0.0), lane()]
    assert policy("flowlet").choose(lanes, 1, 5.0, 0.001, 16384, draw) == 1
    # not ready: wait for it, never move mid-flowlet
    lanes[1] = lane(waiting=True, in_flight=5000)
    assert policy("flowlet").choose(lanes, 1, 5.0, 0.001, 16384, draw) is None
    # acknowledged, but idle for less than the gap: stays
    lanes[1] = lane(last=4.9995)
    assert policy("flowlet").choose(lanes, 1, 5.0, 0.001, 16384, draw) == 1
    # acknowledged and idle past the gap: a new flowlet, on a connection drawn
    lanes[1] = lane(last=4.0)
    assert policy("flowlet").choose(lanes, 1, 5.0, 0.001, 16384, draw) == 2
    assert policy("flowlet").choose(lanes, 1, 5.0, 0.001, 16384, lambda n: 0) == 0


def test_spray_cuts_pieces_to_a_jumbo_frame_but_never_into_too_many():
    exp = Experiment(maxbytes=8 << 20)
    assert piece_bytes_for(exp, "ecmp") == 64 << 10 and piece_bytes_for(exp, "spray") == 8 << 10
    assert piece_bytes_for(Experiment(piece_bytes=4096), "spray") == 4096
    huge = Experiment(maxbytes=1 << 30)
    assert piece_bytes_for(huge, "spray") == (1 << 30) // MAX_PIECES


def test_connections_per_peer_follow_the_policy():
    assert policy("ecmp").connections_per_peer(2, 16) == 2
    assert policy("adaptive").connections_per_peer(1, 16) == 1
    assert policy("spray").connections_per_peer(1, 16) == 16
    assert policy("flowlet").connections_per_peer(32, 16) == 32


# --- the adaptive controller -------------------------------------------------------

def syn(src, dst, sport, dport=7000, ack=False):
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(dst="02:00:00:00:00:02", src="02:00:00:00:00:01",
                                     ethertype=0x0800))
    p.add_protocol(ipv4.ipv4(src=src, dst=dst, proto=6))
    p.add_protocol(tcp.tcp(src_port=sport, dst_port=dport,
                           bits=tcp.TCP_SYN | (tcp.TCP_ACK if ack else 0)))
    p.serialize()
    return bytes(p.data)


@pytest.fixture
def adaptive4():
    """4 spines x 3 leaves x 4 servers under adaptive, every switch programmed."""
    f = leaf_spine(4, 3, 4, policy="adaptive")
    return f, Switches(f).connect_all()


def test_adaptive_copies_syns_only_where_a_switch_hashes(adaptive4):
    f, switches = adaptive4
    plans = switches.plans()
    assert all(plans[s.name].syn_to_controller == (s.role == "leaf") for s in f.switches)
    # the other policies never do
    assert not any(p.syn_to_controller for p in compute_plan(leaf_spine(4, 3, 4)).values())


def test_a_syn_gets_its_connections_own_flow_into_the_group_and_goes_on(adaptive4):
    f, switches = adaptive4
    h1, h5 = f.endpoint("h1"), f.endpoint("h5")
    leaf1 = f.switch("leaf1").dpid
    out = switches.deliver(switches.core.packet_in(leaf1, h1.port, syn(h1.ip, h5.ip, 40000)))
    (n1, mod), (n2, pkt_out) = out
    assert (n1, n2) == ("leaf1", "leaf1")
    route = switches.tables["leaf1"].plan().routes[h5.ip]
    assert route[0] == "group"
    assert switches.tables["leaf1"].connections() == {(h1.ip, h5.ip, 40000, 7000): route}
    assert type(pkt_out).__name__ == "OFPPacketOut" and wire(pkt_out)
    # the SYN-ACK back is tracked at leaf2 too; a SYN to a server on the same
    # leaf only goes on (no group there), and a repeat adds no second flow
    back = switches.core.packet_in(f.switch("leaf2").dpid, 1, syn(h5.ip, h1.ip, 7000, 40000, True))
    assert [type(m).__name__ for _, m in back] == ["OFPFlowMod", "OFPPacketOut"]
    local = switches.core.packet_in(leaf1, h1.port, syn(h1.ip, f.endpoint("h2").ip, 40001))
    assert [type(m).__name__ for _, m in local] == ["OFPPacketOut"]
    again = switches.core.packet_in(leaf1, h1.port, syn(h1.ip, h5.ip, 40000))
    assert [type(m).__name__ for _, m in again] == ["OFPPacketOut"]
    assert switches.core.status()["adaptive"]["tracked"] == 2


def elephants(f, switches, pairs, nbytes, now):
    """Connections from each `src` to `dst` (SYN), then their counters twice."""
    core, keys = switches.core, []
    for i, (src, dst) in enumerate(pairs):
        a, b = f.endpoint(src), f.endpoint(dst)
        switches.deliver(core.packet_in(f.switch(a.leaf).dpid, a.port, syn(a.ip, b.ip, 41000 + i)))
        keys.append((a.leaf, (a.ip, b.ip, 41000 + i, 7000)))
    for t, scale in ((now, 0), (now + 1.0, 1)):
        core.clock = lambda t=t: t
        for leaf in sorted({leaf for leaf, _ in keys}):
            seen = {k: scale * nbytes for l, k in keys if l == leaf}
            switches.deliver(core.connection_counters(f.switch(leaf).dpid, seen))
    return keys


def spine_of(f, switches, leaf, key):
    kind, port = switches.tables[leaf].connections()[key]
    assert kind == "output", "not placed"
    return next(l.b for l in f.links if l.a == leaf and l.a_port == port)


def test_adaptive_places_four_elephants_on_four_spines_and_leaves_mice_hashing(adaptive4):
    f, switches = adaptive4
    keys = elephants(f, switches, [("h1", "h5"), ("h2", "h6"), ("h3", "h7"), ("h4", "h8")],
                     nbytes=2_000_000, now=10.0)                 # 16 Mbit/s of 50
    assert {spine_of(f, switches, leaf, k) for leaf, k in keys} == {
        "spine1", "spine2", "spine3", "spine4"}
    # a connection carrying little stays on its group's hash
    [(leaf, key)] = elephants(f, switches, [("h1", "h6")], nbytes=1000, now=20.0)
    assert switches.tables[leaf].connections()[key][0] == "group"


def test_adaptive_counts_the_spines_downlinks_too():
    """One elephant from leaf1 and one from leaf2, both to leaf3: each leaf
    alone would pick its first spine; placed together, they share no link."""
    f = leaf_spine(2, 3, 2, policy="adaptive")
    switches = Switches(f).connect_all()
    keys = elephants(f, switches, [("h1", "h5"), ("h3", "h6")], 2_000_000, 1.0)
    assert {spine_of(f, switches, leaf, k) for leaf, k in keys} == {"spine1", "spine2"}


def test_placements_stay_put_and_leave_a_port_that_goes_down(adaptive4):
    f, switches = adaptive4
    keys = elephants(f, switches, [("h1", "h5"), ("h2", "h6")], 2_000_000, 10.0)
    before = {k: spine_of(f, switches, leaf, k) for leaf, k in keys}
    # another round of counters moves nothing
    switches.core.clock = lambda: 11.5
    assert switches.deliver(switches.core.connection_counters(
        f.switch("leaf1").dpid, {k: 3_000_000 for _, k in keys})) == []
    # the port of the first goes down: it moves, to a spine the other does not use
    first = keys[0][1]
    port = switches.tables["leaf1"].connections()[first][1]
    switches.port("leaf1", port, False)
    after = spine_of(f, switches, "leaf1", first)
    assert after != before[first] and after != before[keys[1][1]]
    assert switches.core.adaptive.moves == 1


def test_connections_a_switch_no_longer_has_are_forgotten(adaptive4):
    f, switches = adaptive4
    elephants(f, switches, [("h1", "h5")], 2_000_000, 1.0)
    # one reply without it may predate its flow (a SYN answered meanwhile): kept
    switches.deliver(switches.core.connection_counters(f.switch("leaf1").dpid, {}))
    assert switches.core.status()["adaptive"]["tracked"] == 1
    switches.deliver(switches.core.connection_counters(f.switch("leaf1").dpid, {}))
    assert switches.core.status()["adaptive"] == {"tracked": 0, "placed": 0, "moves": 0,
                                                  "placements": 1}


def test_a_placed_connection_gone_idle_weighs_on_no_link(adaptive4):
    """A finished transfer's flow lingers until it expires: idle, it keeps
    its port but a new elephant may take that port as if it were free."""
    f, switches = adaptive4
    [(_, first)] = elephants(f, switches, [("h1", "h5")], 2_000_000, 1.0)
    assert spine_of(f, switches, "leaf1", first) == "spine1"
    core, leaf1 = switches.core, f.switch("leaf1").dpid
    h2, h6 = f.endpoint("h2"), f.endpoint("h6")
    second = (h2.ip, h6.ip, 43000, 7000)
    switches.deliver(core.packet_in(leaf1, h2.port, syn(*second)))
    for t, nbytes in ((5.0, 0), (6.0, 2_000_000)):   # the first: no byte since 2.0, idle
        core.clock = lambda t=t: t
        switches.deliver(core.connection_counters(leaf1, {first: 2_000_000, second: nbytes}))
    assert core.status()["adaptive"]["tracked"] == 2
    assert spine_of(f, switches, "leaf1", second) == "spine1"
    assert spine_of(f, switches, "leaf1", first) == "spine1"


def test_the_adaptive_messages_serialise_in_openflow_13_and_15():
    for version in ("of13", "of15"):
        dp = datapath(version)
        key = ("10.0.1.1", "10.0.2.1", 40000, 7000)
        for msg in (ofmsg.syn_flow_mod(dp), ofmsg.syn_flow_mod(dp, delete=True),
                    ofmsg.connection_flow_mod(dp, key, ("group", 2), 60),
                    ofmsg.connection_flow_mod(dp, key, ("output", 3), 60),
                    ofmsg.connection_stats_request(dp),
                    ofmsg.packet_out_action(dp, syn(*key), ("group", 2))):
            assert wire(msg)
    assert ofmsg.tcp_syn_key(syn("10.0.1.1", "10.0.2.1", 1, 2)) == ("10.0.1.1", "10.0.2.1", 1, 2)


def test_a_plain_ip_packet_is_no_syn():
    p = packet.Packet()
    p.add_protocol(ethernet.ethernet(ethertype=0x0800))
    p.add_protocol(ipv4.ipv4(src="10.0.1.1", dst="10.0.2.1", proto=6))
    p.add_protocol(tcp.tcp(src_port=1, dst_port=2, bits=tcp.TCP_ACK))
    p.serialize()
    assert ofmsg.tcp_syn_key(bytes(p.data)) is None


def test_adaptive_alone_is_pure_of_the_fabric():
    a = Adaptive(leaf_spine(2, 2, 1, policy="adaptive"))
    assert a.status() == {"tracked": 0, "placed": 0, "moves": 0, "placements": 0}


# --- the simulator ------------------------------------------------------------------

def spines_used(net, src, dst, flows):
    return [net.path(src, dst, k)[1].dst for k in range(flows)]


def test_the_simulator_sprays_each_peers_connections_evenly_over_the_paths():
    f = leaf_spine(4, 2, 2, policy="spray")
    assert sim_channels(f, 1) == 16 and sim_channels(f.with_policy("flowlet"), 1) == 1
    used = spines_used(Network(f), "h1", "h3", 16)
    assert sorted(used.count(s) for s in set(used)) == [4, 4, 4, 4]


def test_the_simulator_places_adaptive_connections_on_the_least_loaded_spine():
    f = leaf_spine(4, 2, 4, policy="adaptive")
    net = Network(f)
    used = [net.path(a, b)[1].dst for a, b in (("h1", "h5"), ("h2", "h6"), ("h3", "h7"),
                                               ("h4", "h8"))]
    assert sorted(used) == ["spine1", "spine2", "spine3", "spine4"]


def test_the_roce_engine_sprays_a_queue_pairs_packets_over_source_ports():
    from programs.roce import QueuePair, build_frames, parse_qpn
    ip = "10.0.2.1"
    qp = QueuePair("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.1.1", ip, 50000, 0x1234)
    frames = build_frames(qp, 5 * 1024, spray=4)
    sports = [int.from_bytes(f[34:36], "big") for f in frames]
    assert sports == [50000, 50001, 50002, 50003, 50000]
    me = bytes(int(x) for x in ip.split("."))
    assert [parse_qpn(f, me) for f in frames] == [(0x1234, psn) for psn in range(5)]
    plain = build_frames(qp, 3 * 1024)
    assert {int.from_bytes(f[34:36], "big") for f in plain} == {50000}


def test_a_connection_that_starts_with_one_path_left_is_placed_when_paths_return(adaptive4):
    f, switches = adaptive4
    uplinks = [l.a_port for l in f.uplinks("leaf1")]
    for port in uplinks[1:]:
        switches.port("leaf1", port, False)
    assert switches.plans()["leaf1"].syn_to_controller          # still copies SYNs up
    [(_, key)] = elephants(f, switches, [("h1", "h5")], 2_000_000, 1.0)
    assert switches.tables["leaf1"].connections()[key] == ("output", uplinks[0])
    assert switches.core.status()["adaptive"]["placed"] == 0
    for port in uplinks[1:]:
        switches.port("leaf1", port, True)
    switches.core.clock = lambda: 3.0
    switches.deliver(switches.core.connection_counters(f.switch("leaf1").dpid,
                                                       {key: 4_000_000}))
    assert switches.core.status()["adaptive"]["placed"] == 1
    assert switches.tables["leaf1"].connections()[key][0] == "output"


def test_a_connection_whose_group_goes_keeps_its_flow():
    """A failure that leaves leaf1 one spine deletes its group, and Open
    vSwitch the flows that used it: the connection's flow is made again, out
    of the port left, and the controller still follows it."""
    f = leaf_spine(2, 2, 2, policy="adaptive")
    switches = Switches(f).connect_all()
    h1, h3 = f.endpoint("h1"), f.endpoint("h3")
    key = (h1.ip, h3.ip, 40000, 7000)
    switches.deliver(switches.core.packet_in(f.switch("leaf1").dpid, h1.port, syn(*key)))
    first, second = (l.a_port for l in f.uplinks("leaf1"))
    switches.port("leaf1", first, False)
    assert switches.tables["leaf1"].connections() == {key: ("output", second)}
    switches.port("leaf1", first, True)
    assert switches.tables["leaf1"].connections()[key][0] == "group"
    assert switches.core.status()["adaptive"]["tracked"] == 1
