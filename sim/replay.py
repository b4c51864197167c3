"""A schedule replayed as flows, event by event.

Each rank runs its operations as the rank agents do (collectives/executor.py):
an operation starts once the earlier operations it depends on are done; a
send hands its piece to the connection towards its peer at once (the agents
copy what they send), a receive is done once its piece has arrived and its
own dependencies are done. A connection (one per peer and channel, as the
agents open them) moves its pieces one after another, in order; all
connections with data to move share the links max-min fairly
(fairness.py), recomputed whenever one starts or stops moving. A piece
arrives at the far end its path's latency after its last byte left.

What this leaves out, on purpose: TCP's ramp-up and loss recovery, queues
beyond fair sharing, and the time the host's CPUs take.

How it keeps up with a thousand ranks: progress is lazy. A connection
knows the bits its head piece had left at some instant and its rate since;
one heap holds the instants pieces finish (an entry is stale once the
connection's version moved on), another the instants they arrive. At each
instant the pieces that finish leave first (connections in the order they
started moving, as a scan of them would meet them), then what arrives is
taken in. A connection moving on to its next piece keeps its rate. When
connections start or stop moving, max-min is recomputed once before time
moves on, only over the connections that share links with them, directly
or through others (every user of those links is among them, so each
link's whole capacity is theirs; the same set moving again gets the rates
it got before); a connection whose rate changed settles its head's bits up
to now and is scheduled anew. A connection alone on its links moves at its
path's narrowest rate and needs none of this. Every byte handed to a
connection eventually crosses every link of its path, so the bytes per
link are counted as they are handed over. Per operation, the state is a
few flat lists.

The network is used through `path(src, dst, flow)` (hops with `.intf`, a
hashable link id, and `.delay_s`) and `links[intf].rate_bps` alone.
"""

from __future__ import annotations

import gc
import heapq
import math
from array import array
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count
from typing import Dict, Hashable, Iterator, List, Sequence, Tuple

from collectives import schedules
from sim.fairness import max_min_rates
from collectives.metrics import TYPE_SIZE

EPSILON = 1e-12
NAN, INF = math.nan, math.inf
SEND, COPY, RECV = 0, 1, 2
KINDS = {"send": SEND, "copy": COPY, "recv": RECV}
KNOWN_RATES = 1 << 18               # max-min rates remembered, at most (all groups)


@contextmanager
def _uncollected():
    """Without the cyclic garbage collector: the replay makes no reference
    cycles, and collecting while it allocates would only walk the schedule's
    objects over and over (most of the time, at 1,024 ranks)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Connection:
    """One connection's queue (the receives its pieces are for), its head
    piece's progress kept lazily: `bits` left at `t_mark`, moving at `rate`
    since. A finish event holds while the connection's `version` is the one
    it was pushed at (`pending`: the version last scheduled). A connection
    `alone` on its links (so far) always moves at its path's narrowest rate."""

    __slots__ = ("path", "latency_s", "pieces", "sent_bits", "bits", "t_mark", "rate",
                 "version", "pending", "active", "alone", "order")

    def __init__(self, path: Tuple[int, ...], latency_s: float, rate: float):
        self.path, self.latency_s = path, latency_s
        self.pieces: deque = deque()
        self.sent_bits = 0.0                    # wire bits handed over, all pieces
        self.bits, self.t_mark, self.rate = 0.0, 0.0, rate
        self.version, self.pending, self.active, self.alone = 0, -1, False, True
        self.order = 0                          # when it last started moving (a count)


@dataclass
class Outcome:
    seconds: float
    link_bytes: Dict[Hashable, float]           # wire bytes per sending interface
    spans: tuple = ((), (), ())                 # (rank, step, kind) keys, first starts, last ends

    @property
    def busy(self) -> List[dict]:
        """Per rank, step and kind: first start, last end (made when asked:
        at 512 ranks a ring has a million)."""
        return list(self.spans_one_by_one())

    def spans_one_by_one(self) -> Iterator[dict]:
        """`busy`, one at a time (for a caller that keeps them in its own form)."""
        keys, first, last = self.spans
        for (r, step, kind), a, b in zip(keys, first, last):
            yield {"rank": r, "step": step, "kind": kind, "start": a, "end": b}


