"""Taking switch ports down or up through the lab's own Open vSwitch: an
OpenFlow 1.3 PORT_MOD on each bridge's management socket, all sent at once.

ovs-vswitchd then turns the interface's flags off itself (the kernel's veth
goes down, its peer loses carrier), marks the port down, tells the
controller (PORT_STATUS) and revalidates its flows in that one step, as a
switch ASIC hears of a lost signal at once; after `ip link set down` it
waits for the kernel's netlink notice first (2-9 ms, docs/how-it-works.md).
Each bridge gets HELLO, PORT_MOD and BARRIER in one write, without waiting
for the handshake, so both ends of a link go down in the same turn of the
daemon's main loop (two `ovs-ofctl mod-port` processes, each with its own
handshake, reached it 1-9 ms apart); the barrier's reply says it is done.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import struct
import time
from typing import List, Optional, Tuple

OF13 = 0x04
HELLO, ERROR, PORT_MOD, BARRIER_REQUEST, BARRIER_REPLY = 0, 1, 16, 20, 21
PORT_DOWN = 1                      # OFPPC_PORT_DOWN
TIMEOUT_S = 2.0


def header(kind: int, length: int, xid: int) -> bytes:
    return struct.pack("!BBHI", OF13, kind, length, xid)


def port_mod(port_no: int, hw_addr: str, up: bool, xid: int = 1) -> bytes:
    """An OpenFlow 1.3 PORT_MOD setting only the PORT_DOWN bit of one port
    (Open vSwitch refuses it unless hw_addr is the port's own)."""
    mac = bytes.fromhex(hw_addr.replace(":", ""))
    body = struct.pack("!I4x6s2xIII4x", port_no, mac, 0 if up else PORT_DOWN, PORT_DOWN, 0)
    return header(PORT_MOD, 8 + len(body), xid) + body


def request(port_no: int, hw_addr: str, up: bool) -> bytes:
    """What one bridge is sent: hello, the port-mod, a barrier."""
    return header(HELLO, 8, 0) + port_mod(port_no, hw_addr, up, 1) + header(BARRIER_REQUEST, 8, 2)


def replies(data: bytes) -> Tuple[List[Tuple[int, bytes]], bytes]:
    """The whole messages at the head of `data` as (type, message), and the rest."""
    out = []
    while len(data) >= 8:
        _version, kind, length, _xid = struct.unpack("!BBHI", data[:8])
        if length < 8 or len(data) < length:
            break
        out.append((kind, data[:length]))
        data = data[length:]
    return out, data


def hw_addr(intf: str) -> str:
    """An interface's MAC address, in this process's network namespace
    (SIOCGIFHWADDR; /sys/class/net is the namespace's that mounted /sys)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        raw = fcntl.ioctl(s.fileno(), 0x8927, struct.pack("256s", intf.encode()[:15]))
    return ":".join(f"{b:02x}" for b in raw[18:24])


def management_socket(bridge: str) -> str:
    rundir = os.environ.get("OVS_RUNDIR", "/var/run/openvswitch")
    return os.path.join(rundir, f"{bridge}.mgmt")


def set_ports(ports: List[Tuple[str, int, str]], up: bool) -> List[Optional[str]]:
    """Take each (bridge, OpenFlow port number, hw_addr) down or up, all at
    once; per port, None when its bridge applied it, else why not."""
    socks, results = [], [None] * len(ports)
    try:
        for k, (bridge, port_no, hw_addr) in enumerate(ports):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            socks.append(s)
            try:
                s.connect(management_socket(bridge))
                s.sendall(request(port_no, hw_addr, up))
            except OSError as exc:
                results[k] = f"{bridge}: {exc}"
        _await_barriers(socks, results)
    finally:
        for s in socks:
            s.close()
    return results


def _await_barriers(socks: list, results: list) -> None:
    """Read every bridge's replies until its barrier's (an error first is
    its failure), at most TIMEOUT_S in all."""
    waiting = {s: k for k, s in enumerate(socks) if results[k] is None}
    buffers = {s: b"" for s in waiting}
    deadline = time.monotonic() + TIMEOUT_S
    while waiting:
        ready, _, _ = select.select(list(waiting), [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            for s, k in waiting.items():
                results[k] = "no barrier reply"
            return
        for s in ready:
            k = waiting[s]
            chunk = s.recv(65536)
            msgs, buffers[s] = replies(buffers[s] + chunk)
            kinds = [kind for kind, _ in msgs]
            if ERROR in kinds:
                results[k] = f"OpenFlow error {msgs[kinds.index(ERROR)][1][8:12].hex()}"
            elif not chunk:
                results[k] = "connection closed"
            if results[k] is not None or BARRIER_REPLY in kinds:
                del waiting[s]
