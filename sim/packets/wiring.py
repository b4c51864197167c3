"""The fabrics of the scenarios as the packet engine sees them: nodes (hosts
first, then switches), directed links, and for every switch and destination
host the equal-cost egress links one hop nearer to it (the candidates ECMP,
destination-mod-k or adaptive routing pick among).

A route is not stored per flow: like a switch, the engine looks the packet's
destination up at every hop, which is what lets adaptive routing choose per
packet. Every link runs at the same rate, so one MTU packet takes one time
slot on any of them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np


@dataclass
class Wiring:
    name: str
    n_hosts: int
    n_switches: int
    links: List[Tuple[int, int]]        # (from node, to node), directed
    fabric_link: List[bool]             # switch-to-switch (longer cable)
    candidates: np.ndarray              # [switch, dst host, k] -> link id, -1 padded
    n_candidates: np.ndarray            # [switch, dst host]
    host_link: np.ndarray               # [host] -> its uplink's id
    leaf_of: np.ndarray                 # [host] -> its switch (node id)

    @property
    def n_nodes(self) -> int:
        return self.n_hosts + self.n_switches

    def ports(self) -> np.ndarray:
        """Ports per node (links leaving it)."""
        count = np.zeros(self.n_nodes, dtype=np.int64)
        for src, _ in self.links:
            count[src] += 1
        return count

    def link_to(self, src: int, dst: int) -> int:
        return self.links.index((src, dst))


def _wire(name, n_hosts, n_switches, edges, fabric_edges):
    """Both directions of every edge, and shortest-path candidates by BFS
    from every host."""
    links, fabric = [], []
    for a, b in edges:
        links += [(a, b), (b, a)]
        fabric += [(a, b) in fabric_edges] * 2
    n = n_hosts + n_switches
    out = [[] for _ in range(n)]
    for i, (a, b) in enumerate(links):
        out[a].append((i, b))
    k_max = max(len(o) for o in out)
    cand = np.full((n_switches, n_hosts, k_max), -1, dtype=np.int64)
    ncand = np.zeros((n_switches, n_hosts), dtype=np.int64)
    for h in range(n_hosts):
        dist = _hops_to(h, n, out)
        for s in range(n_switches):
            near = [i for i, b in out[n_hosts + s] if dist[b] == dist[n_hosts + s] - 1]
            cand[s, h, :len(near)] = near
            ncand[s, h] = len(near)
    host_link = np.array([out[h][0][0] for h in range(n_hosts)], dtype=np.int64)
    leaf_of = np.array([out[h][0][1] for h in range(n_hosts)], dtype=np.int64)
    return Wiring(name, n_hosts, n_switches, links, fabric, cand, ncand, host_link, leaf_of)


def _hops_to(host, n, out):
    dist = [n + 1] * n
    dist[host] = 0
    todo = deque([host])
    while todo:
        v = todo.popleft()
        for _, w in out[v]:
            if dist[w] > dist[v] + 1:
                dist[w] = dist[v] + 1
                todo.append(w)
    return dist


def single_switch(n_hosts: int) -> Wiring:
    """One switch with `n_hosts` NICs (the incast's)."""
    return _wire(f"1 switch x {n_hosts} NICs", n_hosts, 1,
                 [(h, n_hosts) for h in range(n_hosts)], set())


def leaf_spine(leaves: int, per_leaf: int, spines: int) -> Wiring:
    """A 2-tier Clos: `per_leaf` NICs under each leaf, every leaf wired once
    to every spine (oversubscribed per_leaf:spines when spines < per_leaf)."""
    if min(leaves, per_leaf, spines) < 1:
        raise ValueError(f"a leaf-spine needs at least one leaf, NIC and spine, not "
                         f"{leaves}x{per_leaf} with {spines} spines")
    hosts = leaves * per_leaf
    leaf = [hosts + i for i in range(leaves)]
    spine = [hosts + leaves + i for i in range(spines)]
    edges = [(h, leaf[h // per_leaf]) for h in range(hosts)]
    up = [(l, s) for l in leaf for s in spine]
    return _wire(f"{leaves} leaves x {per_leaf} NICs, {spines} spines", hosts,
                 leaves + spines, edges + up, set(up))