class Replay:
    """One collective's schedule on `network`, between endpoints `ranks`.
    Operations are numbered across ranks (rank by rank, in order)."""

    def __init__(self, network, ranks: Sequence[str], sched: schedules.Schedule,
                 channels: int = 1, wire_per_byte: float = 1.0, hop_latency_s: float = 0.0):
        self.net, self.ranks, self.sched = network, list(ranks), sched
        self.channels, self.wire_per_byte, self.hop_latency = channels, wire_per_byte, hop_latency_s
        with _uncollected():
            self._flatten()
            self._pair()
            self._spans()
        self.sched = None           # all it needs is flat now: the caller's may be freed

    def _flatten(self) -> None:
        """Flat arrays, a few bytes an op: its kind, how many ops it waits
        for, and the ops waiting for it (`dependents`, last first) as a slice
        of one array from `first_dependent[g]` to `first_dependent[g + 1]`."""
        self.base: Dict[int, int] = {}                  # rank -> number of its first op
        self.kinds = bytearray()
        self.waits = array("l")                         # how many ops each waits for
        self.dependents = array("l")
        self.first_dependent = array("l", [0])
        self.ready: List[int] = []                      # ops waiting for nothing
        for r, ops in self.sched.items():
            b = self.base[r] = len(self.kinds)
            deps = schedules.dependencies(ops)
            after: List[List[int]] = [[] for _ in ops]
            for i, before in enumerate(deps):
                for j in before:
                    after[j].append(b + i)
                if not before:
                    self.ready.append(b + i)
            for a in after:
                a.reverse()
                self.dependents.extend(a)
                self.first_dependent.append(len(self.dependents))
            self.waits.extend(map(len, deps))
            self.kinds.extend(KINDS[op.kind] for op in ops)

    def _pair(self) -> None:
        """Number the (sender, receiver) pairs; the k-th send from a to b is
        the k-th receive at b from a."""
        n, wire_bits = len(self.kinds), TYPE_SIZE * self.wire_per_byte * 8
        self.pair = array("l", [-1]) * n                # send -> its pair
        self.bits = array("d", [0.0]) * n               # send -> wire bits
        self.length = array("l", [0]) * n               # send -> elements
        self.ends: List[Tuple[int, int]] = []           # pair -> (src, dst)
        self.recvs: List[List[int]] = []                # pair -> the receives, in order
        received: Dict[Tuple[int, int], List[int]] = {}
        for r, ops in self.sched.items():
            b = self.base[r]
            for i, op in enumerate(ops):
                if op.kind == "recv":
                    received.setdefault((op.peer, r), []).append(b + i)
        ids: Dict[Tuple[int, int], int] = {}
        for r, ops in self.sched.items():
            b = self.base[r]
            for i, op in enumerate(ops):
                if op.kind == "send":
                    p = ids.get((r, op.peer))
                    if p is None:
                        p = ids[(r, op.peer)] = len(self.ends)
                        self.ends.append((r, op.peer))
                        self.recvs.append(received.get((r, op.peer), []))
                    self.pair[b + i], self.bits[b + i] = p, op.length * wire_bits
                    self.length[b + i] = op.length

    def _spans(self) -> None:
        """Number the (rank, step, kind) groups of ops, in order (a receive
        that adds is of kind "reduce"); `span_of` each op's group."""
        self.span_of = array("l", [0]) * len(self.kinds)
        self.span_keys: List[Tuple[int, int, str]] = []
        for r in sorted(self.sched):
            ops, b = self.sched[r], self.base[r]
            keys = [(op.round, "reduce" if op.kind == "recv" and op.reduce else op.kind)
                    for op in ops]
            first = len(self.span_keys)
            ordered = sorted(set(keys))
            index = {key: first + n for n, key in enumerate(ordered)}
            self.span_keys += [(r,) + key for key in ordered]
            self.span_of[b:b + len(ops)] = array("l", [index[key] for key in keys])

    def sent_bytes(self) -> Dict[Tuple[str, str, int], float]:
        """Wire bytes per connection (src, dst endpoint, channel): the k-th
        message to a peer on channel k mod channels, as the agents send."""
        out: Dict[Tuple[str, str, int], float] = {}
        made = [0] * len(self.ends)                     # sends so far per pair
        for g, p in enumerate(self.pair):               # rank by rank, in order
            if p < 0:
                continue
            k, (src, dst) = made[p], self.ends[p]
            made[p] = k + 1
            key = (self.ranks[src], self.ranks[dst], k % self.channels)
            out[key] = out.get(key, 0.0) + self.length[g] * TYPE_SIZE * self.wire_per_byte
        return out

    def run(self) -> Outcome:
        with _uncollected():
            state = _State(self)
            state.start()
            state.loop()
            return state.outcome()


