"""The senders' half of the flowlet and spray policies: which of a peer's
connections carries the next piece (docs/routing.md).

Open vSwitch hashes each flow's 5-tuple onto one of the equal-cost paths; it
can neither time an idle gap nor send one flow's packets different ways from
its tables. So, as in Ultra Ethernet, the entropy comes from the sender: a rank
opens `entropy` connections to each peer (as many source ports, so as many
hash draws over the paths), and a `Spreader` hands each piece to one of them.
A piece waits in the spreader until a connection is ready for it: nothing of
its own still waiting to be written, and less than `lowat` bytes unsent in the
kernel (TCP_NOTSENT_LOWAT, which also makes the socket writable again exactly
then). So pieces go to the connections whose paths drain them.

The choice itself is each policy's (policies/spray.py, policies/flowlet.py):

- spray: every piece to the ready connection with the fewest unsent bytes
  (packet spraying as Spectrum-X and Ultra Ethernet do it, at the grain of a
  piece). Pieces of one peer overtake each other; the receiver counts them.
- flowlet (LetFlow): a peer's pieces stay on the current connection until it
  has been idle for `gap` with every byte acknowledged; the next piece then
  goes to a connection drawn at random. Nothing of the last flowlet is still
  in the network, so flowlets never overtake each other, whatever the paths'
  delays.
"""

from __future__ import annotations

import fcntl
import random
import selectors
import socket
import struct
import termios
from typing import Callable, List

from policies import policy as policy_of
from policies.policy import Lane

SIOCOUTQ = termios.TIOCOUTQ           # bytes sent and not acknowledged, plus unsent
SIOCOUTQNSD = 0x894B                  # bytes not yet sent
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
LOWAT = 16 * 1024                     # unsent bytes below which a connection takes a piece


def queued(sock: socket.socket, request: int) -> int:
    """A socket's SIOCOUTQ or SIOCOUTQNSD, in bytes."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), request, b"\0\0\0\0"))[0]


class Spreader:
    """One rank's pieces to one peer, over that peer's connections (agent
    Conns: `sock`, `parts`, `writing`, `send(header, data)`)."""

    def __init__(self, loop, policy: str, conns: List, gap: float, clock: Callable[[], float],
                 seed: int = 0, lowat: int = LOWAT):
        self.loop, self.policy, self.conns, self.gap = loop, policy_of(policy), conns, gap
        self.clock, self.lowat = clock, lowat
        self.rng = random.Random(seed)
        self.pending: list = []
        self.watched: set = set()
        self.last = [float("-inf")] * len(conns)
        self.current = self.rng.randrange(len(conns))
        # moves to another connection, and those made while the one left still
        # had bytes unacknowledged (which could then arrive after the next piece)
        self.switches = self.unsettled = 0
        for conn in conns:
            conn.sock.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, lowat)
            conn.spreader = self

    def push(self, header: bytes, data) -> None:
        self.pending.append((header, data))
        self.pump()

    def pump(self) -> None:
        """Hand waiting pieces to ready connections; watch the others."""
        head = 0
        while head < len(self.pending):
            now = self.clock()
            lanes = [Lane(bool(c.parts), queued(c.sock, SIOCOUTQNSD), queued(c.sock, SIOCOUTQ),
                          self.last[i]) for i, c in enumerate(self.conns)]
            i = self.policy.choose(lanes, self.current, now, self.gap, self.lowat,
                                   self.rng.randrange)
            if i is None:
                break
            self._unwatch(i)
            if i != self.current:
                left = lanes[self.current]
                self.switches += 1
                self.unsettled += bool(left.waiting or left.in_flight)
            self.current, self.last[i] = i, now
            self.conns[i].send(*self.pending[head])
            head += 1
        del self.pending[:head]
        if self.pending:
            self.loop.backlog.add(self)
            for i in self.policy.watched(self.current, len(self.conns)):
                if not self.conns[i].writing and i not in self.watched:
                    self.loop.sel.register(self.conns[i].sock, selectors.EVENT_WRITE, self.pump)
                    self.watched.add(i)
        else:
            self.loop.backlog.discard(self)
            for i in list(self.watched):
                self._unwatch(i)

    def _unwatch(self, i: int) -> None:
        if i in self.watched:
            self.watched.discard(i)
            self.loop.sel.unregister(self.conns[i].sock)
