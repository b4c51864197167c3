"""The links that cross machines in cluster mode, as VXLAN tunnels: which
device on which machine, with what VNI, addresses, MTU, switch port and
shaping. Plain data and the commands that make and remove them; nothing is
run here.

What two test-bed machines showed (docs/how-it-works.md, "Facts about this
host"): a kernel VXLAN device joins a userspace (netdev) bridge as an
ordinary port, and HTB shapes it as it shapes a veth; OVS's own vxlan port
needs the machine's uplink inside an OVS bridge and has no device to shape;
this kernel has no gretap. The wire between machines needs the fabric's MTU
plus VXLAN's 50 bytes, or Open vSwitch drops the frames ("Message too long").

Each end is named as the model names that interface (``leaf1-eth3``), and
joins its switch with the model's port number (``ofport_request``), so the
controller's port map, the shaping (lab/shaping.tc_commands) and the
monitor's counters treat it as they treat a veth. Placement
(topologies/placement.py) only ever cuts links between switches, so both
ends of a tunnel are switches, in their machine's root namespace. A link's
VNI is its position in the fabric's links, plus one: the same on both
machines, different for every link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Mapping, Tuple

from lab.shaping import tc_commands

VXLAN_PORT = 4789          # IANA's
VXLAN_OVERHEAD = 50        # outer Ethernet 14, IPv4 20, UDP 8, VXLAN 8
MAX_VNI = (1 << 24) - 1


@dataclass(frozen=True)
class TunnelEnd:
    machine: int           # the placement's machine number (from 0)
    switch: str
    port: int              # the switch port the model gives this end
    device: str            # the model's interface name for it
    local: str             # this machine's address on the wire between machines
    remote: str            # the other end's machine's


@dataclass(frozen=True)
class Tunnel:
    vni: int
    kind: str              # the link's kind: leaf_spine, spine_core, mesh
    ends: Tuple[TunnelEnd, TunnelEnd]


def wire_mtu(fabric) -> int:
    """The MTU the wire between machines needs: a fabric frame inside VXLAN."""
    return fabric.mtu + VXLAN_OVERHEAD


def tunnels(fabric, node: Mapping[str, int], addresses: Mapping[int, str]) -> List[Tunnel]:
    """A tunnel for every link whose ends `node` (node -> machine) puts on two
    machines; `addresses` gives each machine's address on the wire."""
    switches = {s.name for s in fabric.switches}
    out = []
    for index, link in enumerate(fabric.links):
        a, b = node[link.a], node[link.b]
        if a == b:
            continue
        if not {link.a, link.b} <= switches:
            raise ValueError(f"the link {link.a}-{link.b} would cross machines {a + 1} and "
                             f"{b + 1}, but only links between switches can be tunnels")
        if index + 1 > MAX_VNI:
            raise ValueError(f"{len(fabric.links)} links are more than VXLAN's {MAX_VNI} VNIs")
        out.append(Tunnel(index + 1, link.kind, (
            TunnelEnd(a, link.a, link.a_port, link.a_intf, addresses[a], addresses[b]),
            TunnelEnd(b, link.b, link.b_port, link.b_intf, addresses[b], addresses[a]))))
    return out


def make_commands(tunnel: Tunnel, end: TunnelEnd, spec, mtu: int) -> List[List[str]]:
    """The commands that make one end on its machine, in order: the device,
    up, its switch port, its shaping (`spec`: the link's LinkSpec)."""
    dev = end.device
    return [["ip", "link", "add", dev, "mtu", str(mtu), "type", "vxlan", "id", str(tunnel.vni),
             "remote", end.remote, "local", end.local, "dstport", str(VXLAN_PORT)],
            ["ip", "link", "set", dev, "up"],
            ["ovs-vsctl", "add-port", end.switch, dev, "--", "set", "Interface", dev,
             f"ofport_request={end.port}"],
            *(["tc", *cmd.split()] for cmd in tc_commands(dev, spec, mtu))]
