"""Where each node of a fabric runs when the fabric is emulated across
several machines (cluster mode, Mininet's cluster edition): plain data from
the model, nothing run, nothing imported from Mininet.

The rule is the fabric's own: what is cabled below the top tier stays on one
machine, so a machine boundary only ever cuts the links a real cluster would
run over long cables. Cutting a kind's top-tier links (its ``cut``, in
topologies/kinds/) splits the fabric into *groups*, the pieces that hold
endpoints, and the switches above them:

- leaf-spine: a group is a leaf with its servers (every GPU endpoint, the
  server's NVSwitch and PCIe switch); the spines are above;
- rail-optimized: a group is a scalable unit, its servers and its rail
  leaves (every server is cabled to every rail leaf of its unit); spines above;
- fat-tree: a group is a pod, its edge and aggregation switches and their
  servers; the cores are above;
- full-mesh: a group is a server with its switch; nothing is above, and every
  mesh cable between switches on two machines crosses;
- single-switch: one group, so one machine (every server is cabled to it).

Groups go to machines in order, in contiguous runs as even as whole groups
allow (the endpoints of two machines differ by at most one group's). The
switches above go round-robin: each to a machine with fewest of them so far,
among those the one it has most links to (fewest links cross), then the
first. They forward all the traffic between groups, and CPU is what limits an
emulated fabric, so their work is shared out; when the groups divide evenly
every machine is equally connected and round-robin crosses no more links than
putting them all with their best-connected machine would. More
machines than groups is refused in one sentence: an empty machine would only
carry tunnels. One machine holds everything, and nothing crosses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from toolkit.errors import SOURCE_MAX, printable
from topologies.fabric import Fabric
from topologies.roles import role
from topologies.schema import SCHEMA
from policies import policy

NAMES_SHOWN, PAIRS_SHOWN = 12, 15
_NUMBERED = re.compile(r"(.*?)([0-9]+)")


class PlacementError(ValueError):
    """This fabric cannot be spread over these machines: one sentence."""


@dataclass(frozen=True)
class Cluster:
    """The machines of a cluster run and how to reach them."""
    machines: Tuple[str, ...]    # ssh destinations, validated host names or IPv4 addresses
    user: str
    tunnel: str                  # "vxlan" or "ssh"
    controller: Optional[str]    # where the controller listens (None: the address
                                 # this machine reaches the first from)
    where: str                   # where the machines were given, for messages
    tls: bool = True             # OpenFlow over TLS with certificates made per run


@dataclass(frozen=True)
class Placement:
    """Machines are numbered from 0 here (messages print them from 1)."""
    machines: int
    node: Dict[str, int]                   # every switch and endpoint -> its machine
    crossing: Dict[Tuple[int, int], int]   # (i, j), i < j -> links between them: tunnels
    counts: Tuple[Dict[str, int], ...]     # per machine: servers, endpoints, switches,
                                           # links (both ends there), tunnels (one end)

    def crossing_links(self, fabric: Fabric) -> list:
        """The links whose ends are on two machines, in the fabric's order."""
        return [l for l in fabric.links if self.node[l.a] != self.node[l.b]]


def cluster_of(fabric: Fabric, machines: Optional[Sequence[str]] = None) -> Optional[Cluster]:
    """The fabric's ``cluster:`` section, its machines overridden by
    `machines` (--cluster) when given; None when neither says to spread it."""
    section = fabric.spec.get("cluster")
    if section is None and machines is None:
        return None
    defaults = {key: default for key, (_check, default) in SCHEMA["cluster"][0].items()}
    section = section or defaults
    hosts = tuple(machines if machines is not None else section["machines"])
    where = ("--cluster" if machines is not None
             else f"{printable(str(fabric.source), SOURCE_MAX, tail=True)}: cluster.machines")
    return Cluster(hosts, section["user"], section["tunnel"], section["controller"], where,
                   section["tls"])


