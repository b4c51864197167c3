"""Path computation: the forwarding plan of every switch, as plain data.

The plan is a pure function of the fabric and of which switch ports are down.
For every destination server and every switch that can reach it, the next hops
are the ports towards neighbours one hop closer to the server's home leaf (all
shortest paths, parallel links included), over the switches between servers:
a multi-GPU server's PCIe switch delivers to its own GPUs and sends each GPU's
outgoing traffic out of that GPU's NIC, but never carries traffic between its
NICs, so servers are never transit; its NVSwitch joins its GPUs' NVLink
addresses and nothing else. Under the ``ecmp`` policy a switch with more
than one next hop sends to a select group over all of them; under
``single-path`` it pins the destination's leaf to one of them, so every server
behind a leaf is reached over the same spine (what a router with one next hop
per leaf prefix would do): the baseline ECMP is measured against. Under
``dmodk`` (InfiniBand's static fat-tree routing) it sends the k-th endpoint
behind a leaf out of its (k mod n)-th next hop (the number divided by the
choices made before it, farther up), a plain output per endpoint. The
flowlet and spray policies route as ecmp (their senders choose among the
hashed paths); under ``adaptive`` a switch holding groups also sends the
controller the TCP SYNs it would hash (controller/elephants.py).

Group ids are the destination leaf's index, so a group keeps its id while
links come and go and only its buckets change.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Tuple

import networkx as nx

from policies import policy
from topologies.fabric import Fabric
from topologies.roles import role

Port = Tuple[str, int]          # (switch name, port number)


@dataclass(frozen=True)
class SwitchPlan:
    """What one switch should hold. Routes map a destination IP to
    ("output", port) or ("group", group id); `uplinks` (node switches only)
    send whatever a GPU port receives for elsewhere out of that GPU's NIC."""
    groups: Dict[int, Tuple[int, ...]] = field(default_factory=dict)
    routes: Dict[str, Tuple[str, int]] = field(default_factory=dict)
    arp_to_controller: bool = False
    uplinks: Dict[int, int] = field(default_factory=dict)
    syn_to_controller: bool = False     # adaptive: TCP SYNs it would hash, copied up


def fabric_graph(fabric: Fabric, down: FrozenSet[Port] = frozenset()) -> nx.MultiGraph:
    """The switches that carry traffic between servers (node switches never do),
    an edge per live link between them, with its ports."""
    graph = nx.MultiGraph()
    inner = {s.name for s in fabric.network_switches}
    graph.add_nodes_from(inner)
    for link in fabric.links:
        if link.a not in inner or link.b not in inner:
            continue
        if (link.a, link.a_port) in down or (link.b, link.b_port) in down:
            continue
        graph.add_edge(link.a, link.b, ports={link.a: link.a_port, link.b: link.b_port})
    return graph


def next_hops(graph: nx.MultiGraph, switch: str, dist: Dict[str, int]) -> Tuple[int, ...]:
    """Ports of `switch` on a shortest path towards the node `dist` measures from."""
    ports = {data["ports"][switch]
             for _, neighbour, data in graph.edges(switch, data=True)
             if dist.get(neighbour, -1) == dist[switch] - 1}
    return tuple(sorted(ports))


def next_hop_groups(graph: nx.MultiGraph, switch: str, dist: Dict[str, int]
                    ) -> Tuple[Tuple[int, ...], ...]:
    """`next_hops` grouped by the switch each leads to (parallel links
    together), the groups in the order of their lowest port."""
    by: Dict[str, set] = {}
    for _, neighbour, data in graph.edges(switch, data=True):
        if dist.get(neighbour, -1) == dist[switch] - 1:
            by.setdefault(neighbour, set()).add(data["ports"][switch])
    return tuple(sorted(tuple(sorted(ports)) for ports in by.values()))


def _route(routing, plan: SwitchPlan, ports: Tuple[int, ...], gid: int) -> tuple:
    """A switch's route towards a leaf over `ports`: one port, a select
    group (made in `plan`), or the ports a per-endpoint policy picks from."""
    if len(ports) == 1:
        return ("output", ports[0])
    if routing.per_endpoint:
        return ("ports", ports)
    plan.groups[gid] = ports
    return ("group", gid)


def _numbered(fabric: Fabric) -> Dict[str, int]:
    """Each endpoint's number, as a subnet manager gives LIDs: leaf by leaf,
    in each leaf's port order, every leaf a block as large as the largest."""
    by_leaf: Dict[str, list] = {}
    for server in fabric.endpoints:
        by_leaf.setdefault(server.leaf, []).append((server.port, server.name))
    block = max(len(ends) for ends in by_leaf.values())
    order = {leaf.name: i for i, leaf in enumerate(fabric.leaves)}
    return {name: order.get(leaf, 0) * block + k for leaf, ends in by_leaf.items()
            for k, (_, name) in enumerate(sorted(ends))}


