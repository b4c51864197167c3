"""Where a flow goes: the directed links between two endpoints, as the lab's
switches would forward it.

The plan is the controller's own (controller/routes.py `compute_plan`): per
switch and destination, an output port or a select group of equal-cost
ports. A group picks its bucket by a hash of the flow and of the switch (each
switch hashes with its own basis, as the lab's do), seeded: the same seed,
the same paths; another seed, another draw of ECMP collisions. A multi-GPU
server's GPU reaches a GPU of the same server over its NVSwitch (on a mesh
server, over the one link between the two), and the network through its PCIe
switch and its NIC, as in the lab.

The policies beyond ecmp, as the simulator takes them (docs/routing.md):
spray sends a peer's pieces round-robin over its connections and connection k
over path k of the equal-cost ones (a sender that knows its paths: an even
spread, the ideal the lab's spreading approaches); adaptive places each
connection, as it first moves, on the port whose link and next link carry the
fewest connections so far (the controller's placement, at once rather than
after its reaction time); flowlet hashes like ecmp (a transfer keeps its
path: the idle gaps that let the lab's senders move are not modelled);
dmodk follows the controller's plan, an output per destination endpoint.
Where the step shortcut and NCCL's share price spray and adaptive routing,
a flow is split evenly over every equal-cost path (`spread`, `splits`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Dict, List, Tuple

from controller.routes import compute_plan
from topologies.fabric import Fabric
from policies import policy


def sim_channels(fabric: Fabric, channels: int) -> int:
    """Connections per peer the simulator replays: the lab's under spray,
    else the channels (a flowlet sender's connections carry one transfer
    after another, which the simulator does not tell apart)."""
    return policy(fabric.policy).sim_channels(channels, fabric.routing.entropy)

Hop = Tuple[str, str]           # a directed link: (from node, to node interface name)


@dataclass(frozen=True)
class DirectedLink:
    """One direction of a link: what leaves `intf` (the sending end)."""
    intf: str                   # the sending end's interface, e.g. "leaf1-eth3"
    src: str
    dst: str
    kind: str
    rate_bps: float             # bits per second
    delay_s: float              # the link's delay, the network switch it enters (its latency,
                                # the technology's) and, out of a server, the transport's
                                # per-message cost (docs/networks.md)


class Network:
    """The fabric's directed links and the route of any flow across them."""

    def __init__(self, fabric: Fabric, seed: int = 0):
        self.fabric, self.seed = fabric, seed
        self.paths = policy(fabric.policy).sim_paths    # how a group's port is picked
        self.splits = policy(fabric.policy).splits      # the flow model's even split
        self.plan = compute_plan(fabric)
        self.links: Dict[str, DirectedLink] = {}
        self.port_to: Dict[Tuple[str, int], DirectedLink] = {}   # (node, port) -> link out of it
        switches = {s.name for s in fabric.network_switches}
        switch_s, message_s = fabric.switch_latency_us * 1e-6, fabric.network.message_us * 1e-6
        for link in fabric.links:
            rate, delay = link.spec.rate_mbit * 1e6, link.spec.delay_ms / 1e3
            for a, ap, b, bp in ((link.a, link.a_port, link.b, link.b_port),
                                 (link.b, link.b_port, link.a, link.a_port)):
                # a direction's latency: the link's delay, the switch it enters,
                # and the transport's cost of a message entering the network
                latency = delay + (switch_s if b in switches else 0.0) + (
                    message_s if link.kind == "server_leaf" and a not in switches else 0.0)
                d = DirectedLink(f"{a}-eth{ap}", a, b, link.kind, rate, latency)
                self.links[d.intf] = d
                self.port_to[(a, ap)] = d
        self.endpoints = {h.name: h for h in fabric.endpoints}
        self._cache: Dict[Tuple[str, str, int], List[DirectedLink]] = {}
        # (switch, src, dst, flow) -> bucket: choices told rather than drawn
        self.pinned: Dict[Tuple[str, str, str, int], int] = {}
        self.choices: Dict[Tuple[str, str, int], List[Tuple[str, int]]] = {}
        self.placed: Dict[str, int] = {}        # adaptive: connections per sending interface

    def reseed(self, seed: int) -> None:
        """Draw the ECMP choices again, with another seed."""
        self.seed = seed
        self._cache.clear()
        self.choices.clear()
        self.placed.clear()

    def pin(self, switch: str, src: str, dst: str, flow: int, bucket=None) -> None:
        """Send flow (src, dst, flow) through `bucket` of its group at
        `switch` (as a lab's counters showed), whatever the draw; None: as
        drawn again."""
        if bucket is None:
            self.pinned.pop((switch, src, dst, flow), None)
        else:
            self.pinned[(switch, src, dst, flow)] = bucket
        self._cache.pop((src, dst, flow), None)
        self.choices.pop((src, dst, flow), None)

    def unpin(self) -> None:
        """Every flow's pins taken off: each as drawn again."""
        self.pinned.clear()
        self._cache.clear()
        self.choices.clear()

    def decisions(self, src: str, dst: str, flow: int = 0) -> List[Tuple[str, int]]:
        """The (switch, buckets) where ECMP chose this flow's path, in order."""
        self.path(src, dst, flow)
        return self.choices[(src, dst, flow)]

    def path(self, src: str, dst: str, flow: int = 0) -> List[DirectedLink]:
        """The directed links a flow from endpoint `src` to endpoint `dst`
        crosses; `flow` tells apart flows between the same pair (their source
        ports: connections, channels), which ECMP may send different ways."""
        key = (src, dst, flow)
        if key not in self._cache:
            self._cache[key] = self._walk(src, dst, flow)
        return self._cache[key]

    def _walk(self, src: str, dst: str, flow: int) -> List[DirectedLink]:
        a, b = self.endpoints[src], self.endpoints[dst]
        self.choices[(src, dst, flow)] = []
        if a.box and a.box == b.box and a.mesh:              # same server: the link to b
            return [self.links[a.mesh_intf(b.gpu)]]
        if a.box and a.box == b.box and a.nvswitch:          # same server: NVLink
            return [self._out_of_endpoint(a, nvlink=True),
                    self.port_to[(a.nvswitch, b.nv_port)]]
        hops = [self._out_of_endpoint(a)]
        if a.node:                                          # GPU -> PCIe switch -> NIC
            hops.append(self.port_to[(a.node, self.plan[a.node].uplinks[a.node_port])])
        node = hops[-1].dst
        for _ in range(64):
            if node == b.name:
                return hops
            if node == b.node:
                hops.append(self.port_to[(node, b.node_port)])
            else:
                hops.append(self._forward(node, b.ip, src, dst, flow))
            node = hops[-1].dst
        raise RuntimeError(f"no route from {src} to {dst} (a loop?)")

    def even_split(self, src: str, dst: str) -> Dict[str, float]:
        """The share of a flow from `src` to `dst` each directed link carries
        when the flow is split evenly over every equal-cost path (at each
        switch, equally over its group's ports): packet spraying and
        adaptive routing as the flow model takes them."""
        a, b = self.endpoints[src], self.endpoints[dst]
        if a.box and a.box == b.box and (a.nvswitch or a.mesh):
            return {l.intf: 1.0 for l in self.path(src, dst)}
        first = [self._out_of_endpoint(a)]
        if a.node:
            first.append(self.port_to[(a.node, self.plan[a.node].uplinks[a.node_port])])
        out = {l.intf: 1.0 for l in first}
        frontier = {first[-1].dst: 1.0}
        for _ in range(64):
            ahead: Dict[str, float] = {}
            for node, weight in frontier.items():
                if node == b.name:
                    continue
                if node == b.node:
                    ports = (b.node_port,)
                else:
                    kind, target = self.plan[node].routes[b.ip]
                    ports = (target,) if kind == "output" else self.plan[node].groups[target]
                for port in ports:
                    link = self.port_to[(node, port)]
                    out[link.intf] = out.get(link.intf, 0.0) + weight / len(ports)
                    ahead[link.dst] = ahead.get(link.dst, 0.0) + weight / len(ports)
            if not ahead:
                return out
            frontier = ahead
        raise RuntimeError(f"no route from {src} to {dst} (a loop?)")

    def _out_of_endpoint(self, h, nvlink: bool = False) -> DirectedLink:
        wanted = f"{h.name}-eth1" if nvlink else f"{h.name}-eth0"
        return self.links[wanted]

    def _forward(self, switch: str, ip: str, src: str, dst: str, flow: int) -> DirectedLink:
        kind, target = self.plan[switch].routes[ip]
        if kind == "output":
            return self.port_to[(switch, target)]
        ports = self.plan[switch].groups[target]
        made = self.choices[(src, dst, flow)]
        made.append((switch, len(ports)))
        bucket = self.pinned.get((switch, src, dst, flow))
        if bucket is None and self.paths == "per-connection":
            before = 1
            for _, n in made[:-1]:
                before *= n
            bucket = flow // before % len(ports)        # connection k takes path k
        elif bucket is None and self.paths == "least-placed":
            bucket = self._least_placed(switch, ports, ip)
        elif bucket is None:
            bucket = self.bucket(switch, src, dst, flow, len(ports))
        return self.port_to[(switch, ports[bucket])]

    def _least_placed(self, switch: str, ports, ip: str) -> int:
        """Adaptive: the port whose link, and the next switch's link towards
        `ip` when it has one, carry the fewest connections so far."""
        def links(port):
            out = [self.port_to[(switch, port)]]
            route = self.plan.get(out[0].dst)
            kind, target = route.routes.get(ip, ("", 0)) if route else ("", 0)
            if kind == "output":
                out.append(self.port_to[(out[0].dst, target)])
            return out
        costs = [max(self.placed.get(l.intf, 0) for l in links(p)) for p in ports]
        bucket = costs.index(min(costs))
        for link in links(ports[bucket]):
            self.placed[link.intf] = self.placed.get(link.intf, 0) + 1
        return bucket

    def bucket(self, switch: str, src: str, dst: str, flow: int, n: int) -> int:
        """The select group's choice: a hash of the flow, the switch (its own
        basis) and the seed."""
        digest = hashlib.blake2b(f"{self.seed}|{switch}|{src}|{dst}|{flow}".encode(),
                                 digest_size=8).digest()
        return int.from_bytes(digest, "big") % n