def refuse_in_cluster(fabric: Fabric, cluster: Cluster, cli: bool, calibrate: bool) -> None:
    """What a run across machines cannot do in this version: ValueError, one sentence."""
    refused = [(cli, "--cli opens Mininet's prompt on the nodes of this machine"),
               (calibrate, "--calibrate builds labs of its own on this machine"),
               (not policy(fabric.policy).controller,
                f"the {fabric.policy} policy has no controller to tell when the fabric is "
                "ready"),
               (cluster.tunnel == "ssh", "cluster.tunnel ssh (Mininet's RemoteSSHLink) is not "
                                         "built by this version: use vxlan")]
    for refuse, why in refused:
        if refuse:
            raise ValueError(f"{cluster.where}: a run across machines cannot do this: {why} "
                             "(docs/cluster.md)")


def place_cluster(fabric: Fabric, cluster: Cluster) -> Placement:
    """`place` for a cluster; PlacementError names where its machines came from."""
    try:
        return place(fabric, len(cluster.machines))
    except PlacementError as exc:
        raise PlacementError(f"{cluster.where}: {exc}") from None


def place(fabric: Fabric, n: int) -> Placement:
    """Every node of `fabric` on one of `n` machines, by the rules above."""
    groups, above = groups_of(fabric)
    if n > len(groups):
        one, many, rule = fabric.kind_class.group
        raise PlacementError(
            f"a {fabric.kind} fabric keeps {rule} on one machine, and this one has "
            f"{len(groups)} {one if len(groups) == 1 else many}: at most {len(groups)} "
            f"machine{'s' if len(groups) > 1 else ''}, got {n}")
    size = {h.name: 1 for h in fabric.endpoints}
    node: Dict[str, int] = {}
    for group, machine in zip(groups, spread_over([sum(size.get(x, 0) for x in g)
                                               for g in groups], n)):
        node.update((x, machine) for x in group)
    _place_above(fabric, above, node, n)
    return _tally(fabric, node, n)


def groups_of(fabric: Fabric) -> Tuple[List[List[str]], List[List[str]]]:
    """(groups, above): the pieces left when the kind's top-tier links are cut,
    those with endpoints in the order of their first endpoint, the others
    (spines, cores) in the order of their switches."""
    parent = {x: x for x in [s.name for s in fabric.switches] + [h.name for h in fabric.endpoints]}

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    cut = fabric.kind_class.cut
    for l in fabric.links:
        if l.kind not in cut:
            parent[root(l.a)] = root(l.b)
    pieces: Dict[str, List[str]] = {}
    for x in parent:                                  # switches first, then endpoints
        pieces.setdefault(root(x), []).append(x)
    endpoints = {h.name: h.index for h in fabric.endpoints}
    first = {r: min((endpoints[x] for x in p if x in endpoints), default=0)
             for r, p in pieces.items()}
    groups = sorted((p for r, p in pieces.items() if first[r]), key=lambda p: first[root(p[0])])
    return groups, [p for r, p in pieces.items() if not first[r]]