class _State:
    """The replay's moving parts: time, what each op waits for, connections."""

    def __init__(self, replay: Replay):
        self.r = replay
        self.now = 0.0
        n = len(replay.kinds)
        self.waiting = array("l", replay.waits)
        self.done, self.started, self.arrived = (array("d", [NAN]) * n for _ in range(3))
        self.piece_bits = array("d", [0.0]) * n     # receive -> wire bits of its piece
        self.finishes: List[Tuple[float, int, int]] = []    # (time, connection, its version)
        self.arrivals: List[Tuple[float, int, int]] = []    # (time, tie, receive)
        self.tie = count()
        self.order = count()                    # connections by when they started moving
        self.made = [0] * len(replay.ends)      # sends made per pair
        self.pair, self.bits, self.recvs = replay.pair, replay.bits, replay.recvs
        self.channels, self.kinds, self.dependents = replay.channels, replay.kinds, \
            replay.dependents
        self.first_dependent = replay.first_dependent
        self.conn_of = [-1] * (len(replay.ends) * replay.channels)   # pair, channel -> id
        self.conns: List[Connection] = []
        # the links paths use, numbered: their ids, capacities, the ids of the
        # connections moving across each, the only connection on each (-2: none, -1: several)
        self.link_number: Dict[Hashable, int] = {}
        self.links: List[Hashable] = []
        self.capacity: List[float] = []
        self.users: List[set] = []
        self.sole: List[int] = []
        # id -> moving when rates were last computed (the users of links then)
        self.toggled: Dict[int, bool] = {}
        self.fresh: List[int] = []              # started moving since: to be scheduled
        self.known: Dict[frozenset, Dict[int, float]] = {}  # max-min of groups met before
        self.known_rates = 0

    # --- operations ------------------------------------------------------------

    def start(self) -> None:
        kinds = self.r.kinds
        for g in self.r.ready:
            self.started[g] = self.now
            if kinds[g] == SEND:
                self._enqueue(g)
            if kinds[g] != RECV:
                self._complete(g, self.now)

    def _complete(self, g: int, when: float) -> None:
        """`g` is done at `when`; what waited only for it starts now, depth
        first (as one after another in the rank's own thread)."""
        done, waiting, started, arrived = self.done, self.waiting, self.started, self.arrived
        dependents, first, kinds, now = self.dependents, self.first_dependent, self.kinds, self.now
        done[g] = when
        stack = dependents[first[g]:first[g + 1]].tolist()   # last first: pops the first first
        while stack:
            j = stack.pop()
            waiting[j] -= 1
            if waiting[j]:
                continue
            started[j] = now
            kind = kinds[j]
            if kind == RECV:
                if arrived[j] != arrived[j]:            # NaN: not there yet
                    continue
                done[j] = arrived[j] if arrived[j] > now else now
            else:
                if kind == SEND:
                    self._enqueue(j)
                done[j] = now
            if first[j] != first[j + 1]:
                stack += dependents[first[j]:first[j + 1]]

    def _enqueue(self, g: int) -> None:
        p = self.pair[g]
        k = self.made[p]
        self.made[p] = k + 1
        ch = k % self.channels
        c = self.conn_of[p * self.channels + ch]
        if c < 0:
            c = self.conn_of[p * self.channels + ch] = self._connect(p, ch)
        conn = self.conns[c]
        recv = self.recvs[p][k]
        bits = self.piece_bits[recv] = self.bits[g]
        conn.pieces.append(recv)
        conn.sent_bits += bits
        if not conn.active:
            conn.active = True
            conn.bits, conn.t_mark, conn.order = bits, self.now, next(self.order)
            conn.version += 1
            if conn.alone:                      # its rate is its own
                conn.pending = conn.version
                if conn.rate > 0:
                    heapq.heappush(self.finishes, (self.now + bits / conn.rate, c, conn.version))
            else:
                self.toggled.setdefault(c, False)
                self.fresh.append(c)

    def _connect(self, p: int, ch: int) -> int:
        src, dst = self.r.ends[p]
        hops = self.r.net.path(self.r.ranks[src], self.r.ranks[dst], flow=ch)
        latency = sum(h.delay_s for h in hops) + self.r.hop_latency * len(hops)
        path, c = tuple(self._number(h.intf) for h in hops), len(self.conns)
        conn = Connection(path, latency, min((self.capacity[i] for i in path), default=INF))
        self.conns.append(conn)
        for link in path:
            first = self.sole[link]
            if first < -1:
                self.sole[link] = c
            elif first != c:
                conn.alone = False
                if first >= 0:                  # no longer alone: shares from now on
                    self.sole[link] = -1
                    self._join(first)
        return c

    def _number(self, intf: Hashable) -> int:
        number = self.link_number.get(intf)
        if number is None:
            number = self.link_number[intf] = len(self.links)
            self.links.append(intf)
            self.capacity.append(self.r.net.links[intf].rate_bps)
            self.users.append(set())
            self.sole.append(-2)                # none yet
        return number

    def _join(self, c: int) -> None:
        conn = self.conns[c]
        if conn.alone:
            conn.alone = False
            if conn.active:
                for link in conn.path:
                    self.users[link].add(c)

    # --- time ---------------------------------------------------------------------

    def loop(self) -> None:
        """From instant to instant, until no piece is left to leave or arrive.
        At each, the pieces that finish leave first (connections in the order
        they started moving), then what arrives is taken in."""
        finishes, arrivals, conns, pop = self.finishes, self.arrivals, self.conns, heapq.heappop
        waiting, done, arrived = self.waiting, self.done, self.arrived
        while True:
            if self.toggled or self.fresh:
                self._rates()
            if not finishes and not arrivals:
                return
            t = min(finishes[0][0] if finishes else INF, arrivals[0][0] if arrivals else INF)
            if t > self.now:
                self.now = t
            now = self.now
            limit = now + EPSILON
            leaving = []
            while finishes and finishes[0][0] <= limit:
                _, c, version = pop(finishes)
                if conns[c].version == version:     # else stale
                    leaving.append(c)
            if len(leaving) > 1:
                leaving.sort(key=lambda c: conns[c].order)
            for c in leaving:
                self._leave(c, conns[c])
            while arrivals and arrivals[0][0] <= limit:
                x = pop(arrivals)[2]
                if waiting[x] == 0 and done[x] != done[x]:
                    self._complete(x, now)
                else:
                    arrived[x] = now

    def _leave(self, c: int, conn: Connection) -> None:
        """`conn`'s head piece (and any empty one behind) has left: it arrives
        after the path's latency; the next piece goes on at the same rate."""
        now, bits, pieces = self.now, self.piece_bits, conn.pieces
        arrive = now + conn.latency_s
        tiny = EPSILON * max(1.0, conn.rate)
        heapq.heappush(self.arrivals, (arrive, next(self.tie), pieces.popleft()))
        while pieces and bits[pieces[0]] <= tiny:
            heapq.heappush(self.arrivals, (arrive, next(self.tie), pieces.popleft()))
        conn.version += 1
        if pieces:
            conn.bits, conn.t_mark = bits[pieces[0]], now
            self._schedule(c, conn)
        else:
            conn.active = False
            if not conn.alone:
                self.toggled.setdefault(c, True)

    def _schedule(self, c: int, conn: Connection) -> None:
        conn.pending = conn.version
        if conn.rate > 0:
            heapq.heappush(self.finishes, (conn.t_mark + conn.bits / conn.rate, c, conn.version))

    def _rates(self) -> None:
        """Max-min again over the connections sharing links, directly or not,
        with those that started or stopped moving; reschedule whose rate changed."""
        conns, now, users = self.conns, self.now, self.users
        moved = [c for c, was in self.toggled.items() if conns[c].active != was]
        self.toggled.clear()
        for c in moved:                                 # the links' users change
            if conns[c].active:
                for link in conns[c].path:
                    users[link].add(c)
            else:
                for link in conns[c].path:
                    users[link].discard(c)
        group = self._group(moved) if moved else ()
        if group:
            rates = self._max_min(group)
            for c in group:
                conn, rate = conns[c], rates[c]
                if rate == conn.rate:
                    continue
                if now > conn.t_mark:                   # settle at the old rate
                    conn.bits = max(conn.bits - conn.rate * (now - conn.t_mark), 0.0)
                    conn.t_mark = now
                conn.rate = rate
                conn.version += 1
                self._schedule(c, conn)
        for c in self.fresh:
            conn = conns[c]
            if conn.active and conn.pending != conn.version:
                self._schedule(c, conn)
        self.fresh = []

    def _max_min(self, group: Dict[int, None]) -> Dict[int, float]:
        """Max-min over `group`; the same connections moving get the same
        rates, so they are remembered (within a run: paths do not change)."""
        if len(group) == 1:
            (c,) = group
            return {c: min((self.capacity[link] for link in self.conns[c].path), default=INF)}
        key = frozenset(group)
        rates = self.known.get(key)
        if rates is None:
            self.known_rates += len(group)
            if self.known_rates > KNOWN_RATES:
                self.known.clear()
                self.known_rates = len(group)
            conns = self.conns
            rates = self.known[key] = max_min_rates({c: conns[c].path for c in group},
                                                    self.capacity)
        return rates

    def _group(self, moved: List[int]) -> Dict[int, None]:
        """The moving connections that share links with `moved`, directly or
        through others (in the order met)."""
        users, conns = self.users, self.conns
        seen, group = set(), {}
        stack = list(moved)
        while stack:
            for link in conns[stack.pop()].path:
                if link not in seen:
                    seen.add(link)
                    for c in users[link]:
                        if c not in group:
                            group[c] = None
                            stack.append(c)
        return group

    def outcome(self) -> Outcome:
        done, started = self.done, self.started
        missing = sum(t != t for t in done)              # never done: still NaN
        if missing:
            raise RuntimeError(f"the replay stalled with {missing} operations never done")
        link_bytes: Dict[Hashable, float] = {}
        for conn in self.conns:
            for link in conn.path:
                name = self.links[link]
                link_bytes[name] = link_bytes.get(name, 0.0) + conn.sent_bits / 8
        keys = self.r.span_keys
        first, last = array("d", [INF]) * len(keys), array("d", [-INF]) * len(keys)
        for g, s in enumerate(self.r.span_of):
            if started[g] < first[s]:
                first[s] = started[g]
            if done[g] > last[s]:
                last[s] = done[g]
        return Outcome(max(done, default=0.0), link_bytes, (keys, first, last))
