"""Flow generators with chosen source ports, run inside a server's namespace.

ECMP decides a flow's path from its 5-tuple, so tests that check spreading
need flows whose ports they choose: iperf3 picks ephemeral source ports.

    python -m programs.flows udp  --dst IP --dport P --sports 40000:40015 --packets N
    python -m programs.flows tcp  --dst IP --dport P --sports 40000:40015 --bytes N
    python -m programs.flows sink --port P --connections K
    python -m programs.flows stream --dst IP --dport P --seconds S \
        [--policy spray|flowlet --entropy K --gap-ms G]

`stream` sends 64 KiB pieces for S seconds over one connection, or under
flowlet and spray over K, each piece where the agents' Spreader puts it
(programs/spread.py): what the policy benchmark compares.

Each prints one JSON line with what it did.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time


def port_range(text: str):
    lo, _, hi = text.partition(":")
    return list(range(int(lo), int(hi or lo) + 1))


def send_udp(dst: str, dport: int, sports, packets: int, size: int, pps: float) -> dict:
    socks = []
    for sport in sports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", sport))
        socks.append(s)
    payload = b"\x00" * size
    # a round's packets spread evenly over the round, not in one burst that
    # a short queue would drop whatever the average rate
    gap = 1.0 / pps / len(socks) if pps else 0.0
    sent, start = 0, time.monotonic()
    for i in range(packets):
        for k, s in enumerate(socks):
            try:
                s.sendto(payload, (dst, dport))
                sent += 1
            except OSError:        # an ICMP port-unreachable reported back: harmless
                pass
            if gap:
                delay = start + (i * len(socks) + k + 1) * gap - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
    return {"proto": "udp", "flows": len(socks), "packets_sent": sent,
            "seconds": round(time.monotonic() - start, 3)}


def send_tcp(dst: str, dport: int, sports, nbytes: int) -> dict:
    socks = []
    for sport in sports:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("0.0.0.0", sport))
        s.connect((dst, dport))
        s.setblocking(False)
        socks.append(s)
    sel = selectors.DefaultSelector()
    left = {}
    for s in socks:
        sel.register(s, selectors.EVENT_WRITE)
        left[s] = nbytes
    chunk = memoryview(b"\x00" * 65536)
    start = time.monotonic()
    while left:
        for key, _ in sel.select(timeout=10):
            s = key.fileobj
            n = s.send(chunk[:min(len(chunk), left[s])])
            left[s] -= n
            if left[s] == 0:
                sel.unregister(s)
                s.close()
                del left[s]
    return {"proto": "tcp", "flows": len(socks), "bytes_per_flow": nbytes,
            "seconds": round(time.monotonic() - start, 3)}


class _Loop:
    """What a Spreader and the agents' Conn need of an event loop."""
    def __init__(self):
        self.sel, self.backlog = selectors.DefaultSelector(), set()


def stream(dst: str, dport: int, seconds: float, policy: str, entropy: int,
           gap_ms: float) -> dict:
    import numpy as np
    from programs.agent import Conn
    from policies import policy as policy_of
    from programs.spread import Spreader
    loop = _Loop()
    k = policy_of(policy).connections_per_peer(1, entropy)
    conns = []
    for _ in range(k):
        sock = socket.create_connection((dst, dport), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conns.append(Conn(loop, sock, None, 0))
    spreader = Spreader(loop, policy if k > 1 else "spray", conns, gap_ms / 1e3, time.monotonic)
    piece = np.zeros(16384, dtype=np.float32)
    handed, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        if len(spreader.pending) < 2:
            spreader.push(b"", piece)
            handed += piece.nbytes
            continue
        for key, _ in loop.sel.select(timeout=0.5):
            key.data()
    for c in conns:
        c.sock.setblocking(True)
        while c.parts:                        # what is left, then close: the sink ends
            c.sock.sendall(c.parts.popleft())
        c.sock.close()
    return {"proto": "tcp", "connections": k, "policy": policy, "bytes_handed": handed,
            "seconds": round(time.monotonic() - start, 3)}


def sink(port: int, connections: int, timeout: float) -> dict:
    """Accept `connections` TCP connections and read each to its end."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(connections)
    print(json.dumps({"listening": port}), flush=True)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ)
    received, accepted, open_ = {}, 0, 0
    deadline = time.monotonic() + timeout
    while (accepted < connections or open_) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            if key.fileobj is srv:
                conn, (_, peer_port) = srv.accept()
                sel.register(conn, selectors.EVENT_READ, peer_port)
                received[peer_port] = 0
                accepted += 1
                open_ += 1
                continue
            data = key.fileobj.recv(1 << 16)
            if data:
                received[key.data] += len(data)
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                open_ -= 1
    return {"proto": "tcp", "received": {str(k): v for k, v in sorted(received.items())}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m programs.flows", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("udp")
    t = sub.add_parser("tcp")
    for q in (u, t):
        q.add_argument("--dst", required=True)
        q.add_argument("--dport", type=int, default=5001)
        q.add_argument("--sports", type=port_range, default=port_range("40000:40015"))
    u.add_argument("--packets", type=int, default=100, help="packets per flow")
    u.add_argument("--size", type=int, default=1000, help="UDP payload bytes")
    u.add_argument("--pps", type=float, default=0,
                   help="rounds per second, a packet per flow each, spread over the round "
                        "(0: as fast as possible)")
    t.add_argument("--bytes", type=int, default=1 << 20, help="bytes per flow")
    st = sub.add_parser("stream")
    st.add_argument("--dst", required=True)
    st.add_argument("--dport", type=int, default=5001)
    st.add_argument("--seconds", type=float, default=10)
    st.add_argument("--policy", default="ecmp")
    st.add_argument("--entropy", type=int, default=16)
    st.add_argument("--gap-ms", type=float, default=1)
    k = sub.add_parser("sink")
    k.add_argument("--port", type=int, default=5001)
    k.add_argument("--connections", type=int, default=16)
    k.add_argument("--timeout", type=float, default=60)
    a = p.parse_args(argv)
    if a.cmd == "udp":
        out = send_udp(a.dst, a.dport, a.sports, a.packets, a.size, a.pps)
    elif a.cmd == "tcp":
        out = send_tcp(a.dst, a.dport, a.sports, a.bytes)
    elif a.cmd == "stream":
        out = stream(a.dst, a.dport, a.seconds, a.policy, a.entropy, a.gap_ms)
    else:
        out = sink(a.port, a.connections, a.timeout)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
