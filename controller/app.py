"""The os-ken application: turns switch events into the messages of ofmsg.py.

It knows the fabric from the same normalised spec the lab built the network
from (FABRIC_LAB_SPEC), keeps the set of ports that are down, and after every
change recomputes the whole plan and sends each switch only the difference.
Progress goes to a small JSON status file (FABRIC_LAB_STATUS) that the lab
reads to know when every switch holds its routes: a switch counts as programmed
once a barrier sent after its last change has come back.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (CONFIG_DISPATCHER, DEAD_DISPATCHER,
                                       HANDSHAKE_DISPATCHER, MAIN_DISPATCHER,
                                       set_ev_cls)
from os_ken.ofproto import ofproto_v1_3, ofproto_v1_5

from controller import ofmsg
from controller.routes import compute_plan
from topologies.fabric import fabric_from_spec
from topologies.system import write_json

OF_NAMES = {ofproto_v1_3.OFP_VERSION: "OpenFlow13", ofproto_v1_5.OFP_VERSION: "OpenFlow15"}


class FabricController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION, ofproto_v1_5.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(os.environ["FABRIC_LAB_SPEC"]) as f:
            self.fabric = fabric_from_spec(json.load(f), "controller")
        self.status_path = Path(os.environ["FABRIC_LAB_STATUS"])
        self.by_dpid = {s.dpid: s.name for s in self.fabric.switches}
        self.arp_table = {h.ip: h.mac for h in self.fabric.servers}
        self.arp_table.update((h.nv_ip, h.nv_mac) for h in self.fabric.servers if h.nv_ip)
        self.ports = {s.name: {} for s in self.fabric.switches}   # name -> {port: intf}
        for link in self.fabric.links:
            for node, port, intf in ((link.a, link.a_port, link.a_intf),
                                     (link.b, link.b_port, link.b_intf)):
                if node in self.ports:
                    self.ports[node][port] = intf
        self.datapaths = {}      # switch name -> live datapath
        self.installed = {}      # switch name -> SwitchPlan it holds
        self.down = set()        # (switch name, port) that are down
        self.pending = {}        # switch name -> xid of the barrier we wait for
        self.programmed = set()
        self.errors = []
        self.arp_replies = 0
        self.generation = 0
        self._write_status()

    # --- switch life cycle -------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPStateChange, MAIN_DISPATCHER)
    def on_connected(self, ev):
        """os-ken has done the handshake and read the port list (dp.ports)."""
        dp = ev.datapath
        name = self.by_dpid.get(dp.id)
        if name is None:
            self.logger.warning("ignoring unknown datapath %s", dp.id)
            return
        self.logger.info("%s connected (%s)", name, OF_NAMES.get(dp.ofproto.OFP_VERSION))
        expected = self.ports[name]
        for port_no, intf in expected.items():
            port = dp.ports.get(port_no)
            if port is None:
                self._error(f"{name} has no port {port_no} ({intf})")
                self._set_port(name, port_no, False)
                continue
            got = port.name.decode(errors="replace")
            if got != intf:
                self._error(f"{name} port {port_no} is {got!r}, expected {intf!r}")
            self._set_port(name, port_no, self._is_up(dp, port))
        self.installed.pop(name, None)
        self.datapaths[name] = dp
        self._reprogram()

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def on_port_status(self, ev):
        dp, port = ev.msg.datapath, ev.msg.desc
        name = self.by_dpid.get(dp.id)
        if name is None or port.port_no not in self.ports[name]:
            return
        up = ev.msg.reason != dp.ofproto.OFPPR_DELETE and self._is_up(dp, port)
        if self._set_port(name, port.port_no, up):
            self.logger.info("%s port %d %s", name, port.port_no, "up" if up else "down")
            if name in self.datapaths:
                self._reprogram()

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def on_dead(self, ev):
        name = self.by_dpid.get(ev.datapath.id)
        if name and self.datapaths.get(name) is ev.datapath:
            self.logger.info("%s disconnected", name)
            for table in (self.datapaths, self.installed, self.pending):
                table.pop(name, None)
            self.programmed.discard(name)
            self._write_status()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def on_barrier(self, ev):
        name = self.by_dpid.get(ev.msg.datapath.id)
        if name and self.pending.get(name) == ev.msg.xid:
            del self.pending[name]
            self.programmed.add(name)
            self._write_status()

    @set_ev_cls(ofp_event.EventOFPErrorMsg,
                [HANDSHAKE_DISPATCHER, CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_error(self, ev):
        msg = ev.msg
        name = self.by_dpid.get(msg.datapath.id, "?")
        self._error(f"{name} rejected a message: type {msg.type} code {msg.code}")

    # --- ARP ---------------------------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        reply = ofmsg.arp_reply(msg.data, self.arp_table)
        if reply is not None:
            dp.send_msg(ofmsg.packet_out(dp, msg.match["in_port"], reply))
            self.arp_replies += 1

    # --- the plan ------------------------------------------------------------------

    def _reprogram(self):
        plans = compute_plan(self.fabric, frozenset(self.down))
        self.generation += 1
        for name, dp in self.datapaths.items():
            msgs = ofmsg.plan_messages(dp, self.installed.get(name), plans[name])
            if not msgs and name not in self.pending and name in self.installed:
                continue
            for m in msgs:
                dp.send_msg(m)
            self.installed[name] = plans[name]
            barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
            dp.set_xid(barrier)
            self.pending[name] = barrier.xid
            self.programmed.discard(name)
            dp.send_msg(barrier)
        self._write_status()

    def _set_port(self, name, port_no, up) -> bool:
        """Record a port's state; True if it changed."""
        key = (name, port_no)
        was_up = key not in self.down
        if up:
            self.down.discard(key)
        else:
            self.down.add(key)
        return was_up != up

    @staticmethod
    def _is_up(dp, port) -> bool:
        ofp = dp.ofproto
        return not (port.state & ofp.OFPPS_LINK_DOWN or port.config & ofp.OFPPC_PORT_DOWN)


    def _error(self, text):
        self.logger.error(text)
        self.errors.append(text)
        self._write_status()

    def _write_status(self):
        status = {
            "pid": os.getpid(),
            "time": time.time(),
            "generation": self.generation,
            "connected": sorted(self.datapaths),
            "programmed": sorted(self.programmed),
            "versions": {n: OF_NAMES.get(dp.ofproto.OFP_VERSION, "?")
                         for n, dp in sorted(self.datapaths.items())},
            "down_ports": sorted(f"{n}:{p}" for n, p in self.down),
            "arp_replies": self.arp_replies,
            "errors": self.errors[-20:],
        }
        write_json(self.status_path, status)
