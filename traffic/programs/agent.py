"""A rank agent: one GPU endpoint's side of a collective, over real sockets.

Runs inside a server's namespace, one process per rank:

    python -m traffic.programs.agent --rank R --addresses IP0,IP1,... [--port 7000]

The lab drives it with JSON lines on stdin and reads JSON lines on stdout:

    {"cmd": "setup", "collective", "algorithm", "count", "root", "piece", "channels"}
        -> {"event": "setup_done", "connections": K}
    {"cmd": "go", "iter": i}
        -> {"event": "done", "iter", "t0", "t1", "wrong", "bad_chunk_elements", "bytes_received"}
    {"cmd": "quit"} (or end of input)

A rank sends to each peer on `channels` TCP connections of its own (NCCL
channels / RoCE queue pairs: the flows ECMP can tell apart); the k-th message
to a peer travels on connection k mod channels. As NCCL's network transport,
a connection carries data one way: the sender connects, the receiver
accepts, so what flows back is only ACKs, which the shaped links serve first
(lab/shaping.py); a connection carrying data both ways would put its ACKs
inside data segments, behind data. Times are CLOCK_MONOTONIC, which all
namespaces share, so the lab can compare them across ranks.
"""

from __future__ import annotations

import argparse
import queue
import socket
import struct
import sys
import threading
import time

import numpy as np

from traffic import schedules as S
from traffic.executor import RankExecutor
from traffic.programs.jsonlines import serve

HEADER = struct.Struct("!IIII")          # iteration, sequence number, elements, sender rank
HELLO = struct.Struct("!II")             # rank, channel
# peers connect once they have built their schedules: on a slow host with 256
# ranks that is minutes; the lab's own wait for setup_done fails first if stuck
CONNECT_WAIT_S = 600
# CUBIC, Linux's own default, whatever the host's (this CI host's is BBR):
# before the windows were bounded, it left the lab closer to the simulator's
# fair share than BBR, whose probing dropped packets where two flows met at a
# shaped 32-packet queue; with windows bounded it seldom decides
# (docs/simulator.md, "The lab's TCP")
CONGESTION_CONTROL = b"cubic"