def _strides(graph: nx.MultiGraph, dist: Dict[str, int], inner) -> Tuple[Dict[int, int], int]:
    """D-mod-K's divisors: at each distance from the destination's leaf, the
    product of the next switches to choose from farther away (earlier on the
    way there), so that the first choice takes the number mod its switches,
    the next the number over those mod its own, and so on; and the product
    of them all, the divisor of the choice among parallel links to one
    switch. That choice is then the same digit on the way up and on the way
    down (a leaf's second link to a spine, and the spine's second link back
    down to the destination's leaf), so parallel links share the load as
    single links do; counting them as choices of their own made every flow a
    spine sends into a leaf take the same one of its links."""
    choices: Dict[int, int] = {}
    for sw in inner:
        if sw.name in dist and dist[sw.name] > 0:
            n = len(next_hop_groups(graph, sw.name, dist))
            choices[dist[sw.name]] = max(choices.get(dist[sw.name], 1), n)
    out, product = {}, 1
    for d in sorted(choices, reverse=True):
        out[d] = product
        product *= choices[d]
    return out, product


def _inside_server(plan: SwitchPlan, server, nic_leaf: dict, down: FrozenSet[Port]) -> bool:
    """The routes of a GPU's PCIe switch (`plan`): to the GPU, and out of its
    NIC (another if its own is down); False where the network cannot reach it."""
    if (server.node, server.node_port) in down:
        return False
    plan.routes[server.ip] = ("output", server.node_port)
    nic = (server.node, server.nic_port)
    live = [p for (n, p), far in sorted(nic_leaf.items())
            if n == server.node and (n, p) not in down and far not in down]
    if (server.node, server.nic_port) in down or nic_leaf[nic] in down:
        if live:                     # its own NIC is down: leave by another one
            plan.uplinks[server.node_port] = live[0]
        return False                  # but it cannot be reached from outside
    plan.uplinks[server.node_port] = server.nic_port
    return True


def compute_plan(fabric: Fabric, down: FrozenSet[Port] = frozenset()) -> Dict[str, SwitchPlan]:
    """The forwarding plan of every switch, keyed by switch name."""
    graph = fabric_graph(fabric, down)
    routing = policy(fabric.policy)
    leaf_index = {s.name: s.index for s in fabric.leaves}
    plans = {s.name: SwitchPlan(arp_to_controller=role(s.role).edge)
             for s in fabric.switches}
    nic_leaf = {}                 # (node, node port) -> (leaf, leaf port) of each NIC
    for link in fabric.links:
        if link.kind == "server_leaf" and link.a in plans:
            nic_leaf[(link.a, link.a_port)] = (link.b, link.b_port)
    inner = list(fabric.network_switches)
    lid = _numbered(fabric) if routing.per_endpoint else {}
    strides: Dict[str, Tuple[Dict[int, int], int]] = {}
    dists = {}
    toward: Dict[Tuple[str, str], tuple] = {}     # (switch, leaf) -> its route there
    for server in fabric.endpoints:
        if server.nvswitch and (server.nvswitch, server.nv_port) not in down:
            plans[server.nvswitch].routes[server.nv_ip] = ("output", server.nv_port)
        if server.node and not _inside_server(plans[server.node], server, nic_leaf, down):
            continue
        if (server.leaf, server.port) in down:
            continue                          # its own link is down: unreachable
        if server.leaf not in dists:
            dists[server.leaf] = nx.single_source_shortest_path_length(graph, server.leaf)
        dist = dists[server.leaf]
        gid = leaf_index[server.leaf]
        for sw in inner:
            if sw.name not in dist:
                continue
            plan = plans[sw.name]
            if sw.name == server.leaf:
                plan.routes[server.ip] = ("output", server.port)
                continue
            route = toward.get((sw.name, server.leaf))
            if route is None:                 # alike for every endpoint behind that leaf
                route = toward[(sw.name, server.leaf)] = _route(
                    routing, plan, routing.pin(next_hops(graph, sw.name, dist), gid), gid)
            if route[0] == "ports":           # per endpoint: D-mod-K on its number
                if server.leaf not in strides:
                    strides[server.leaf] = _strides(graph, dist, inner)
                divisors, whole = strides[server.leaf]
                route = ("output", routing.pin_endpoint(next_hop_groups(graph, sw.name, dist),
                                                        lid[server.name],
                                                        divisors[dist[sw.name]], whole))
            plan.routes[server.ip] = route
    if routing.moves_elephants:
        # every switch that hashes when all links are up: a connection that
        # starts while it has one path left is followed too
        whole = compute_plan(fabric) if down else plans
        for name, plan in whole.items():
            if plan.groups:
                plans[name] = replace(plans[name], syn_to_controller=True)
    return plans

