"""Rank agents: the ranks of one server, each a GPU endpoint's side of a
collective over real sockets, driven by one process.

    python -m programs.agent --ranks R,R,... --netns PATH,PATH,... \\
        --addresses IP0,IP1,... [--port 7000]

Each rank's sockets are made inside its endpoint's network namespace
(`--netns`, /proc/PID/ns/net of the endpoint's Mininet host; programs/
netns.py), so its packets leave by that endpoint's NIC as if the rank ran
there; one event loop moves every hosted rank's data. One process per rank
cost 30 MB, three threads, an import and a whole schedule per rank: 256 of
them held a 2-core host at 92% (docs/limits.md).

The lab drives the process with JSON lines on stdin and reads JSON lines on
stdout, one reply per hosted rank:

    {"event": "ready", "rank"}   once listening
    {"cmd": "setup", "collective", "algorithm", "count", "root", "piece", "channels",
     "local", "scale_up_bps", "spread", "gap_s", "dtype", "op"}
        -> {"event": "setup_done", "rank", "connections": K}
    {"cmd": "go", "iter": i, "at": t}
        -> {"event": "done", "rank", "iter", "t0", "t1", "wrong", "bad_chunk_elements",
            "bytes_received", "scale_up_bytes", "pieces", "reordered", "unsettled"}
    {"cmd": "quit"} (or end of input)

A rank sends to each peer on `channels` TCP connections of its own (NCCL
channels / RoCE queue pairs: the flows ECMP can tell apart); the k-th message
to a peer travels on connection k mod channels, or, under the flowlet and
spray policies (`spread`), on the one a Spreader picks (programs/
spread.py). A receiver counts the pieces that reached its host after a
later piece of the same sender (`reordered`), by the kernel's arrival times;
a sender, its spreaders' moves to another connection while the one left
still had bytes unacknowledged (`unsettled`: a flowlet never makes one). As NCCL's network transport,
a connection carries data one way: the sender connects, the receiver
accepts, so what flows back is only ACKs, which the shaped links serve first
(lab/shaping.py). Times are CLOCK_MONOTONIC, which all namespaces share, so
the lab can compare them across ranks and processes.

Scale-up in memory (`scale_up_bps` > 0, the experiment's `scale_up: memory`):
a peer in the same server gets its messages handed over in this process, as
NCCL moves them over NVLink by peer-to-peer copies rather than the network,
each paced as a non-blocking NVSwitch would carry it (`ScaleUp`). Otherwise
they travel as TCP over the server's NVLink-class links, packets through its
emulated switch.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import resource
import selectors
import socket
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from collectives import schedules
from collectives.datatypes import Data
from collectives.executor import RankExecutor
from programs import netns, stepper
from programs.jsonlines import serve
from programs.spread import Spreader

HEADER = struct.Struct("!IIIII")   # iteration, tag (a step's collective), sequence, elements, sender
HELLO = struct.Struct("!II")             # rank, channel
# peers connect once every process listens; the lab's own wait for
# setup_done fails first if one is stuck
CONNECT_WAIT_S = 600
BACKLOG = 1024
READS_PER_TURN = 8      # reads of one connection before the event loop serves the others
# A connection's source port: `--source-ports BASE` + its place among every
# (rank, peer, channel), below Linux's ephemeral range (32768 up), so the
# same connection leaves from the same port in every experiment of a lab
# and ECMP hashes it onto the same path, as nccl-tests' in-place columns
# reuse the out-of-place columns' connections. Closed with RST (linger 0),
# they leave no TIME_WAIT to stop the next experiment's connection.
SOURCE_PORTS_END = 32000
CHANNELS_MAX = 16
NO_LINGER = struct.pack("ii", 1, 0)
# when a read's bytes reached this host: SO_TIMESTAMPNS (Python names it not;
# 35 in asm-generic/socket.h where time_t is 64-bit: x86-64, arm64), a timespec
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESTAMP_SPACE = socket.CMSG_SPACE(struct.calcsize("qq"))
# CUBIC, Linux's own default, whatever the host's (this CI host's is BBR):
# before the windows were bounded, it left the lab closer to the simulator's
# fair share than BBR, whose probing dropped packets where two flows met at a
# shaped 32-packet queue; with windows bounded it seldom decides
# (docs/simulator.md, "The lab's TCP")
CONGESTION_CONTROL = b"cubic"


def landed(ancillary, before: float) -> float:
    """The arrival time (CLOCK_REALTIME) in a read's SO_TIMESTAMPNS message:
    for TCP, that of the last segment the read took; `before` if none came."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", data[:struct.calcsize("qq")])
            return sec + nsec * 1e-9
    return before


