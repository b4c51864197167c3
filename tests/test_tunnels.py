"""The links that cross machines, as VXLAN tunnels (lab/cluster/tunnels.py): one per
crossing link, both ends switches, each end named and numbered as the model
names its interface, addresses crossed over, the wire's MTU, shaping as on
a veth; and the commands, which nothing here runs."""

import pytest

from lab.shaping import tc_commands
from lab.cluster.tunnels import VXLAN_OVERHEAD, make_commands, tunnels, wire_mtu
from harness import TOPOLOGIES
from topologies.fabric import load_fabric
from topologies.placement import place

ADDRESSES = {i: f"10.77.0.{11 + i}" for i in range(8)}


@pytest.mark.parametrize("name,n", [("default.yaml", 2), ("leaf-spine-4x4.yaml", 4),
                                    ("fat-tree-k4.yaml", 4), ("full-mesh.yaml", 2)])
def test_a_tunnel_for_every_crossing_link_and_none_else(name, n):
    fabric = load_fabric(TOPOLOGIES / name)
    placement = place(fabric, n)
    made = tunnels(fabric, placement.node, ADDRESSES)
    assert len(made) == sum(placement.crossing.values()) == len(placement.crossing_links(fabric))
    assert len({t.vni for t in made}) == len(made)                       # one VNI per link
    switches = {s.name for s in fabric.switches}
    for t, link in zip(made, placement.crossing_links(fabric)):
        a, b = t.ends
        assert (a.device, a.port, b.device, b.port) == (link.a_intf, link.a_port, link.b_intf,
                                                        link.b_port)
        assert {a.switch, b.switch} <= switches and a.machine != b.machine
        assert (a.local, a.remote) == (b.remote, b.local) == (ADDRESSES[a.machine],
                                                              ADDRESSES[b.machine])
        assert len(a.device) <= 15 and len(b.device) <= 15                # Linux's limit
    assert {end.machine for t in made for end in t.ends} == set(range(n))   # every machine


def test_one_machine_has_no_tunnels():
    fabric = load_fabric(TOPOLOGIES / "default.yaml")
    assert tunnels(fabric, place(fabric, 1).node, ADDRESSES) == []


def test_a_server_link_across_machines_is_refused():
    fabric = load_fabric(TOPOLOGIES / "default.yaml")
    node = place(fabric, 2).node
    server_link = next(l for l in fabric.links if l.kind == "server_leaf")
    node = {**node, server_link.a: 1 - node[server_link.b]}   # the server away from its leaf
    with pytest.raises(ValueError, match="only links between switches can be tunnels"):
        tunnels(fabric, node, ADDRESSES)


def test_the_commands_make_a_shaped_vxlan_port_at_the_models_number():
    fabric = load_fabric(TOPOLOGIES / "default.yaml")
    t = tunnels(fabric, place(fabric, 2).node, ADDRESSES)[0]
    end = t.ends[0]
    link = next(l for l in fabric.links if l.a_intf == end.device)
    mtu = wire_mtu(fabric)
    assert mtu == fabric.mtu + VXLAN_OVERHEAD == 9050
    cmds = make_commands(t, end, link.spec, fabric.mtu)
    assert cmds[0] == ["ip", "link", "add", end.device, "mtu", str(fabric.mtu), "type", "vxlan",
                       "id", str(t.vni), "remote", end.remote, "local", end.local,
                       "dstport", "4789"]
    assert ["ovs-vsctl", "add-port", end.switch, end.device, "--", "set", "Interface",
            end.device, f"ofport_request={end.port}"] in cmds
    assert cmds[-len(tc_commands(end.device, link.spec, fabric.mtu)):] == [
        ["tc", *c.split()] for c in tc_commands(end.device, link.spec, fabric.mtu)]
