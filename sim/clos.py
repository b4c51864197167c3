"""A Clos fabric from its counts alone, routed as the controller routes one,
for GPU counts no fabric file can describe (the planner's 1,024 to 200,000).

Nothing is built per endpoint: a GPU is a number, a link a small tuple, and a
flow's path is worked out when asked, from where its ends sit. The shape is
the planner's (planner/designs.py): servers of `gpus` GPUs and `nics` NICs;
leaves of `down` server ports and `up` uplinks; 2 tiers (spines) or 3 (pods
of radix/2 leaves and `up` aggregation switches, each with radix/2 uplinks to
the cores of its group j, parallel links where the pods are too few to fill a
core's ports). The wiring of the servers to the leaves is a kind of
fabric's (topologies/kinds/, ``clos_wiring``: how many leaves, and which leaf
a server's NIC is on); two kinds have one:

- ``server``: a server's NICs on one leaf, servers leaf by leaf, as
  ``kind: leaf-spine`` wires them;
- ``rail``: NIC k of each of `down` servers (a unit) on the unit's rail leaf
  k, as ``kind: rail-optimized`` wires them: GPU k of every server in a unit
  shares a leaf.

Routing is the controller's (controller/routes.py): a GPU reaches a GPU of
its own server over its NVSwitch; the network through its own NIC (or, with
fewer NICs than GPUs, over PCIe through NIC k mod nics); up only as far as
needed, each switch picking among its equal-cost uplinks by a seeded hash of
the flow and of itself (ECMP), down by the one way there is.

The interface is `sim.network.Network`'s: `path(src, dst, flow)`
gives hops with `.intf` (here a tuple naming the directed link) and
`.delay_s` (the switch a hop enters: `switch_s`; out of a server, the
transport's `message_s` too), and `links[intf].rate_bps` the link's rate;
`spread` the links a flow split over every path loads (`routing` "split").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import List, NamedTuple

from topologies.kinds import clos_wirings

# switch tiers in the ECMP hash: numbers, as Python hashes tuples of ints the
# same in every process (strings it hashes with a per-process seed)
LEAF, SPINE, AGG, CORE = 1, 2, 3, 4
# how a switch picks among its equal-cost uplinks: a hash of the flow (ECMP,
# flowlets), the destination's number mod k (InfiniBand's D-mod-K), the
# destination leaf pinned (single path), or every flow split evenly
# over all of them (packet spraying, adaptive routing: `spread`)
ROUTINGS = ("hash", "dmodk", "single", "split")


def clos_routing(policy) -> str:
    """The Clos routing that stands for a routing policy (policies/)."""
    if policy.splits:
        return "split"
    if policy.per_endpoint:
        return "dmodk"
    return "single" if policy.name == "single-path" else "hash"


class Hop(NamedTuple):
    intf: tuple
    delay_s: float = 0.0


class Rate(NamedTuple):
    rate_bps: float


@dataclass(frozen=True)
class ClosShape:
    """The counts and rates of a Clos (see the module docstring)."""
    servers: int
    gpus: int                   # per server
    nics: int                   # per server
    down: int                   # server ports per leaf
    up: int                     # uplinks per leaf
    tiers: int = 2              # 2: leaf-spine; 3: leaf-aggregation-core in pods
    radix: int = 64             # ports per switch (spines, aggregation, cores)
    wiring: str = "server"
    nic_bps: float = 400e9      # server-leaf links
    fabric_bps: float = 400e9   # switch-to-switch links
    intra_bps: float = 3600e9   # NVLink (and PCIe) per GPU and direction
    routing: str = "hash"       # one of ROUTINGS
    switch_s: float = 0.0       # one switch crossed, port to port
    message_s: float = 0.0      # the transport's cost of a message entering the network

    def __post_init__(self):
        if self.tiers not in (2, 3) or self.wiring not in clos_wirings():
            raise ValueError(f"tiers must be 2 or 3 and wiring one of {tuple(clos_wirings())}")
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {self.routing!r}")
        if min(self.servers, self.gpus, self.nics, self.down, self.up) < 1 or self.nics > self.gpus:
            raise ValueError("servers, gpus, nics, down and up must be at least 1, nics <= gpus")

    @property
    def n(self) -> int:
        return self.servers * self.gpus

    @property
    def leaves(self) -> int:
        return clos_wirings()[self.wiring].clos_leaves(self.servers, self.nics, self.down)

    @property
    def spines(self) -> int:
        """2 tiers: spines, each reached by every leaf (the planner's count)."""
        return max(1, min(self.up, math.ceil(self.leaves * self.up / self.radix)))

    @property
    def pod_leaves(self) -> int:
        return self.radix // 2

    @property
    def pods(self) -> int:
        return math.ceil(self.leaves / self.pod_leaves)

    @property
    def group_cores(self) -> int:
        """3 tiers: the cores the aggregation switches j of all pods share,
        each a radix-port switch (the planner's count)."""
        return max(1, math.ceil(self.pods * (self.radix // 2) / self.radix))

    def leaf_of(self, server: int, nic: int) -> int:
        return clos_wirings()[self.wiring].clos_leaf(server, nic, self.nics, self.down)


class ClosNetwork:
    """Paths across a ClosShape, with a seeded ECMP draw (see the module
    docstring); ranks are GPU numbers 0 .. n-1, server by server."""

    def __init__(self, shape: ClosShape, seed: int = 0):
        self.shape, self.seed = shape, seed
        rates = {"nv": shape.intra_bps, "pcie": shape.intra_bps, "nic": shape.nic_bps,
                 "pool-up": shape.up * shape.fabric_bps, "pool-down": shape.up * shape.fabric_bps,
                 "pool-agg-up": shape.up * (shape.radix // 2) * shape.fabric_bps,
                 "pool-core-down": shape.up * (shape.radix // 2) * shape.fabric_bps}
        self.links = _Rates(rates, shape.fabric_bps)

    def reseed(self, seed: int) -> None:
        self.seed = seed

    @property
    def splits(self) -> bool:
        return self.shape.routing == "split"

    def _pick(self, switch: tuple, src: int, dst: int, flow: int, n: int) -> int:
        """The select group's bucket: a hash of the flow, the switch and the
        seed; under D-mod-K the destination's number (its leaf's, times the
        server ports a leaf has, plus its port there), divided by the number
        of distinct switches the choices before it could reach (`switch`'s
        tier: a spine's or core's parallel links down repeat the choice made
        on the way up), mod n; single path: the destination leaf mod n."""
        if n <= 1:
            return 0
        routing = self.shape.routing
        if routing in ("hash", "split"):
            return hash((self.seed, switch, src, dst, flow)) % n
        s = self.shape
        b, nb = divmod(dst, s.gpus)
        if routing == "single":
            return s.leaf_of(b, nb % s.nics) % n
        lid = s.leaf_of(b, nb % s.nics) * s.down + clos_wirings()[s.wiring].clos_port(
            b, nb % s.nics, s.nics, s.down)
        # the distinct switches chosen on the way before this one: none at a
        # leaf; at a spine, which spine (its parallel links to a leaf are the
        # same choice again); at an aggregation switch, which one (j); at a
        # core, j and which core (its parallel links down to a pod likewise)
        before = {LEAF: 1, SPINE: s.spines, AGG: s.up}.get(switch[0], s.up * s.group_cores)
        return lid // before % n

    def even_split(self, src: int, dst: int) -> dict:
        """The links a flow split evenly over every equal-cost path loads, as
        pools: all of a leaf's uplinks as one, all of the downlinks into a
        leaf as one (and a pod's, across three tiers), each pool's capacity
        their sum. Exact for an even split, which loads a pool's links alike."""
        s = self.shape
        (a, ga), (b, gb) = divmod(src, s.gpus), divmod(dst, s.gpus)
        if a == b:
            return {h.intf: 1.0 for h in self.path(src, dst)}
        na, nb = ga % s.nics, gb % s.nics
        out = {("nic", "up", a, na): 1.0, ("nic", "down", b, nb): 1.0}
        if s.nics < s.gpus:
            out[("pcie", "up", src)] = out[("pcie", "down", dst)] = 1.0
        la, lb = s.leaf_of(a, na), s.leaf_of(b, nb)
        if la != lb:
            out[("pool-up", la)] = out[("pool-down", lb)] = 1.0
            pa, pb = la // s.pod_leaves, lb // s.pod_leaves
            if s.tiers == 3 and pa != pb:
                out[("pool-agg-up", pa)] = out[("pool-core-down", pb)] = 1.0
        return out

    def path(self, src: int, dst: int, flow: int = 0) -> List[Hop]:
        """The hops of a flow; each hop's `delay_s` is the latency of the
        network switch it enters (and, out of the server, the transport's
        per-message cost)."""
        s = self.shape
        (a, ga), (b, gb) = divmod(src, s.gpus), divmod(dst, s.gpus)
        if a == b:
            return [Hop(("nv", "up", src)), Hop(("nv", "down", dst))]
        hops = []
        na, nb = ga % s.nics, gb % s.nics
        if s.nics < s.gpus:
            hops.append(Hop(("pcie", "up", src)))
        hops.append(Hop(("nic", "up", a, na), s.switch_s + s.message_s))
        la, lb = s.leaf_of(a, na), s.leaf_of(b, nb)
        if la != lb:
            hops += (self._two_tier if s.tiers == 2 else self._three_tier)(la, lb, src, dst, flow)
        hops.append(Hop(("nic", "down", b, nb)))
        if s.nics < s.gpus:
            hops.append(Hop(("pcie", "down", dst)))
        return hops

    def _two_tier(self, la, lb, src, dst, flow) -> List[Hop]:
        s = self.shape
        j = self._pick((LEAF, la), src, dst, flow, s.up)
        spine = j % s.spines
        back = range(spine, s.up, s.spines)            # the uplinks of lb to that spine
        k = back[self._pick((SPINE, spine), src, dst, flow, len(back))]
        return [Hop(("leaf-up", la, j), s.switch_s), Hop(("spine-down", lb, k), s.switch_s)]

    def _three_tier(self, la, lb, src, dst, flow) -> List[Hop]:
        s = self.shape
        j = self._pick((LEAF, la), src, dst, flow, s.up)      # aggregation switch j of the pod
        pa, pb = la // s.pod_leaves, lb // s.pod_leaves
        if pa == pb:
            return [Hop(("leaf-up", la, j), s.switch_s), Hop(("agg-down", lb, j), s.switch_s)]
        c = self._pick((AGG, pa, j), src, dst, flow, s.radix // 2)   # its uplink c ...
        core = c % s.group_cores                                        # ... to this core
        back = range(core, s.radix // 2, s.group_cores)     # the core's links to pb's agg j
        k = back[self._pick((CORE, j, core), src, dst, flow, len(back))]
        return [Hop(("leaf-up", la, j), s.switch_s), Hop(("agg-up", pa, j, c), s.switch_s),
                Hop(("core-down", pb, j, k), s.switch_s), Hop(("agg-down", lb, j), s.switch_s)]


class _Rates(Mapping):
    """Link id -> its rate, worked out from the id's class (nothing stored)."""

    def __init__(self, rates: dict, fabric_bps: float):
        self.rates, self.fabric = rates, Rate(fabric_bps)

    def __getitem__(self, intf):
        rate = self.rates.get(intf[0])
        return Rate(rate) if rate is not None else self.fabric

    def __iter__(self):
        raise TypeError("a Clos shape's links are not listed, only looked up")

    def __len__(self):
        raise TypeError("a Clos shape's links are not counted")