def overtaken(landings) -> int:
    """Of (arrival time, sequence number) pairs, the pieces that arrived
    after one with a higher number (equal times: in number order)."""
    count, highest = 0, -1
    for _, seq in sorted(landings):
        if seq < highest:
            count += 1
        else:
            highest = seq
    return count


def tune(sock: socket.socket, window: int = 0) -> socket.socket:
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


class Conn:
    """One end of one connection, non-blocking: a sender's queue of frames, or
    a receiver's reassembly of them (after the sender's HELLO)."""

    def __init__(self, loop: "Agents", sock: socket.socket, rank: "Rank", peer: int = -1):
        sock.setblocking(False)
        self.loop, self.sock, self.rank, self.peer = loop, sock, rank, peer
        self.parts: deque = deque()            # sending: what is still to go
        self.writing = False
        self.spreader = None                   # flowlet, spray: who hands it pieces
        self.head = memoryview(bytearray(HELLO.size if peer < 0 else HEADER.size))
        self.body, self.data, self.got, self.meta = None, None, 0, None
        self.landed = 0.0                      # when the last bytes read reached this host

    # --- sending ---------------------------------------------------------------

    def send(self, header: bytes, data: np.ndarray) -> None:
        self.parts.append(memoryview(header))
        self.parts.append(memoryview(data).cast("B"))
        if not self.writing:
            self.flush()

    def flush(self) -> None:
        """Send what the socket takes now; wait for it to be writable for the rest."""
        while self.parts:
            try:
                sent = self.sock.sendmsg(list(self.parts)[:64])
            except BlockingIOError:
                break
            while self.parts and sent >= len(self.parts[0]):
                sent -= len(self.parts.popleft())
            if sent:
                self.parts[0] = self.parts[0][sent:]
        was_writing = self.writing
        if self.parts and not self.writing:
            self.loop.sel.register(self.sock, selectors.EVENT_WRITE, self.flush)
            self.loop.backlog.add(self)
        elif not self.parts and self.writing:
            self.loop.sel.unregister(self.sock)
            self.loop.backlog.discard(self)
        self.writing = bool(self.parts)
        if was_writing and not self.writing and self.spreader is not None:
            self.spreader.pump()                # free for another piece

    # --- receiving -------------------------------------------------------------

    def readable(self) -> None:
        """Read what has arrived, a few reads at a time (the selector comes
        back while more waits: no connection starves the others); hand each
        whole frame to the rank."""
        for _ in range(READS_PER_TURN):
            buf = self.head if self.body is None else self.body
            try:
                k, ancillary, _, _ = self.sock.recvmsg_into([buf[self.got:]], TIMESTAMP_SPACE)
            except BlockingIOError:
                return
            self.landed = landed(ancillary, self.landed)
            if k == 0:
                raise ConnectionError(f"rank {self.peer} closed its connection to rank "
                                      f"{self.rank.rank}")
            self.got += k
            if self.got == len(buf):
                self.got = 0
                self._whole()

    def _whole(self) -> None:
        if self.peer < 0:                                   # the HELLO
            peer, channel = HELLO.unpack(self.head)
            self.rank.accepted(self, peer, channel)
            self.head = memoryview(bytearray(HEADER.size))
        elif self.body is None:
            it, tag, seq, nelem, src = HEADER.unpack(self.head)
            self.data = np.empty(nelem, dtype=self.loop.storage)  # not zeroed: filled next
            self.meta, self.body = (it, tag, seq, src), memoryview(self.data).cast("B")
            if nelem == 0:
                self._whole()
        else:
            (it, tag, seq, src), data = self.meta, self.data
            self.body = self.data = None
            self.rank.arrived(it, src, seq, data, tag, self.landed)


