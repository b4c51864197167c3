"""The os-ken application: a thin shim between os-ken and the FabricCore.

Each handler turns an os-ken event into a call of the core (core.py), sends the
messages the core returns, and rewrites the status file (FABRIC_LAB_STATUS) if
the status changed. The fabric comes from the same normalised spec the lab built
the network from (FABRIC_LAB_SPEC). Nothing here decides anything: what to send
and when a switch counts as programmed is the core's, and is tested there.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (CONFIG_DISPATCHER, DEAD_DISPATCHER,
                                       HANDSHAKE_DISPATCHER, MAIN_DISPATCHER,
                                       set_ev_cls)
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3, ofproto_v1_5

from controller.core import FabricCore, PortInfo
from controller.status import write_status
from topologies.fabric import fabric_from_spec


def tls_refused(address, why: str) -> None:
    """controller/tls.py's report of a connection refused during the TLS
    handshake: into the running app's status."""
    app = app_manager.lookup_service_brick(FabricController.__name__)
    if app is not None:
        app.core.refuse(f"TLS from {address[0]}",
                        f"refused a TLS connection from {address[0]}: {why}")
        app._write_status()


def port_is_up(dp, port) -> bool:
    """An os-ken port description is up: link up, not administratively down,
    and live. Open vSwitch reports a port live when its link is up and, with
    BFD enabled on it (routing.bfd_ms), when its BFD session is up too: a
    silent failure (frames lost, carrier up) is seen only so."""
    ofp = dp.ofproto
    return not (port.state & ofp.OFPPS_LINK_DOWN or port.config & ofp.OFPPC_PORT_DOWN
                or not port.state & ofp.OFPPS_LIVE)


class FabricController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION, ofproto_v1_5.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with open(os.environ["FABRIC_LAB_SPEC"]) as f:
            fabric = fabric_from_spec(json.load(f), "controller")
        self.core = FabricCore(fabric, log=self.logger)
        self.status_path = Path(os.environ["FABRIC_LAB_STATUS"])
        self.written = None          # the last status written, without its time
        self.writing = threading.Lock()
        self._write_status()
        self.counted = {}            # dpid -> connections counted so far (a multipart reply)
        if self.core.adaptive:
            interval = fabric.routing.adaptive_interval_ms / 1e3
            self.ticker = hub.spawn(self._tick, interval)

    def _tick(self, interval: float):
        while True:
            hub.sleep(interval)
            try:
                self._send(self.core.tick(), write=False)
            except Exception:                       # noqa: BLE001 - polling must go on
                self.logger.exception("adaptive: reading the counters failed")

    @set_ev_cls([ofp_event.EventOFPFlowStatsReply, ofp_event.EventOFPFlowDescStatsReply],
                MAIN_DISPATCHER)
    def on_flow_stats(self, ev):
        """Adaptive: a part of a switch's connection counters; the core gets
        them whole."""
        msg = ev.msg
        seen = self.counted.setdefault(msg.datapath.id, {})
        for stat in msg.body:
            m = stat.match
            if "tcp_src" in m:
                nbytes = getattr(stat, "byte_count", None)      # OpenFlow 1.3
                if nbytes is None:
                    nbytes = stat.stats["byte_count"]            # 1.5: OXS stats
                seen[(m["ipv4_src"], m["ipv4_dst"], m["tcp_src"], m["tcp_dst"])] = nbytes
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            del self.counted[msg.datapath.id]
            self._send(self.core.connection_counters(msg.datapath.id, seen))

    @set_ev_cls(ofp_event.EventOFPStateChange, MAIN_DISPATCHER)
    def on_connected(self, ev):
        """os-ken has done the handshake and read the port list (dp.ports).
        A datapath id the fabric does not have is disconnected at once."""
        dp = ev.datapath
        if not self.core.admit(dp.id, dp.address):
            dp.close()
            self._write_status()
            return
        ports = [PortInfo(no, port.name.decode(errors="replace"), port_is_up(dp, port))
                 for no, port in dp.ports.items()]
        self._send(self.core.switch_connected(dp.id, dp, ports))

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def on_port_status(self, ev):
        dp, port = ev.msg.datapath, ev.msg.desc
        up = ev.msg.reason != dp.ofproto.OFPPR_DELETE and port_is_up(dp, port)
        self._send(self.core.port_changed(dp.id, port.port_no, up))

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def on_dead(self, ev):
        self._send(self.core.switch_gone(ev.datapath.id, ev.datapath))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def on_barrier(self, ev):
        self._send(self.core.barrier_reply(ev.msg.datapath.id, ev.msg.xid))

    @set_ev_cls(ofp_event.EventOFPErrorMsg,
                [HANDSHAKE_DISPATCHER, CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def on_error(self, ev):
        msg = ev.msg
        self._send(self.core.error(msg.datapath.id, msg.type, msg.code))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        """ARP replies are counted, but not written out one by one: a burst of
        requests would otherwise rewrite the status file once per packet."""
        msg = ev.msg
        self._send(self.core.packet_in(msg.datapath.id, msg.match["in_port"], msg.data),
                   write=False)

    def _send(self, outbox, write: bool = True):
        for name, msg in outbox:
            dp = self.core.datapaths.get(name)
            if dp is not None:                      # gone since: it gets all again later
                dp.send_msg(msg)
        if write:
            self._write_status()

    def _write_status(self):
        """Write the status if it changed; one writer at a time, so the last
        status computed is the last one written."""
        with self.writing:
            status = self.core.status()
            content = {k: v for k, v in status.items() if k != "time"}
            if content != self.written:
                write_status(self.status_path, status)
                self.written = content