def recv_exact(sock: socket.socket, n: int) -> memoryview:
    buf = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = sock.recv_into(buf[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k
    return buf


def _tcp(sock: socket.socket, window: int = 0) -> socket.socket:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if window:
        # The receive buffer bounds the window: the kernel doubles the value
        # for its bookkeeping and offers about half to two thirds of it, so
        # the window comes out near `window`; a buffer of our own also stops
        # autotuning from growing it. TCP_WINDOW_CLAMP alone, set after the
        # connection is made, did not bound the window on this kernel (6.18).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, window)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, CONGESTION_CONTROL)
    except OSError:
        pass                            # not built into this kernel: its default, then
    return sock


class Sender:
    """The sending end of one connection: a thread that sends queued frames.
    A failed send tells the rank's inbox (None), as a closed receiver does."""

    def __init__(self, sock: socket.socket, inbox: queue.Queue):
        self.sock, self.outbox = _tcp(sock), queue.Queue()
        threading.Thread(target=self._send_loop, args=(inbox,), daemon=True).start()

    def send(self, header: bytes, data: np.ndarray) -> None:
        self.outbox.put((header, data))

    def _send_loop(self, inbox):
        try:
            while True:
                item = self.outbox.get()
                if item is None:
                    return
                # header and payload in one system call, with no copy of the payload
                parts = [memoryview(item[0]), memoryview(item[1]).cast("B")]
                while parts:
                    sent = self.sock.sendmsg(parts)
                    while parts and sent >= len(parts[0]):
                        sent -= len(parts[0])
                        parts.pop(0)
                    if parts:
                        parts[0] = parts[0][sent:]
        except OSError:
            inbox.put(None)


def receive(sock: socket.socket, inbox: queue.Queue, window: int) -> None:
    """The receiving end of one connection: a thread that reads frames into the inbox."""
    def loop():
        try:
            while True:
                it, seq, nelem, src = HEADER.unpack(recv_exact(sock, HEADER.size))
                data = np.frombuffer(recv_exact(sock, nelem * 4), dtype=np.float32)
                inbox.put((it, src, seq, data))
        except (ConnectionError, OSError):
            inbox.put(None)
    _tcp(sock, window)
    threading.Thread(target=loop, daemon=True).start()


class Agent:
    def __init__(self, rank: int, addresses, port: int, nvlink=(), servers=(), windows=(0, 0)):
        self.rank, self.port = rank, port
        # the window a peer may use: its NIC's, or NVLink's when it shares this server
        self.window_of = [windows[1] if servers and servers[p] == servers[rank] else windows[0]
                          for p in range(len(addresses))]
        # a peer in the same server is reached over NVLink, as NCCL would
        self.addresses = [nv if nv and servers and servers[p] == servers[rank] else ip
                          for p, (ip, nv) in enumerate(zip(addresses, nvlink or
                                                           [""] * len(addresses)))]
        self.n = len(addresses)
        self.inbox: queue.Queue = queue.Queue()
        self.conns = {}                          # (peer, channel) -> Sender, to that peer
        self.incoming = set()                    # (peer, channel) that connected to this rank
        self.arrivals = threading.Condition()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("0.0.0.0", port))
        self.listener.listen(256)
        threading.Thread(target=self._accept_loop, daemon=True).start()
        self.executor = None
        self.channels = 1

    def _accept_loop(self):
        while True:
            sock, _ = self.listener.accept()
            try:
                peer, channel = HELLO.unpack(recv_exact(sock, HELLO.size))
            except (ConnectionError, OSError, struct.error):
                peer = -1
            if not 0 <= peer < self.n:
                sock.close()                     # not one of ours: keep accepting
                continue
            with self.arrivals:
                receive(sock, self.inbox, self.window_of[peer])
                self.incoming.add((peer, channel))
                self.arrivals.notify_all()

    def setup(self, collective, algorithm, count, root, piece, channels, local=1):
        sched = S.build(collective, algorithm, self.n, count, root, piece, local)
        ops = sched[self.rank]
        self.executor = RankExecutor(self.rank, self.n, ops, collective, count, root)
        self.channels = channels
        to = sorted({op.peer for op in ops if op.kind == "send"})
        frm = sorted({op.peer for op in ops if op.kind == "recv"})
        for peer in to:
            for ch in range(channels):
                if (peer, ch) not in self.conns:
                    self.conns[(peer, ch)] = Sender(self._connect(peer, ch), self.inbox)
        deadline = time.monotonic() + CONNECT_WAIT_S
        with self.arrivals:
            while not all((p, c) in self.incoming for p in frm for c in range(channels)):
                if not self.arrivals.wait(timeout=max(0.0, deadline - time.monotonic())):
                    missing = sorted({p for p in frm for c in range(channels)
                                      if (p, c) not in self.incoming})
                    raise ConnectionError(f"ranks {missing} did not connect within "
                                          f"{CONNECT_WAIT_S} s")
        return (len(to) + len(frm)) * channels

    def _connect(self, peer, channel):
        deadline = time.monotonic() + CONNECT_WAIT_S
        while True:
            try:
                sock = socket.create_connection((self.addresses[peer], self.port), timeout=5)
                sock.settimeout(None)
                sock.sendall(HELLO.pack(self.rank, channel))
                return sock
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def run(self, iteration: int, start_at: float = 0.0, timeline: bool = False) -> dict:
        ex = self.executor
        ex.reset()
        header, ch = HEADER.pack, self.channels

        def send(peer, seq, data):
            self.conns[(peer, seq % ch)].send(header(iteration, seq, data.shape[0], self.rank), data)

        while time.monotonic() < start_at:        # the common start the lab chose
            time.sleep(max(0.0, min(0.001, start_at - time.monotonic())))
        t0 = time.monotonic()
        ex.run(send)
        while not ex.finished:
            item = self.inbox.get()
            if item is None:
                raise ConnectionError("a peer closed its connection mid-collective")
            it, src, seq, data = item
            if it != iteration:
                raise RuntimeError(f"a message of iteration {it} arrived during {iteration}")
            ex.deliver(src, seq, data)
            ex.run(send)
        t1 = time.monotonic()
        out = {"event": "done", "iter": iteration, "t0": t0, "t1": t1, "wrong": ex.wrong(),
               "bad_chunk_elements": ex.bad_chunk_elements, "bytes_received": ex.received_bytes}
        if timeline:
            out["timeline"] = ex.timeline(start_at or t0)
        return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m traffic.programs.agent", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--addresses", required=True, help="IP of every rank, in rank order")
    p.add_argument("--port", type=int, default=7000)
    p.add_argument("--nvlink", default="", help="NVLink address of every rank ('' for none)")
    p.add_argument("--servers", default="", help="the server of every rank")
    p.add_argument("--windows", default="0,0",
                   help="bytes a peer across the network, and one in the same server, may "
                        "have unacknowledged on a connection to this rank (the receive "
                        "buffer and TCP_WINDOW_CLAMP; 0: the kernel's autotuning)")
    a = p.parse_args(argv)
    split = lambda v: v.split(",") if v else []             # noqa: E731
    return serve(a.rank, lambda: Agent(a.rank, a.addresses.split(","), a.port,
                                       split(a.nvlink), split(a.servers),
                                       tuple(int(w) for w in a.windows.split(","))), {
        "setup": lambda agent, m: {"event": "setup_done", "connections": agent.setup(
            m["collective"], m["algorithm"], m["count"], m["root"], m["piece"], m["channels"],
            m.get("local", 1))},
        "go": lambda agent, m: agent.run(m["iter"], m.get("at", 0.0), m.get("timeline", False)),
    })

if __name__ == "__main__":
    sys.exit(main())