class Rank:
    """One hosted rank: its listener, connections and executor."""

    def __init__(self, loop: "Agents", rank: int, ns: str):
        self.loop, self.rank, self.ns = loop, rank, ns
        # a listener on each of the rank's own addresses (its NIC's, its
        # NVLink's): ranks sharing a namespace (tests) do not collide
        for address in {loop.ips[rank], loop.nvlink[rank] if loop.nvlink else ""} - {""}:
            with netns.inside(ns):
                listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((address, loop.port))
            listener.listen(BACKLOG)
            listener.setblocking(False)
            loop.sel.register(listener, selectors.EVENT_READ,
                              lambda listener=listener: self.accept(listener))
        self.senders = {}                        # (peer, channel) -> Conn, to that peer
        self.spreaders = {}                      # peer -> Spreader (flowlet, spray)
        self.landings, self.pieces = {}, 0       # (sender, tag) -> [(landed, seq)]; all
        self.incoming = set()                    # (peer, channel) that connected to it
        self.executor, self.iteration, self.t0, self.t1 = None, -1, 0.0, None
        self.scale_up_bytes = 0
        self.step = None                         # a training step's state (stepper.py)

    def accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                return
            conn = Conn(self.loop, sock, self)
            self.loop.sel.register(sock, selectors.EVENT_READ, conn.readable)

    def accepted(self, conn: Conn, peer: int, channel: int) -> None:
        if not 0 <= peer < self.loop.n:           # not one of ours
            self.loop.sel.unregister(conn.sock)
            conn.sock.close()
            return
        conn.peer = peer
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, NO_LINGER)
        tune(conn.sock, self.loop.window_of(self.rank, peer))
        conn.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.incoming.add((peer, channel))

    def connect(self, peer: int, channel: int) -> None:
        deadline = time.monotonic() + CONNECT_WAIT_S
        source = self.loop.source(self.rank, peer, channel)
        while True:
            try:
                with netns.inside(self.ns):
                    sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, NO_LINGER)
                if source:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(source)
                sock.settimeout(5)
                sock.connect((self.loop.address(self.rank, peer), self.loop.port))
                sock.sendall(HELLO.pack(self.rank, channel))
                break
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise
                # the port taken (another rank of this namespace drew it):
                # the kernel's choice, then
                source = None
                time.sleep(0.05)
        self.senders[(peer, channel)] = Conn(self.loop, tune(sock), self, peer)

    def send(self, peer: int, seq: int, data: np.ndarray, tag: int = 0) -> None:
        local = self.loop.in_memory(self.rank, peer)
        if local is not None:
            self.loop.scale_up.send(self.rank, local, (self.iteration, tag), seq, data)
            return
        header = HEADER.pack(self.iteration, tag, seq, data.shape[0], self.rank)
        spreader = self.spreaders.get(peer)
        if spreader is not None:
            spreader.push(header, data)
        else:
            self.senders[(peer, seq % self.loop.channels)].send(header, data)

    def start(self) -> None:
        self.t0, self.t1, self.scale_up_bytes = time.monotonic(), None, 0
        self.landings, self.pieces = {}, 0
        for spreader in self.spreaders.values():
            spreader.switches = spreader.unsettled = 0
        self.executor.run(self.send)
        self._check_finished()

    @property
    def reordered(self) -> int:
        """Pieces that reached this host after a later piece of the same
        sender and collective: by the kernel's arrival times, not by when the
        selector woke this process, so a busy host reading its connections
        late and in another order does not count as the network reordering."""
        return sum(overtaken(landings) for landings in self.landings.values())

    def arrived(self, it: int, src: int, seq: int, data: np.ndarray, tag: int = 0,
                landed: float = 0.0) -> None:
        if it != self.iteration:
            raise RuntimeError(f"rank {self.rank}: a message of iteration {it} arrived "
                               f"during {self.iteration}")
        self.pieces += 1
        self.landings.setdefault((src, tag), []).append((landed or time.time(), seq))
        if self.step is not None:
            self.step.arrived(tag, src, seq, data)
            return
        self.executor.deliver(src, seq, data)
        self.executor.run(self.send)
        self._check_finished()

    def _check_finished(self) -> None:
        if self.t1 is None and self.executor.finished:
            self.t1 = time.monotonic()