def spread_over(sizes: List[int], n: int) -> List[int]:
    """The machine of each group: contiguous runs, q or q+1 groups each, when
    the groups are alike; else the largest first onto the lightest machine.
    Either way, no machine has a whole group more than another."""
    if len(set(sizes)) <= 1:
        q, r = divmod(len(sizes), n)
        return [m for m in range(n) for _ in range(q + (m < r))]
    load, out = [0] * n, [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        out[i] = min(range(n), key=lambda m: (load[m], m))
        load[out[i]] += sizes[i]
    return out


def _place_above(fabric: Fabric, above: List[List[str]], node: Dict[str, int], n: int) -> None:
    """Each switch above on a machine with fewest of them so far; among
    those, the one it has most links to, then the first."""
    placed = [0] * n
    for piece in above:
        inside = set(piece)
        links = [0] * n
        for l in fabric.links:
            for here, there in ((l.a, l.b), (l.b, l.a)):
                if here in inside and there in node:
                    links[node[there]] += 1
        machine = min(range(n), key=lambda m: (placed[m], -links[m], m))
        placed[machine] += 1
        node.update((x, machine) for x in piece)


def _tally(fabric: Fabric, node: Dict[str, int], n: int) -> Placement:
    counts = tuple({"servers": 0, "endpoints": 0, "switches": 0, "links": 0, "tunnels": 0}
                   for _ in range(n))
    for s in fabric.switches:
        counts[node[s.name]]["switches"] += 1
    for h in fabric.endpoints:
        counts[node[h.name]]["endpoints"] += 1
        counts[node[h.name]]["servers"] += h.gpu == 1
    crossing: Dict[Tuple[int, int], int] = {}
    for l in fabric.links:
        a, b = node[l.a], node[l.b]
        if a == b:
            counts[a]["links"] += 1
        else:
            pair = (min(a, b), max(a, b))
            crossing[pair] = crossing.get(pair, 0) + 1
            counts[a]["tunnels"] += 1
            counts[b]["tunnels"] += 1
    return Placement(n, node, dict(sorted(crossing.items())), counts)


# --- what --check prints -----------------------------------------------------------------

def placement_text(fabric: Fabric, cluster: Cluster, placement: Placement) -> str:
    """Indented lines for --check: the cluster, each machine's nodes, the tunnels."""
    n = placement.machines
    lines = [f"  cluster: {n} machine{'s' if n > 1 else ''}, ssh as {cluster.user}, "
             f"{cluster.tunnel} tunnels, controller "
             + (f"on {cluster.controller}" if cluster.controller
                else f"here, on the address facing {cluster.machines[0]}")
             + (", OpenFlow over TLS" if cluster.tls else ", OpenFlow in plain TCP (tls: false)")]
    multi = fabric.gpus_per_server > 1 or fabric.nics_per_server > 1
    for m, host in enumerate(cluster.machines):
        c = placement.counts[m]
        network = [s.name for s in fabric.switches
                   if not role(s.role).in_server and placement.node[s.name] == m]
        servers = list(dict.fromkeys(h.server for h in fabric.endpoints
                                     if placement.node[h.name] == m))
        gpus = f" = {c['endpoints']} GPUs" if multi else ""
        inside = (f" + {c['switches'] - len(network)} in servers"
                  if c["switches"] > len(network) else "")
        lines.append(f"  machine {m + 1} {host}: {brief(network + servers)} "
                     f"({_n(c['servers'], 'server')}{gpus}, {_n(len(network), 'switch')}"
                     f"{inside}, {_n(c['links'], 'link')})")
    lines.append(f"  tunnels: {tunnels_text(placement, cluster.tunnel)}")
    return "\n".join(lines)


def tunnels_text(placement: Placement, tunnel: str = "vxlan") -> str:
    pairs = list(placement.crossing.items())
    if not pairs:
        return "none (nothing crosses machines)"
    shown = ", ".join(f"{i + 1}-{j + 1}: {_n(k, 'link')}"
                      for (i, j), k in pairs[:PAIRS_SHOWN])
    more = f" and {len(pairs) - PAIRS_SHOWN} more pairs" if len(pairs) > PAIRS_SHOWN else ""
    return (f"{shown}{more} ({sum(placement.crossing.values())} links cross machines, "
            f"over {tunnel})")


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 'es' if word.endswith('h') else 's'}"


def brief(names: List[str]) -> str:
    """Names with runs of three or more numbered alike shortened: leaf1, leaf2,
    spine1, h1..h8; at most NAMES_SHOWN items, then how many more."""
    items: List[str] = []
    run: List[Tuple[str, int, str]] = []

    def flush():
        items.extend([f"{run[0][2]}..{run[-1][2]}"] if len(run) >= 3 else [r[2] for r in run])
        run.clear()

    for name in names:
        m = _NUMBERED.fullmatch(name)
        key = (m.group(1), int(m.group(2))) if m else (name, None)
        if run and not (key[1] is not None and key[0] == run[-1][0]
                        and key[1] == run[-1][1] + 1):
            flush()
        if key[1] is None:
            items.append(name)
        else:
            run.append((key[0], key[1], name))
    flush()
    more = f" and {len(items) - NAMES_SHOWN} more" if len(items) > NAMES_SHOWN else ""
    return ", ".join(items[:NAMES_SHOWN]) + more
