"""From a Fabric to a Mininet network: topology, switch class, link shaping.

Mininet names interfaces ``<node>-eth<port>`` and Open vSwitch gets each port's
number through ``ofport_request``, so the numbers in the Fabric are the numbers
the controller sees. Link shaping is ours rather than Mininet's TCLink, which
puts every queue limit in a netem qdisc that some kernels (this project's CI)
lack: HTB sets the rate, a pfifo child the queue, netem only when a link asks
for delay or loss.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Callable, Dict, List

from mininet.node import OVSSwitch
from mininet.topo import Topo

from lab.sandbox import die_with_parent
from lab.shaping import tc_commands
from topologies.fabric import Fabric
from topologies.roles import role

OPENFLOW_VERSIONS = "OpenFlow13,OpenFlow15"


class FabricTopo(Topo):
    """The Mininet topology of a fabric: one place that says what is built."""

    def build(self, fabric: Fabric):          # noqa: D102 (Mininet's hook)
        for sw in fabric.switches:
            self.addSwitch(sw.name, dpid=f"{sw.dpid:016x}", stp_priority=stp_priority(sw))
        nv = {h.name: h for h in fabric.endpoints if h.nv_ip}
        for h in fabric.endpoints:
            self.addHost(h.name, ip=f"{h.ip}/{fabric.prefixlen}", mac=h.mac)
        for link in fabric.links:
            opts = {}
            if link.kind == "intra_node" and link.b in nv:     # a mesh link, GPU to GPU:
                a, b = nv[link.a], nv[link.b]                  # addressed by mesh_commands
                opts = {"addr1": a.mesh_mac(b.gpu), "addr2": b.mesh_mac(a.gpu)}
            elif link.kind == "intra_node":        # the GPU's NVLink interface, eth1
                gpu = nv[link.a]
                opts = {"addr1": gpu.nv_mac,
                        "params1": {"ip": f"{gpu.nv_ip}/{fabric.nv_prefixlen}"}}
            self.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port, **opts)


def stp_priority(sw) -> int:
    """The spanning-tree priority of a switch: the top tier's first switch is
    the root, as an operator would pin it, so the tree is the same in every
    run (left to Open vSwitch, the root is the bridge whose port happened to
    get the lowest random MAC address, and the tree changes from run to run)."""
    return role(sw.role).stp_priority + sw.index


class FabricSwitch(OVSSwitch):
    """Mininet's OVS switch, its bridge tagged with the lab that owns it
    (external_ids:fabric_lab), and spanning-tree timers short enough that the
    STP baseline converges in seconds rather than half a minute."""
    STP_TIMERS = (" other_config:stp-hello-time=1 other_config:stp-max-age=6"
                  " other_config:stp-forward-delay=4")

    def __init__(self, name, lab_tag="", stp_priority=0x8000, **params):
        super().__init__(name, **params)
        self.lab_tag = lab_tag
        self.stp_priority = stp_priority

    def bridgeOpts(self):                 # noqa: N802 (Mininet's name)
        stp = self.STP_TIMERS + f" other_config:stp-priority={self.stp_priority}"
        return (super().bridgeOpts() + f" external_ids:fabric_lab={self.lab_tag}"
                + (stp if self.stp else ""))

    def dpctl(self, *args):
        """ovs-ofctl speaking the newest OpenFlow the bridge offers (Mininet's
        asks for 1.0, which these bridges refuse), so `dpctl dump-flows` and
        `dpctl dump-groups` work in the CLI."""
        versions = [v for v in (self.protocols or "").split(",") if v]
        flag = ["-O", versions[-1]] if versions else []
        return self.cmd("ovs-ofctl", *flag, args[0], self, *args[1:])


def tracking(node_class, on_process: Callable):
    """A subclass of a Mininet node class that reports each process it starts,
    its shell included, as soon as the process exists; those the main thread
    (the lab's) starts die with it, even if the lab is killed outright."""
    class Tracked(node_class):
        def _popen(self, cmd, **params):
            if threading.current_thread() is threading.main_thread():
                # (the signal comes when the starting *thread* ends: a probe
                # started from a worker thread would die with that thread)
                params.setdefault("preexec_fn", die_with_parent)
            proc = super()._popen(cmd, **params)
            on_process(proc)
            return proc
    Tracked.__name__ = f"Tracked{node_class.__name__}"
    return Tracked


def switch_class(datapath: str, lab_tag: str, on_process: Callable, stp: bool = False):
    """OVS bridges started in one ovs-vsctl batch. Normally in secure fail mode
    (no flooding while the controller is away), offering OpenFlow 1.3 and 1.5;
    for the STP baseline, standalone L2 learning switches running spanning tree
    (plain Mininet's answer to a looped fabric), with no controller."""
    cls = tracking(FabricSwitch, on_process)
    if stp:
        return partial(cls, lab_tag=lab_tag, datapath=datapath, failMode="standalone",
                       stp=True, batch=True)
    return partial(cls, lab_tag=lab_tag, datapath=datapath, failMode="secure",
                   protocols=OPENFLOW_VERSIONS, batch=True, reconnectms=1000)


def shaping_plan(fabric: Fabric, marking: bool = False) -> Dict[str, List[str]]:
    """tc commands per interface, for both ends of every link; `marking`:
    the network switches' egress queues mark ECN (lab/ecn.py)."""
    switches = {s.name for s in fabric.network_switches} if marking else set()
    plan = {}
    for link in fabric.links:
        plan[link.a_intf] = tc_commands(link.a_intf, link.spec, fabric.mtu, link.a in switches)
        plan[link.b_intf] = tc_commands(link.b_intf, link.spec, fabric.mtu, link.b in switches)
    return plan


def endpoint_intfs(ep) -> List[str]:
    """A GPU's own interfaces: its NIC's, then its NVSwitch's or its mesh links'."""
    if ep.mesh:
        return [ep.intf] + [ep.mesh_intf(p) for p in ep.mesh_peers]
    return [ep.intf] + ([ep.nv_intf] if ep.nv_ip else [])


def mesh_commands(fabric: Fabric, ep) -> List[str]:
    """`ip -batch` lines that address a mesh GPU's links (topologies/fabric.py):
    its NVLink address on each, point to point with the peer's, so the /32
    route to each peer leaves by the link to it, and the peer's end of that
    link a permanent neighbour (no ARP on the links)."""
    peers = {h.gpu: h for h in fabric.endpoints if h.server == ep.server and h is not ep}
    out = []
    for p in ep.mesh_peers:
        intf, peer = ep.mesh_intf(p), peers[p]
        out += [f"addr add {ep.nv_ip}/32 peer {peer.nv_ip}/32 dev {intf}",
                f"neigh replace {peer.nv_ip} lladdr {peer.mesh_mac(ep.gpu)} dev {intf} "
                "nud permanent"]
    return out


def host_setup_script(intfs: Dict[str, List[str]], mtu: int, sysctls: List[str] = (),
                      ip_lines: List[str] = ()) -> str:
    """One shell line run inside a server's namespace, for each interface
    (name -> its tc commands): the fabric's MTU,
    checksum and segmentation offloads off (the userspace datapath forwards unfinished checksums, and
    super-packets would defeat the packet-counted queue), IPv6 off (its
    neighbour discovery is noise on the counters), `sysctls` (DCTCP where
    the lab marks ECN), `ip_lines` (`ip -batch`: a mesh's addresses), then
    the shaping."""
    steps = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
             "sysctl -qw net.ipv6.conf.default.disable_ipv6=1", *sysctls]
    for intf in intfs:
        steps += [f"ip link set dev {intf} mtu {mtu}",
                  f"ethtool -K {intf} tx off tso off gso off >/dev/null"]
    # one tc process for all of them: on the SuperPOD unit, a process per
    # command was 3,500 processes and doubled the build
    if ip_lines:
        listed = " ".join(f"'{c}'" for c in ip_lines)
        steps.append(f"printf '%s\\n' {listed} | ip -batch -")
    lines = " ".join(f"'{c}'" for cmds in intfs.values() for c in cmds)
    if lines:
        steps.append(f"printf '%s\\n' {lines} | tc -batch -")
    return " && ".join(steps) + " && echo lab-host-ok"