class ScaleUp:
    """NVLink in memory: each message between two GPUs of the server takes
    its bytes' time at `bps` on the sender's port and the receiver's port of
    a non-blocking switch, one message after another on each port (a ring or
    a tree inside a server keeps one transfer per port), and is delivered
    when it is through."""

    def __init__(self, bps: float):
        self.bps = bps
        self.due: list = []                       # (time, tiebreak, rank, message)
        self.order = itertools.count()
        self.reset()

    def reset(self) -> None:
        self.egress, self.ingress = {}, {}        # rank -> when its port is next free

    def send(self, src: int, dst: "Rank", it: tuple, seq: int, data: np.ndarray) -> None:
        """`it`: (iteration, tag)."""
        start = max(time.monotonic(), self.egress.get(src, 0.0), self.ingress.get(dst.rank, 0.0))
        end = self.egress[src] = self.ingress[dst.rank] = start + data.nbytes * 8 / self.bps
        heapq.heappush(self.due, (end, next(self.order), dst, (it, src, seq, data)))

    def wait(self, timeout):
        """How long the event loop may sleep before the next delivery is due."""
        if not self.due:
            return timeout
        left = max(0.0, self.due[0][0] - time.monotonic())
        return left if timeout is None else min(timeout, left)

    def deliver(self) -> None:
        now = time.monotonic()
        while self.due and self.due[0][0] <= now:
            _, _, dst, ((it, tag), src, seq, data) = heapq.heappop(self.due)
            dst.scale_up_bytes += data.nbytes
            dst.arrived(it, src, seq, data, tag)


@dataclass(frozen=True)
class Transport:
    """How the hosted ranks move a collective's data, as a setup message says
    it (a sweep's "setup" and a training step's "step_setup" alike): the
    data's type and reduction, `channels` connections per peer, the GPUs
    per server (`local`: the hierarchical algorithm's node size), NVLink in
    memory at `scale_up_bps` (0: as packets), and the policy that spreads a
    peer's pieces over its connections (`spread`, "" for none; flowlets end
    after `gap_s`)."""
    channels: int = 1
    local: int = 1
    scale_up_bps: float = 0.0
    spread: str = ""
    gap_s: float = 0.0
    dtype: str = "float"
    op: str = "sum"

    @classmethod
    def of(cls, message: dict) -> "Transport":
        """The transport a setup message names; what it leaves out, the defaults."""
        return cls(message["channels"], message.get("local", 1),
                   message.get("scale_up_bps", 0.0), message.get("spread", ""),
                   message.get("gap_s", 0.0), message.get("dtype", "float"),
                   message.get("op", "sum"))


