"""The adaptive policy's decisions, as plain data: which elephant flow goes
out of which port (Hedera's idea, on the controller's own counters).

Open vSwitch hashes flows onto a select group's buckets in its datapath, so
the controller never sees a flow there. Under ``adaptive`` every switch that
holds a select group sends the controller a copy of each TCP SYN (and SYN-ACK)
it is about to hash; the controller answers with an exact-match flow for that
connection, whose action is the destination's group, and so gets the
connection's byte counter. Every `interval` it reads the counters of those
flows (Open vSwitch refreshes them about every 0.5 s) and places the
elephants, the connections that carried at least `ELEPHANT_SHARE` of their
link's rate since the last change, one at a time in a fixed order: each on
the port of its group whose link, and the link its next switch forwards it
on, carry the fewest elephants so far. An elephant stays where it is unless
another port is strictly less loaded, so placements do not flap; one idle
for 2 s keeps its port but weighs on no link (a finished transfer whose
flow has not expired yet). A placed
elephant's flow outputs to its port; every other flow keeps hashing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from controller.routes import SwitchPlan, compute_plan
from topologies.fabric import Fabric

FlowKey = Tuple[str, str, int, int]       # TCP: (source IP, destination IP, ports)
Action = Tuple[str, int]                  # ("output", port) or ("group", gid)
ELEPHANT_SHARE = 0.1                      # of the link rate
IDLE_TIMEOUT_S = 60                       # an exact flow unused this long goes


@dataclass
class Tracked:
    """A connection a switch hashes, as the controller follows it."""
    dst: str                              # destination IP: its route at the switch
    action: Action                        # what the switch's exact flow does now
    samples: List[Tuple[float, int]] = field(default_factory=list)   # (time, bytes) changes
    rate_bps: float = 0.0
    pinned: Optional[int] = None          # the port it was placed on
    missed: int = 0                       # counter replies in a row without it


class Adaptive:
    """Tracked flows per switch; their placement on the switches' plans."""

    def __init__(self, fabric: Fabric):
        self.flows: Dict[Tuple[str, FlowKey], Tracked] = {}
        self.neighbour: Dict[Tuple[str, int], str] = {}      # (switch, port) -> node
        self.rate_bps: Dict[Tuple[str, int], float] = {}
        for link in fabric.links:
            for a, ap, b in ((link.a, link.a_port, link.b), (link.b, link.b_port, link.a)):
                self.neighbour[(a, ap)] = b
                self.rate_bps[(a, ap)] = link.spec.rate_mbit * 1e6
        # (switch, destination IP) a switch hashes when every link is up
        self.multipath = {(name, ip) for name, plan in compute_plan(fabric).items()
                          for ip, route in plan.routes.items() if route[0] == "group"}
        self.moves = 0                                        # placements that moved a flow
        self.placements = 0                                   # flows placed, moves included

    # --- events ----------------------------------------------------------------

    def syn(self, switch: str, key: FlowKey, plan: SwitchPlan) -> Optional[Action]:
        """A SYN the switch would hash with every link up: the action for its
        exact flow (the route's, a group, or a port while failures leave one
        path), or None when the switch never hashes this destination (the SYN
        goes on by the route) or already tracks the connection."""
        route = plan.routes.get(key[1])
        if route is None or (switch, key[1]) not in self.multipath or (switch, key) in self.flows:
            return None
        self.flows[(switch, key)] = Tracked(key[1], route)
        return route

    def counters(self, switch: str, seen: Dict[FlowKey, int], now: float) -> None:
        """A switch's exact flows and their byte counts: update the rates;
        forget the flows it no longer has (expired, or the switch restarted).
        A flow missing from one reply may have been made after the switch
        answered (its SYN came in the meantime): missing from two, it is gone."""
        for k in [k for k in self.flows if k[0] == switch and k[1] not in seen]:
            self.flows[k].missed += 1
            if self.flows[k].missed >= 2:
                del self.flows[k]
        for key, nbytes in seen.items():
            t = self.flows.get((switch, key))
            if t is None:
                continue
            t.missed = 0
            if not t.samples or t.samples[-1][1] != nbytes:
                t.samples = (t.samples + [(now, nbytes)])[-2:]
                if len(t.samples) == 2:
                    (t0, b0), (t1, b1) = t.samples
                    t.rate_bps = (b1 - b0) * 8 / max(t1 - t0, 1e-3)
            elif now - t.samples[-1][0] > 2.0:
                t.rate_bps = 0.0                       # no byte for 2 s: idle

    def forget_switch(self, switch: str) -> None:
        for key in [k for k in self.flows if k[0] == switch]:
            del self.flows[key]

    # --- placement ---------------------------------------------------------------

    def place(self, plans: Dict[str, SwitchPlan]) -> List[Tuple[str, FlowKey, Action]]:
        """Place every elephant; the exact flows whose action changes, as
        (switch, flow, new action)."""
        load: Dict[Tuple[str, int], int] = {}
        changes = []
        ports_of = {k: self._ports(plans, k[0], t.dst) for k, t in self.flows.items()}
        # the placed that may stay first, so that those to be placed see them
        order = sorted(self.flows, key=lambda k: (self.flows[k].pinned not in ports_of[k], k))
        for switch, key in order:
            t, ports = self.flows[(switch, key)], ports_of[(switch, key)]
            route = plans[switch].routes.get(t.dst) if switch in plans else None
            if t.pinned in ports and t.rate_bps == 0:
                continue             # placed, idle now (a finished transfer): loads nothing
            if not ports or (t.pinned is None and not self._elephant(switch, t, ports)):
                t.pinned = None
                new = route
            else:
                cost = {p: self._cost(plans, switch, p, t.dst, load) for p in ports}
                best = min(ports, key=lambda p: (cost[p], p))
                keep = t.pinned in cost and cost[t.pinned] <= cost[best]
                port = t.pinned if keep else best
                if t.pinned is not None and not keep:
                    self.moves += 1
                if not keep:
                    self.placements += 1
                t.pinned = port
                for link in self._links(plans, switch, port, t.dst):
                    load[link] = load.get(link, 0) + 1
                new = ("output", port)
            if new is not None and new != t.action:
                t.action = new
                changes.append((switch, key, new))
        return changes

    @staticmethod
    def _ports(plans, switch: str, dst: str) -> Tuple[int, ...]:
        """The ports of the group `switch` sends `dst` to (none: no group)."""
        route = plans[switch].routes.get(dst) if switch in plans else None
        return plans[switch].groups.get(route[1], ()) if route and route[0] == "group" else ()

    def _elephant(self, switch: str, t: Tracked, ports) -> bool:
        return t.rate_bps >= ELEPHANT_SHARE * min(self.rate_bps[(switch, p)] for p in ports)

    def _links(self, plans, switch: str, port: int, dst: str) -> List[Tuple[str, int]]:
        """The link out of `port`, and the one the next switch sends `dst` on
        when it has only one."""
        links = [(switch, port)]
        nxt = self.neighbour.get((switch, port))
        route = plans[nxt].routes.get(dst) if nxt in plans else None
        if route and route[0] == "output":
            links.append((nxt, route[1]))
        return links

    def _cost(self, plans, switch, port, dst, load) -> int:
        return max(load.get(link, 0) for link in self._links(plans, switch, port, dst))

    def status(self) -> dict:
        return {"tracked": len(self.flows),
                "placed": sum(t.pinned is not None for t in self.flows.values()),
                "moves": self.moves, "placements": self.placements}
