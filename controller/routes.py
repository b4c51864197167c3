"""Path computation: the forwarding plan of every switch, as plain data.

The plan is a pure function of the fabric and of which switch ports are down.
For every destination server and every switch that can reach it, the next hops
are the ports towards neighbours one hop closer to the server (all shortest
paths, parallel links included). Under the ``ecmp`` policy a switch with more
than one next hop sends to a select group over all of them; under
``single-path`` it pins the destination's leaf to one of them, so every server
behind a leaf is reached over the same spine (what a router with one next hop
per leaf prefix would do): the baseline ECMP is measured against.

Group ids are the destination leaf's index, so a group keeps its id while
links come and go and only its buckets change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Tuple

import networkx as nx

from topologies.fabric import Fabric

Port = Tuple[str, int]          # (switch name, port number)


@dataclass(frozen=True)
class SwitchPlan:
    """What one switch should hold. Routes map a destination IP to
    ("output", port) or ("group", group id)."""
    groups: Dict[int, Tuple[int, ...]] = field(default_factory=dict)
    routes: Dict[str, Tuple[str, int]] = field(default_factory=dict)
    arp_to_controller: bool = False


def fabric_graph(fabric: Fabric, down: FrozenSet[Port] = frozenset()) -> nx.MultiGraph:
    """Nodes are switch and server names; an edge per live link, with its ports."""
    graph = nx.MultiGraph()
    graph.add_nodes_from(s.name for s in fabric.switches)
    graph.add_nodes_from(h.name for h in fabric.servers)
    for link in fabric.links:
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


def compute_plan(fabric: Fabric, down: FrozenSet[Port] = frozenset()) -> Dict[str, SwitchPlan]:
    """The forwarding plan of every switch, keyed by switch name."""
    graph = fabric_graph(fabric, down)
    leaf_index = {s.name: s.index for s in fabric.leaves}
    plans = {s.name: SwitchPlan(arp_to_controller=(s.role == "leaf")) for s in fabric.switches}
    for server in fabric.servers:
        dist = nx.single_source_shortest_path_length(graph, server.name)
        if server.leaf not in dist:          # its own link is down: unreachable
            continue
        gid = leaf_index[server.leaf]
        for sw in fabric.switches:
            if sw.name not in dist:
                continue
            plan = plans[sw.name]
            ports = next_hops(graph, sw.name, dist)
            if fabric.policy == "single-path" and len(ports) > 1:
                ports = (ports[(gid - 1) % len(ports)],)
            if len(ports) == 1:
                plan.routes[server.ip] = ("output", ports[0])
            else:
                plan.groups[gid] = ports
                plan.routes[server.ip] = ("group", gid)
    return plans


def trace(fabric: Fabric, plans: Dict[str, SwitchPlan], src: str, dst_ip: str,
          max_hops: int = 16) -> Tuple[Tuple[str, ...], ...]:
    """Every path a packet from server `src` to `dst_ip` can take under `plans`
    (all buckets of every group), as tuples of node names. A path that ends
    anywhere but at the destination server means the plan is broken."""
    peer = {}
    for link in fabric.links:
        peer[(link.a, link.a_port)] = link.b
        peer[(link.b, link.b_port)] = link.a
    servers = {h.name for h in fabric.servers}
    first = fabric.server(src).leaf
    paths, stack = [], [(src, first)]
    while stack:
        path = stack.pop()
        node = path[-1]
        if node in servers or len(path) > max_hops:
            paths.append(path)
            continue
        route = plans[node].routes.get(dst_ip)
        if route is None:
            paths.append(path + ("<drop>",))
            continue
        kind, value = route
        ports = plans[node].groups[value] if kind == "group" else (value,)
        for port in ports:
            stack.append(path + (peer[(node, port)],))
    return tuple(sorted(paths))