class Agents:
    def __init__(self, ranks, namespaces, addresses, port: int, nvlink=(), servers=(),
                 windows=(0, 0), source_ports: int = 0):
        self.port, self.n, self.source_ports = port, len(addresses), source_ports
        self.ips, self.nvlink, self.servers, self.windows = addresses, nvlink, servers, windows
        self.sel = selectors.DefaultSelector()
        self.channels, self.scale_up = 1, None
        self.storage = np.float32                # the data type's, once set up
        self.backlog = set()                     # connections with data still to send
        self.timers: list = []                   # (when, tiebreak, callback): compute time
        self.order = itertools.count()
        self.ranks = [Rank(self, r, ns) for r, ns in zip(ranks, namespaces)]
        self.hosted = {r.rank: r for r in self.ranks}

    def in_memory(self, rank: int, peer: int):
        """The hosted rank `peer`, when messages from `rank` go to it in memory."""
        if self.scale_up is None or rank not in self.hosted or not self.same_server(rank, peer):
            return None
        return self.hosted.get(peer)

    def same_server(self, a: int, b: int) -> bool:
        return bool(self.servers) and self.servers[a] == self.servers[b]

    def window_of(self, rank: int, peer: int) -> int:
        """The window a peer may use: its NIC's, or NVLink's when it shares the server."""
        return self.windows[1] if self.same_server(rank, peer) else self.windows[0]

    def address(self, rank: int, peer: int) -> str:
        """A peer in the same server is reached over NVLink, as NCCL would."""
        nv = self.nvlink[peer] if self.nvlink else ""
        return nv if nv and self.same_server(rank, peer) else self.ips[peer]

    def source(self, rank: int, peer: int, channel: int):
        """(address, port) a connection from `rank` to `peer` leaves from, the
        same in every experiment of the lab; None for the kernel's choice."""
        if not self.source_ports:
            return None
        place = (rank * self.n + peer) * CHANNELS_MAX + channel
        port = self.source_ports + place % (SOURCE_PORTS_END - self.source_ports)
        return self.address(peer, rank), port

    def at(self, when: float, callback) -> None:
        """Call `callback` once the monotonic clock reaches `when`."""
        heapq.heappush(self.timers, (when, next(self.order), callback))

    def poll(self, timeout=None) -> None:
        if self.scale_up is not None:
            timeout = self.scale_up.wait(timeout)
        if self.timers:
            left = max(0.0, self.timers[0][0] - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        for key, _ in self.sel.select(timeout):
            key.data()
        if self.scale_up is not None:
            self.scale_up.deliver()
        while self.timers and self.timers[0][0] <= time.monotonic():
            heapq.heappop(self.timers)[2]()

    def setup(self, collective, algorithm, count, root, piece, transport: Transport) -> list:
        """Every hosted rank's schedule and executor for one collective, split
        into pieces of `piece` elements, and the connections it needs."""
        sched = schedules.build(collective, algorithm, self.n, count,
                                schedules.RankLayout(root, piece, transport.local))
        data = self.prepare(transport)
        for r in self.ranks:
            r.step = None
            r.executor = RankExecutor(r.rank, self.n, sched[r.rank], collective, count, root,
                                      data)
        return self.wire({r.rank: sched[r.rank] for r in self.ranks}, transport)

    def prepare(self, transport: Transport) -> Data:
        data = Data(transport.dtype, transport.op, self.n)
        self.channels, self.storage = transport.channels, data.storage
        self.scale_up = ScaleUp(transport.scale_up_bps) if transport.scale_up_bps else None
        return data

    def wire(self, ops_of: dict, transport: Transport) -> list:
        """Connect each hosted rank to the peers its operations (`ops_of`:
        rank -> ops) send to, and wait for those that send to it."""
        channels, spread = transport.channels, transport.spread
        wanted = {}
        for r in self.ranks:
            ops = ops_of[r.rank]
            # sockets for the peers not reached in memory
            to = sorted({op.peer for op in ops if op.kind == "send"
                         and self.in_memory(r.rank, op.peer) is None})
            frm = sorted({op.peer for op in ops if op.kind == "recv"
                          and self.in_memory(op.peer, r.rank) is None})
            wanted[r.rank] = {(p, c) for p in frm for c in range(channels)}
            for peer in to:
                for ch in range(channels):
                    if (peer, ch) not in r.senders:
                        r.connect(peer, ch)
            r.connections = (len(to) + len(frm)) * channels
            r.spreaders = {peer: Spreader(self, spread, [r.senders[(peer, ch)]
                                                         for ch in range(channels)],
                                          transport.gap_s, time.monotonic,
                                          seed=r.rank * self.n + peer)
                           for peer in to} if spread else {}
        deadline = time.monotonic() + CONNECT_WAIT_S
        while not all(wanted[r.rank] <= r.incoming for r in self.ranks):
            if time.monotonic() > deadline:
                missing = sorted({p for r in self.ranks for p, _ in wanted[r.rank] - r.incoming})
                raise ConnectionError(f"ranks {missing} did not connect within "
                                      f"{CONNECT_WAIT_S} s")
            self.poll(1.0)
        return [{"event": "setup_done", "rank": r.rank, "connections": r.connections}
                for r in self.ranks]

    def run(self, iteration: int, start_at: float = 0.0, timeline: bool = False) -> list:
        for r in self.ranks:
            r.executor.reset()
            r.iteration = iteration
        if self.scale_up is not None:
            self.scale_up.reset()
        # the common start the lab chose; what arrives early waits in the sockets
        time.sleep(max(0.0, start_at - time.monotonic()))
        for r in self.ranks:
            r.start()
        # until every hosted rank is done and has handed all it sent to TCP:
        # a rank's last sends may still wait for its peer's window
        while any(r.t1 is None for r in self.ranks) or self.backlog:
            self.poll()
        out = []
        for r in self.ranks:
            ex = r.executor
            reply = {"event": "done", "rank": r.rank, "iter": iteration, "t0": r.t0,
                     "t1": r.t1, "wrong": ex.wrong(), "bad_chunk_elements": ex.bad_chunk_elements,
                     "bytes_received": ex.received_bytes, "scale_up_bytes": r.scale_up_bytes,
                     "pieces": r.pieces, "reordered": r.reordered,
                     "unsettled": sum(s.unsettled for s in r.spreaders.values())}
            if timeline:
                reply["timeline"] = ex.timeline(start_at or r.t0)
            out.append(reply)
        return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m programs.agent", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", required=True, help="the ranks this process hosts")
    p.add_argument("--netns", default="",
                   help="each hosted rank's network namespace (/proc/PID/ns/net; '' for "
                        "the process's own)")
    p.add_argument("--addresses", required=True, help="IP of every rank, in rank order")
    p.add_argument("--port", type=int, default=7000)
    p.add_argument("--source-ports", type=int, default=0,
                   help="first source port of the connections, each at a place fixed by "
                        "(rank, peer, channel), so every experiment draws the same ECMP paths "
                        "(0: the kernel's ephemeral ports)")
    p.add_argument("--nvlink", default="", help="NVLink address of every rank ('' for none)")
    p.add_argument("--servers", default="", help="the server of every rank")
    p.add_argument("--windows", default="0,0",
                   help="bytes a peer across the network, and one in the same server, may "
                        "have unacknowledged on a connection to a hosted rank (the receive "
                        "buffer and TCP_WINDOW_CLAMP; 0: the kernel's autotuning)")
    a = p.parse_args(argv)
    # flowlet and spray open 16 connections or more per peer: an AllToAll of
    # 32 ranks is ~1,000 sockets a rank, the usual soft limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, hard), hard))
    split = lambda v: v.split(",") if v else []             # noqa: E731
    ranks = [int(r) for r in a.ranks.split(",")]
    namespaces = split(a.netns) or [""] * len(ranks)
    return serve(ranks, lambda: Agents(ranks, namespaces, a.addresses.split(","), a.port,
                                       split(a.nvlink), split(a.servers),
                                       tuple(int(w) for w in a.windows.split(",")),
                                       a.source_ports), {
        "setup": lambda agents, m: agents.setup(
            m["collective"], m["algorithm"], m["count"], m["root"], m["piece"], Transport.of(m)),
        "go": lambda agents, m: agents.run(m["iter"], m.get("at", 0.0), m.get("timeline", False)),
        "step_setup": lambda agents, m: stepper.step_setup(
            agents, m["step"]["collectives"], m["step"]["tasks"], m["step"]["initial"],
            m["step"]["in_flight"], Transport.of(m["step"])),
        "step": lambda agents, m: stepper.run_step(agents, m["iter"], m.get("at", 0.0)),
    })


if __name__ == "__main__":
    sys.exit(main())
