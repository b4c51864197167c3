"""The controller's state and decisions, as a pure class: events in, messages out.

`FabricCore` knows the fabric (from the same normalised spec the lab built the
network from), which switches are connected and over which datapath, which of
their ports are down, the plan each switch holds, and the barrier each switch
still owes. Every event method returns what to send as (switch name, message)
pairs, in sending order, and sends nothing: the os-ken app (app.py) is the one
place that sends. A datapath here is anything with ``ofproto`` and
``ofproto_parser`` (a live os-ken Datapath, or ``ProtocolDesc`` in tests), so
the whole life of a switch can be played without one.

After every change the core recomputes the whole plan and sends each connected
switch only the difference from what it holds, then a barrier numbered by the
core. A switch counts as programmed once the barrier sent after its last change
comes back with that number; `status()` is what the lab reads to know when
every switch holds its routes.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from os_ken.ofproto import ofproto_v1_3, ofproto_v1_5

from controller import ofmsg
from controller.elephants import IDLE_TIMEOUT_S, Adaptive, FlowKey
from controller.routes import Port, SwitchPlan, compute_plan
from policies import policy
from topologies.fabric import Fabric

OF_NAMES = {ofproto_v1_3.OFP_VERSION: "OpenFlow13", ofproto_v1_5.OFP_VERSION: "OpenFlow15"}
ERRORS_KEPT = 20                 # the last errors the status reports

Outbox = List[Tuple[str, Any]]   # (switch name, os-ken message) in sending order


@dataclass(frozen=True)
class PortInfo:
    """A port as the switch describes it: its number, its interface name, and
    whether it is up (link up and not administratively down)."""
    number: int
    name: str
    up: bool


def fabric_interfaces(fabric: Fabric) -> Dict[str, Dict[int, str]]:
    """Switch name -> {port number: interface name} the fabric cables."""
    interfaces = {s.name: {} for s in fabric.switches}
    for link in fabric.links:
        for node, port, intf in ((link.a, link.a_port, link.a_intf),
                                 (link.b, link.b_port, link.b_intf)):
            if node in interfaces:
                interfaces[node][port] = intf
    return interfaces


def fabric_arp_table(fabric: Fabric) -> Dict[str, str]:
    """IP -> MAC of every endpoint, NVLink addresses included."""
    table = {h.ip: h.mac for h in fabric.endpoints}
    table.update((h.nv_ip, h.nv_mac) for h in fabric.endpoints if h.nv_ip)
    return table


class FabricCore:
    """The controller without os-ken: switch events in, OpenFlow messages out.

    Events name a switch by its DPID, as os-ken reports it. A switch whose
    DPID the fabric does not have is refused (`admit`: the app disconnects
    it, the status names it among the errors) and its events are ignored.
    Messages go out by switch name."""

    def __init__(self, fabric: Fabric, log: Optional[logging.Logger] = None,
                 clock: Callable[[], float] = time.time):
        self.fabric = fabric
        self.log = log or logging.getLogger(__name__)
        self.clock = clock
        self.names = {s.dpid: s.name for s in fabric.switches}     # dpid -> switch name
        self.interfaces = fabric_interfaces(fabric)                 # name -> {port: intf}
        self.arp_table = fabric_arp_table(fabric)
        self.datapaths: Dict[str, Any] = {}        # switch name -> its live datapath
        self.installed: Dict[str, SwitchPlan] = {} # switch name -> the plan it holds
        self.down: set = set()                      # (switch name, port) that are down
        self.pending: Dict[str, int] = {}           # switch name -> xid of the awaited barrier
        self.programmed: set = set()
        self.errors: deque = deque(maxlen=ERRORS_KEPT)
        self.refused: Dict[str, int] = {}           # who was refused -> how many times
        self.arp_replies = 0
        self.generation = 0
        self.last_xid = 0
        self.adaptive = Adaptive(fabric) if policy(fabric.policy).moves_elephants else None

    # --- switch life cycle -------------------------------------------------------

    def admit(self, dpid: int, address: Optional[Tuple] = None) -> bool:
        """Whether a switch that finished its handshake may stay: only the
        fabric's datapath ids may. A refused one is an error of the status
        (once per datapath id; every attempt is logged)."""
        if dpid in self.names:
            return True
        where = f" from {address[0]}" if address else ""
        self.refuse(f"datapath id {dpid:016x}", f"refused a switch with datapath id {dpid:016x}"
                    f"{where}: no switch of the fabric has it")
        return False

    def refuse(self, who: str, text: str) -> None:
        """A connection refused (an unknown datapath id; a switch without
        this run's certificate): logged each time, an error the first."""
        self.refused[who] = self.refused.get(who, 0) + 1
        if self.refused[who] == 1:
            self._error(text)
        else:
            self.log.warning("%s (%d times)", text, self.refused[who])

    def switch_connected(self, dpid: int, dp, ports: Iterable[PortInfo]) -> Outbox:
        """A switch finished its handshake and listed its ports: check them
        against the fabric, forget what it held, and program it from scratch."""
        name = self.names.get(dpid)
        if name is None:                            # refused by admit() already
            return []
        self.log.info("%s connected (%s)", name, OF_NAMES.get(dp.ofproto.OFP_VERSION))
        self._check_ports(name, {p.number: p for p in ports})
        self.installed.pop(name, None)
        self.datapaths[name] = dp
        if self.adaptive:
            self.adaptive.forget_switch(name)       # its table is about to be cleared
        return self._reprogram()

    def port_changed(self, dpid: int, port_no: int, up: bool) -> Outbox:
        """A port went up or down (or was deleted: down)."""
        name = self.names.get(dpid)
        if name is None or port_no not in self.interfaces[name]:
            return []
        if not self._set_port(name, port_no, up):
            return []
        self.log.info("%s port %d %s", name, port_no, "up" if up else "down")
        return self._reprogram() if name in self.datapaths else []

    def switch_gone(self, dpid: int, dp) -> Outbox:
        """The connection over `dp` closed. A switch that has reconnected over
        another datapath since stays connected."""
        name = self.names.get(dpid)
        if name is None or self.datapaths.get(name) is not dp:
            return []
        self.log.info("%s disconnected", name)
        for table in (self.datapaths, self.installed, self.pending):
            table.pop(name, None)
        self.programmed.discard(name)
        return []

    def barrier_reply(self, dpid: int, xid: int) -> Outbox:
        """A barrier came back: the switch is programmed if it is the one sent
        after its last change."""
        name = self.names.get(dpid)
        if name is not None and self.pending.get(name) == xid:
            del self.pending[name]
            self.programmed.add(name)
        return []

    def error(self, dpid: Optional[int], type_: int, code: int) -> Outbox:
        """A switch rejected a message."""
        name = self.names.get(dpid, "?")
        self._error(f"{name} rejected a message: type {type_} code {code}")
        return []

    # --- ARP ---------------------------------------------------------------------

    def packet_in(self, dpid: int, in_port: int, data: bytes) -> Outbox:
        """A packet sent to the controller: an ARP request for an address the
        fabric knows is answered out of the port it came in by; under adaptive,
        a TCP SYN gets its connection's own flow and goes on by it."""
        name = self.names.get(dpid)
        dp = self.datapaths.get(name)
        if dp is None:
            return []
        key = ofmsg.tcp_syn_key(data) if self.adaptive else None
        if key is not None:
            return self._syn(name, dp, key, data)
        reply = ofmsg.arp_reply(data, self.arp_table)
        if reply is None:
            return []
        self.arp_replies += 1
        return [(name, ofmsg.packet_out(dp, in_port, reply))]

    # --- adaptive ----------------------------------------------------------------

    def _syn(self, name: str, dp, key: FlowKey, data: bytes) -> Outbox:
        plan = self.installed.get(name)
        if plan is None:
            return []
        action = self.adaptive.syn(name, key, plan)
        out: Outbox = []
        if action is not None:
            out.append((name, ofmsg.connection_flow_mod(dp, key, action, IDLE_TIMEOUT_S)))
        else:
            tracked = self.adaptive.flows.get((name, key))
            action = tracked.action if tracked else plan.routes.get(key[1])
        if action is not None:
            out.append((name, ofmsg.packet_out_action(dp, data, action)))
        return out

    def tick(self) -> Outbox:
        """Adaptive, every interval: ask each switch that hashes for its
        connections' counters."""
        if not self.adaptive:
            return []
        return [(name, ofmsg.connection_stats_request(dp))
                for name, dp in self.datapaths.items()
                if name in self.installed and self.installed[name].syn_to_controller]

    def connection_counters(self, dpid: int, seen: Dict[FlowKey, int]) -> Outbox:
        """A switch's connections and their byte counts: place the elephants."""
        name = self.names.get(dpid)
        if name is None or not self.adaptive or name not in self.datapaths:
            return []
        self.adaptive.counters(name, seen, self.clock())
        return self._placements(self.installed)

    def _placements(self, plans: Dict[str, SwitchPlan]) -> Outbox:
        out: Outbox = []
        for name, key, action in self.adaptive.place(plans):
            dp = self.datapaths.get(name)
            if dp is not None:
                out.append((name, ofmsg.connection_flow_mod(dp, key, action, IDLE_TIMEOUT_S)))
        return out

    # --- status ------------------------------------------------------------------

    def status(self) -> dict:
        """What the lab reads: who is connected and programmed, with which
        OpenFlow version, which ports are down, and what went wrong."""
        return {
            "pid": os.getpid(),
            "time": self.clock(),
            "generation": self.generation,
            "connected": sorted(self.datapaths),
            "programmed": sorted(self.programmed),
            "versions": {n: OF_NAMES.get(dp.ofproto.OFP_VERSION, "?")
                         for n, dp in sorted(self.datapaths.items())},
            "down_ports": sorted(f"{n}:{p}" for n, p in self.down),
            "arp_replies": self.arp_replies,
            "errors": list(self.errors),
            "refused": dict(self.refused),
            **({"adaptive": self.adaptive.status()} if self.adaptive else {}),
        }

    # --- the plan ------------------------------------------------------------------

    def _reprogram(self) -> Outbox:
        """Recompute the plan; send each connected switch what changed for it,
        then a barrier. A switch still owing a barrier gets a new one even when
        nothing changed for it, so it is programmed only after this change."""
        plans = compute_plan(self.fabric, frozenset(self.down))
        self.generation += 1
        out: Outbox = []
        # adaptive: nothing placed on a port now down; each switch's before its barrier
        placed = self._placements(plans) if self.adaptive else []
        for name, dp in self.datapaths.items():
            msgs = ofmsg.plan_messages(dp, self.installed.get(name), plans[name])
            msgs += [m for n, m in placed if n == name]
            if not msgs and name not in self.pending and name in self.installed:
                continue
            self.installed[name] = plans[name]
            barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
            barrier.set_xid(self._next_xid(dp))
            self.pending[name] = barrier.xid
            self.programmed.discard(name)
            out += [(name, m) for m in msgs] + [(name, barrier)]
        return out

    def _next_xid(self, dp) -> int:
        """Barrier xids count up from 1 across all switches and connections, so
        a reply to a barrier of an earlier connection never matches."""
        self.last_xid = self.last_xid % dp.ofproto.MAX_XID + 1
        return self.last_xid

    def _check_ports(self, name: str, ports: Dict[int, PortInfo]) -> None:
        """Record the state of every port the fabric cables on this switch;
        report ports that are missing or named unlike the fabric's interface."""
        for number, intf in self.interfaces[name].items():
            port = ports.get(number)
            if port is None:
                self._error(f"{name} has no port {number} ({intf})")
                self._set_port(name, number, False)
                continue
            if port.name != intf:
                self._error(f"{name} port {number} is {port.name!r}, expected {intf!r}")
            self._set_port(name, number, port.up)

    def _set_port(self, name: str, port_no: int, up: bool) -> bool:
        """Record a port's state; True if it changed."""
        key: Port = (name, port_no)
        was_up = key not in self.down
        if up:
            self.down.discard(key)
        else:
            self.down.add(key)
        return was_up != up

    def _error(self, text: str) -> None:
        self.log.error(text)
        self.errors.append(text)
