"""NCCL collectives as plain data: who sends which part of the buffer to whom,
and what the receiver does with it.

Every rank holds a working buffer of `count` elements (the "size" column of
nccl-tests) and a read-only input of the same length. A schedule is, per rank,
an ordered list of operations:

- ``send``  part of the working buffer (or, for AllToAll, of the input) to a peer;
- ``recv``  from a peer into part of the working buffer, adding (``reduce``) or
  copying; it carries what the data must be: the sum of the inputs of
  ``contributors`` over the same-length region starting at ``src_offset``;
- ``copy``  part of the rank's own input into its working buffer.

The k-th send from a to b is the k-th receive at b from a. Dependencies are not
written down: an operation waits for the earlier operations of its rank that
touch the same elements (a rank forwards a part only after it has received it),
which `dependencies` derives. Splitting operations into pieces (`chunked`)
therefore pipelines every algorithm without a global barrier per step.

Algorithms: ring, recursive halving-doubling (with the usual fix-up for a rank
count that is not a power of two) and binary-tree AllReduce, and hierarchical AllReduce over multi-GPU servers (NCCL's
approach: ReduceScatter inside each server, a ring AllReduce per rail between
servers, AllGather inside each server); NCCL's channels on multi-GPU servers:
rail-matched multi-channel rings (rail-ring) and the double binary tree with a
chain inside each server (nccl-tree); ring AllGather and ReduceScatter, and
NCCL's PAT for them (pat, below); pipelined chain Broadcast and Reduce from/to a root; pairwise
AllToAll; SendRecv to the next rank.

PAT ("Parallel Aggregated Trees", NCCL 2.23+, src/include/collectives.h's
PatAGAlgorithm and PatRSAlgorithm, one GPU per server) sends every block
down its own binomial tree over distances 2^d, and the trees of all blocks
share each step's messages: ceil(log2 n) steps, each rank sending and
receiving the ring's (n-1)/n of the buffer, for any n (offsets past n
are left out, as NCCL skips them). The lab's `pat` has NCCL's peers (at
dimension d AllGather sends to r - 2^d and receives from r + 2^d,
ReduceScatter the reverse), NCCL's trees (each block's path through the
ranks), and its order of dimensions: AllGather farthest first, halving
the distance (Bruck's AllGather doubles it), each step forwarding all it
has received; ReduceScatter its mirror, nearest first, adding as it goes.
Where NCCL aggregates a step's blocks into one message, the messages are
NCCL's too. It differs from NCCL in:

- aggregation: NCCL packs a step's blocks into one message only as far
  as its aggregation factor goes (doubled while a rank's share of a
  channel is under half a chunk, three times more for its 8 buffer
  slots, never past floor(n/2)). Where that stops below 2^(D-1), D =
  ceil(log2 n) (for n = 2^m + 1: 3, 5, 9, 17, at any size; beyond 16
  ranks at large sizes), it splits the nearer dimensions' blocks into
  several messages, sent depth first so that few buffer slots hold a
  block before it is forwarded. The lab always sends a step's blocks one
  after the other to its one peer: the same bytes, trees and dependent
  steps, fewer messages;
- order within a step: NCCL's ReduceScatter lays a step's blocks out in
  bit-reversed order of their offsets (7, 3, 5, 1 from 8 ranks), adds
  what arrives into the slot it sends from, and adds the nearest
  contribution to a rank's own block last; here the blocks go in
  increasing order, each receive adds into the buffer as it arrives, and
  a send waits for the receives of its block (`dependencies`). The sums
  are the same (collectives/datatypes.py keeps them exact in any order);
- chunks and channels: NCCL runs the whole sequence on one chunk of a
  channel's slice after another; here pieces (`chunked`) pipeline
  operation by operation, on the connections per peer the engine opens.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import numbers
from dataclasses import dataclass, replace
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from toolkit.errors import shown
from collectives import registry
from collectives.registry import COLLECTIVES, EQUAL_BLOCKS


def round_count(collective: str, n: int, count: int) -> int:
    """nccl-tests' rounding: the per-rank blocks of AllGather, ReduceScatter and
    AllToAll are equal, so their count is a multiple of n (at least n)."""
    if collective in EQUAL_BLOCKS:
        return max(n, count - count % n)
    return max(1, count)


# False while a schedule is built for timing only (`build(..., data=False)`):
# receives then carry no contributors, which at 1,024 ranks would hold
# hundreds of millions of rank numbers
_WITH_DATA = contextvars.ContextVar("with_data", default=True)


@contextlib.contextmanager
def timing_only():
    """Schedules built within carry no data unless their caller asks for it
    (`build`'s `data` left out), for callers that only time or count them: at
    512 ranks a ring AllReduce's contributors were 15 GB."""
    token = _WITH_DATA.set(False)
    try:
        yield
    finally:
        _WITH_DATA.reset(token)


@dataclass(frozen=True, slots=True)
class Op:
    kind: str                    # "send" | "recv" | "copy"
    peer: int                    # the other rank (the rank itself for "copy")
    offset: int                  # first element in the working buffer
    length: int                  # elements
    reduce: bool = False         # recv: add into the buffer instead of copying
    contributors: FrozenSet[int] = frozenset()   # recv: whose inputs the data sums
    src_offset: int = 0          # recv/copy: where in those inputs; send: where it reads
    from_input: bool = False     # send: read the input rather than the working buffer
    round: int = 0               # the algorithm's round: its dependent steps, counted (timelines, iperf3 replay)


Schedule = Dict[int, List[Op]]


def bounds(count: int, parts: int) -> List[Tuple[int, int]]:
    """Split `count` elements into `parts` contiguous blocks differing by at most one."""
    base, extra = divmod(count, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((start, size))
        start += size
    return out


def send_op(peer, block, step, from_input=False):
    offset, length = block
    return Op("send", peer, offset, length, src_offset=offset, from_input=from_input, round=step)


def recv_op(peer, block, step, contributors, reduce=False, src_offset=None):
    """`contributors`: a set, or a function giving it (called only when the
    schedule carries data)."""
    offset, length = block
    if not _WITH_DATA.get():
        contributors = ()
    elif callable(contributors):
        contributors = contributors()
    return Op("recv", peer, offset, length, reduce=reduce, contributors=frozenset(contributors),
              src_offset=offset if src_offset is None else src_offset, round=step)


# --- ring family ---------------------------------------------------------------------

def _ring_reduce_scatter(n, count, sched, step0=0):
    """Rank r ends with block r fully reduced. At step s it sends block r-s-1 to
    r+1 and receives block r-s-2 from r-1, holding ranks r-1 .. r-1-s."""
    blocks = bounds(count, n)
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        for s in range(n - 1):
            sched[r].append(send_op(nxt, blocks[(r - s - 1) % n], step0 + s))
            sched[r].append(recv_op(prv, blocks[(r - s - 2) % n], step0 + s,
                                  lambda: {(r - 1 - k) % n for k in range(s + 1)}, reduce=True))
    return step0 + n - 1


def _ring_all_gather(n, count, sched, owners, step0=0):
    """Rank r starts owning block r; at step s it passes block r-s on and
    receives block r-s-1. `owners(b)` is the set whose inputs block b sums."""
    blocks = bounds(count, n)
    for r in range(n):
        nxt, prv = (r + 1) % n, (r - 1) % n
        for s in range(n - 1):
            b = (r - s - 1) % n
            sched[r].append(send_op(nxt, blocks[(r - s) % n], step0 + s))
            sched[r].append(recv_op(prv, blocks[b], step0 + s, owners(b)))
    return step0 + n - 1


def ring_allreduce(n, count):
    sched = {r: [] for r in range(n)}
    step = _ring_reduce_scatter(n, count, sched)
    _ring_all_gather(n, count, sched, lambda b: range(n), step)
    return sched


def ring_reducescatter(n, count):
    sched = {r: [] for r in range(n)}
    _ring_reduce_scatter(n, count, sched)
    return sched


def ring_allgather(n, count):
    sched = {r: [] for r in range(n)}
    _ring_all_gather(n, count, sched, lambda b: {b})
    return sched


# --- hierarchical (scale-up inside a server, scale-out between them) ---------------

def _group_reduce_scatter(group, region, sched, step0, holds):
    """Ring ReduceScatter among `group` (global ranks in ring order) over
    `region` (offset, length): member i ends with sub-block i reduced over the
    group. `holds(rank)` is whose inputs that rank's region sums at the start."""
    g = len(group)
    blocks = [(region[0] + o, l) for o, l in bounds(region[1], g)]
    for i, r in enumerate(group):
        nxt, prv = group[(i + 1) % g], group[(i - 1) % g]
        for s in range(g - 1):
            sched[r].append(send_op(nxt, blocks[(i - s - 1) % g], step0 + s))
            def held():
                return set().union(*(holds(group[(i - 1 - k) % g]) for k in range(s + 1)))
            sched[r].append(recv_op(prv, blocks[(i - s - 2) % g], step0 + s, held, reduce=True))
    return blocks


def _group_all_gather(group, blocks, sched, step0, everyone):
    """Ring AllGather among `group`: member i starts owning blocks[i]."""
    g = len(group)
    for i, r in enumerate(group):
        nxt, prv = group[(i + 1) % g], group[(i - 1) % g]
        for s in range(g - 1):
            sched[r].append(send_op(nxt, blocks[(i - s) % g], step0 + s))
            sched[r].append(recv_op(prv, blocks[(i - s - 1) % g], step0 + s, everyone))


def hierarchical_allreduce(n, count, local):
    """Ranks r = node x local + j. (1) ReduceScatter inside each node: GPU j
    ends with block j summed over its node; (2) ring AllReduce of block j
    among the GPUs j of all nodes (one rail); (3) AllGather inside each node.
    Inter-node bytes per GPU: 2(m-1)/m x S/local, against 2(n-1)/n x S for a
    flat ring whose every hop may cross the network."""
    check_params("allreduce", "hierarchical", n, count, local=local)
    m = n // local
    nodes = [list(range(k * local, (k + 1) * local)) for k in range(m)]
    sched = {r: [] for r in range(n)}
    everyone = frozenset(range(n))
    for members in nodes:                 # every node cuts the buffer alike
        blocks = _group_reduce_scatter(members, (0, count), sched, 0, lambda r: {r})
    step = local - 1
    for j in range(local if m > 1 else 0):
        rail = [members[j] for members in nodes]
        sub = _group_reduce_scatter(rail, blocks[j], sched, step,
                                    lambda r: set(nodes[r // local]))
        _group_all_gather(rail, sub, sched, step + m - 1, everyone)
    step += 2 * (m - 1) if m > 1 else 0
    for members in nodes:
        _group_all_gather(members, blocks, sched, step, everyone)
    return sched


# --- NCCL's channels: rail-matched rings and the double binary tree ----------------
# Ranks r = server x local + GPU. Each channel moves its own share of the
# buffer on its own ranks' order; the channels' operations are then merged per
# rank (`_merge_channels`), so they run side by side.

def _merge_channels(n, channels):
    """Every rank's operations of all `channels` (schedules over disjoint
    regions), ordered by step, then channel, sends before receives. A send
    and the receive it lands in share step and channel, so both ends count
    a pair's messages alike, and a rank running its list in order never
    waits on a message that is sent later in anyone's order."""
    sched = {}
    for r in range(n):
        tagged = [(op.round, c, op.kind != "send", i, op)
                  for c, channel in enumerate(channels) for i, op in enumerate(channel[r])]
        sched[r] = [t[-1] for t in sorted(tagged, key=lambda t: t[:4])]
    return sched


def rail_ring_leave_offsets(m, local):
    """The GPU each server leaves a channel's ring from, as an offset from
    the channel's number c: server s leaves from GPU c + a[s] over rail
    c + a[s], and the next server enters at that same GPU. A server's
    ring must leave from another GPU than it enters at (a path through all
    its GPUs), so neighbours' offsets differ: -1, 0, -1, 0, ... for an
    even server count (server 0 enters at c, walks up to c - 1, server 1
    walks down from c - 1 to c, ...); for an odd count the last two
    servers take -2 and 0, which needs a third GPU. None when no
    such ring exists: an odd count of servers of 2 GPUs (an odd cycle of
    servers cannot alternate between two rails)."""
    if m == 1 or local == 1:
        return [0] * m
    if m % 2 == 0:
        return [-1 if s % 2 == 0 else 0 for s in range(m)]
    if local == 2:
        return None
    return [-1 if s % 2 == 0 else 0 for s in range(m - 2)] + [-2, 0]


def _walk(enter, leave, local):
    """A path through all GPUs of a server from `enter` to `leave`: up from
    `enter` (down when `leave` is the next one up), `leave` kept for last."""
    way = -1 if local > 2 and leave == (enter + 1) % local else 1
    gpus = [(enter + way * k) % local for k in range(local)]
    gpus.remove(leave)
    return gpus + [leave]


def rail_ring_order(m, local, c):
    """Channel c's ring over all m x local ranks: each server's GPUs in a
    row over NVLink, from the GPU the previous server's ring arrived at,
    and every hop between servers from GPU k to GPU k (rail k). One
    server: its GPUs from c upward, closing over NVLink."""
    if m == 1:
        return [(c + k) % local for k in range(local)]
    offsets = rail_ring_leave_offsets(m, local)
    order = []
    for s in range(m):
        enter, leave = (c + offsets[s - 1]) % local, (c + offsets[s]) % local
        order += [s * local + g for g in _walk(enter, leave, local)]
    return order


def rail_ring_allreduce(n, count, local):
    """NCCL's multi-channel ring on rail-optimized servers: `local`
    channels, one per rail (NIC), each a ring AllReduce (reduce-scatter,
    then all-gather) over all n ranks on its own share of the buffer, in
    the order `rail_ring_order` gives it. Every NIC of every server sends
    and receives one channel's ring hop, so all NICs carry the same bytes
    in both directions. Where no rail-matched ring closes (an odd count of
    servers of 2 GPUs), it is the hierarchical AllReduce, which is also
    rail-matched and NIC-balanced."""
    check_params("allreduce", "rail-ring", n, count, local=local)
    m = n // local
    if rail_ring_leave_offsets(m, local) is None:
        return hierarchical_allreduce(n, count, local)
    everyone = frozenset(range(n))
    channels = []
    for c, region in enumerate(bounds(count, local)):
        if not region[1]:
            continue
        order = rail_ring_order(m, local, c)
        channel = {r: [] for r in range(n)}
        blocks = _group_reduce_scatter(order, region, channel, 0, lambda r: {r})
        _group_all_gather(order, blocks, channel, n - 1, everyone)
        channels.append(channel)
    return _merge_channels(n, channels)


def btree_parents(m):
    """NCCL's binary tree over m nodes (its src/graph/trees.cc): in order,
    rooted at node 0, which has one child. A node r > 0 whose lowest set
    bit is b, r = b x (2k + 1), hangs under r + b when k is even and that
    node exists, under r - b otherwise: odd nodes are leaves, and the root's
    child is the largest power of two below m. The parent of each node,
    None for the root."""
    parents = [None]
    for r in range(1, m):
        b = r & -r
        parents.append(r + b if not r & (b << 1) and r + b < m else r - b)
    return parents


def double_binary_tree(m):
    """NCCL's two trees over m nodes: the binary tree, and its mirror (node
    r plays node m - 1 - r) for an even m, or the tree shifted by one (node
    r plays node r - 1) for an odd m. A leaf of one is inside the other,
    so every node sends up and down in one tree at most twice: for an even
    m every node is a leaf in exactly one tree; for an odd m there are only
    m - 1 leaves in all, and node 0 is a leaf in neither."""
    first = btree_parents(m)
    if m % 2 == 0:
        return first, [None if first[m - 1 - r] is None else m - 1 - first[m - 1 - r]
                       for r in range(m)]
    return first, [None if first[(r - 1) % m] is None else (first[(r - 1) % m] + 1) % m
                   for r in range(m)]


def _depths(parents):
    depth = {}
    for r in range(len(parents)):
        path = [r]
        while path[-1] not in depth and parents[path[-1]] is not None:
            path.append(parents[path[-1]])
        base = depth.get(path[-1], 0)
        for k, node in enumerate(reversed(path)):
            depth.setdefault(node, base + k)
    return [depth[r] for r in range(len(parents))]


def _under(parents, local):
    """Each node's ranks and those of every node below it (servers of
    `local` GPUs)."""
    below = [{s} for s in range(len(parents))]
    for s in sorted(range(len(parents)), key=_depths(parents).__getitem__, reverse=True):
        if parents[s] is not None:
            below[parents[s]] |= below[s]
    return [{t * local + g for t in nodes for g in range(local)} for nodes in below]


def _tree_channel(n, local, parents, rail, region, height):
    """One channel of NCCL's Tree on `rail`: in each server a chain of its
    GPUs from GPU `rail` (the head) upward; across servers the tree
    `parents`, head to head over the rail. Each chain reduces to its head,
    the heads reduce up the tree, the root's head broadcasts down it, and
    each head down its chain. Steps: the chain's up (local - 1), the
    tree's up and down (`height` each, the deeper tree's), the chain's
    down."""
    e, everyone = local - 1, range(n)
    depth, under = _depths(parents), _under(parents, local)
    channel = {r: [] for r in range(n)}
    for s, up in enumerate(parents):
        chain = [s * local + (rail + i) % local for i in range(local)]
        for i in range(e):
            lower, upper = chain[i + 1], chain[i]
            channel[lower].append(send_op(upper, region, e - 1 - i))
            channel[upper].append(recv_op(lower, region, e - 1 - i, set(chain[i + 1:]), reduce=True))
            channel[upper].append(send_op(lower, region, e + 2 * height + i))
            channel[lower].append(recv_op(upper, region, e + 2 * height + i, everyone))
        if up is None:
            continue
        head, top, d = chain[0], up * local + rail, depth[s]
        channel[head].append(send_op(top, region, e + height - d))
        channel[top].append(recv_op(head, region, e + height - d, under[s], reduce=True))
        channel[top].append(send_op(head, region, e + height + d - 1))
        channel[head].append(recv_op(top, region, e + height + d - 1, everyone))
    return channel


def nccl_tree_allreduce(n, count, local):
    """NCCL's Tree AllReduce on multi-GPU servers: a chain inside each
    server, the double binary tree (`double_binary_tree`) across servers.
    2 x `local` channels, each on its own share of the buffer: channel
    2j + t runs tree t on rail j, so every NIC carries both trees alike.
    Chunking (`--piece-bytes`) pipelines the reduce up and the broadcast
    down, as in `tree_allreduce`."""
    check_params("allreduce", "nccl-tree", n, count, local=local)
    trees = double_binary_tree(n // local)
    height = max(max(_depths(parents)) for parents in trees)
    channels = [_tree_channel(n, local, trees[k % 2], k // 2, region, height)
                for k, region in enumerate(bounds(count, 2 * local)) if region[1]]
    return _merge_channels(n, channels)


# --- recursive halving-doubling ------------------------------------------------------

def rhd_allreduce(n, count):
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive
    doubling, over the largest power of two p <= n. The first 2(n-p) ranks pair
    up first: each even one hands its buffer to its odd neighbour and sits out,
    then gets the result back at the end."""
    sched = {r: [] for r in range(n)}
    whole = (0, count)
    p = 1 << (n.bit_length() - 1)
    extra = n - p
    for i in range(0, 2 * extra, 2):                      # fix-up in
        sched[i].append(send_op(i + 1, whole, 0))
        sched[i + 1].append(recv_op(i, whole, 0, {i}, reduce=True))
    active = [i for i in range(n) if not (i < 2 * extra and i % 2 == 0)]
    members = {i: {i, i - 1} if i < 2 * extra else {i} for i in active}   # whose data it holds
    blocks = bounds(count, p)
    steps = p.bit_length() - 1
    span = {v: (0, p) for v in range(p)}                  # block range each virtual rank owns
    group = {v: set(members[active[v]]) for v in range(p)}
    for k in range(steps):                                 # recursive halving
        dist = p >> (k + 1)
        new_span, new_group = {}, {}
        for v in range(p):
            partner = v ^ dist
            lo, hi = span[v]
            mid = (lo + hi) // 2
            keep, give = ((lo, mid), (mid, hi)) if v & dist == 0 else ((mid, hi), (lo, mid))
            me, peer = active[v], active[partner]
            sched[me].append(send_op(peer, _region(blocks, give), 1 + k))
            sched[me].append(recv_op(peer, _region(blocks, keep), 1 + k, group[partner], reduce=True))
            new_span[v], new_group[v] = keep, group[v] | group[partner]
        span, group = new_span, new_group
    for k in range(steps):                                 # recursive doubling
        dist = 1 << k
        new_span = {}
        for v in range(p):
            partner = v ^ dist
            me, peer = active[v], active[partner]
            sched[me].append(send_op(peer, _region(blocks, span[v]), 1 + steps + k))
            sched[me].append(recv_op(peer, _region(blocks, span[partner]), 1 + steps + k, range(n)))
            new_span[v] = (min(span[v][0], span[partner][0]), max(span[v][1], span[partner][1]))
        span = new_span
    for i in range(0, 2 * extra, 2):                      # fix-up out
        sched[i + 1].append(send_op(i, whole, 1 + 2 * steps))
        sched[i].append(recv_op(i + 1, whole, 1 + 2 * steps, range(n)))
    return sched


def _region(blocks, span):
    lo, hi = span
    start = blocks[lo][0]
    return start, blocks[hi - 1][0] + blocks[hi - 1][1] - start


# --- PAT: NCCL's Parallel Aggregated Trees (AllGather, ReduceScatter) -----------------
# Every block travels its own binomial tree over distances 2^d; the trees of
# all blocks share each step's messages (aggregated), so ceil(log2 n) steps.
# A rank's block "at offset t" is that of rank r + t (mod n). NCCL's peers at
# dimension d (src/transport/generic.cc, prims_simple.h): AllGather sends to
# r - 2^d and receives from r + 2^d, ReduceScatter the other way round.

def pat_steps(n: int) -> int:
    """ceil(log2 n): PAT's dimensions, one step each (0 for one rank)."""
    return (n - 1).bit_length()


def pat_allgather(n, count):
    """Farthest first: step k works dimension d = D - 1 - k (distance 2^d,
    D = `pat_steps`).
    Rank r holds then the blocks at offsets t with no bit at or below d set
    (its own and those received at the earlier, farther steps), and sends
    each one whose offset at the receiver, t + 2^d, is below n, to r - 2^d;
    it receives from r + 2^d the blocks at offsets with lowest bit d. Each
    block reaches each rank once: the ring's (n-1)/n of the buffer each way."""
    blocks = bounds(count, n)
    sched = {r: [] for r in range(n)}
    dims = pat_steps(n)
    for k in range(dims):
        dist = 1 << (dims - 1 - k)
        held = range(0, n - dist, 2 * dist)
        for r in range(n):
            for t in held:
                sched[r].append(send_op((r - dist) % n, blocks[(r + t) % n], k))
            for t in held:
                b = (r + dist + t) % n
                sched[r].append(recv_op((r + dist) % n, blocks[b], k, {b}))
    return sched


def pat_reducescatter(n, count):
    """AllGather's mirror, nearest first, reducing as it goes: step k works
    dimension k (distance 2^k). Rank r sends to r + 2^k the partial sums of
    the blocks at offsets with lowest bit k (they are then complete for the
    subtree below it: ranks r - z for z < 2^k, offset + z < n), and adds
    into the blocks at offsets y (multiples of 2^(k+1), y + 2^k < n) what
    r - 2^k sends. Its own block (offset 0) ends with every rank's."""
    blocks = bounds(count, n)
    sched = {r: [] for r in range(n)}
    for k in range(pat_steps(n)):
        dist = 1 << k
        for r in range(n):
            for x in range(dist, n, 2 * dist):
                sched[r].append(send_op((r + dist) % n, blocks[(r + x) % n], k))
            for y in range(0, n - dist, 2 * dist):
                sched[r].append(recv_op(
                    (r - dist) % n, blocks[(r + y) % n], k,
                    lambda: {(r - dist - z) % n for z in range(dist) if y + dist + z < n},
                    reduce=True))
    return sched


# --- trees and chains ------------------------------------------------------------------

def tree_allreduce(n, count):
    """Binary tree rooted at rank 0: reduce up, then broadcast down. Chunking
    the buffer pipelines both phases (each piece moves on when it can)."""
    whole = (0, count)
    sched = {r: [] for r in range(n)}
    children = {r: [c for c in (2 * r + 1, 2 * r + 2) if c < n] for r in range(n)}
    subtree = {}
    for r in reversed(range(n)):
        subtree[r] = {r}.union(*(subtree[c] for c in children[r]))
    depth = {0: 0}
    for r in range(1, n):
        depth[r] = depth[(r - 1) // 2] + 1
    height = max(depth.values())
    for r in range(n):
        for c in children[r]:
            sched[r].append(recv_op(c, whole, height - depth[c], subtree[c], reduce=True))
        if r:
            sched[r].append(send_op((r - 1) // 2, whole, height - depth[r]))
    for r in range(n):
        if r:
            sched[r].append(recv_op((r - 1) // 2, whole, height + depth[r], range(n)))
        for c in children[r]:
            sched[r].append(send_op(c, whole, height + depth[c]))
    return sched


def chain_broadcast(n, count, root=0):
    """Root -> root+1 -> ... -> root-1, the whole buffer; chunking pipelines it."""
    whole = (0, count)
    sched = {r: [] for r in range(n)}
    for k in range(n):
        r = (root + k) % n
        if k:
            sched[r].append(recv_op((r - 1) % n, whole, k - 1, {root}))
        if k < n - 1:
            sched[r].append(send_op((r + 1) % n, whole, k))
    return sched


def chain_reduce(n, count, root=0):
    """root+1 -> root+2 -> ... -> root, adding along the way."""
    whole = (0, count)
    sched = {r: [] for r in range(n)}
    for k in range(n):
        r = (root + 1 + k) % n
        if k:
            sched[r].append(recv_op((r - 1) % n, whole, k - 1,
                                  {(root + 1 + j) % n for j in range(k)}, reduce=True))
        if k < n - 1:
            sched[r].append(send_op((r + 1) % n, whole, k))
    return sched


def pairwise_alltoall(n, count):
    """Block j of rank i's input ends as block i of rank j's buffer; at step s
    rank r sends to r+s and receives from r-s."""
    blocks = bounds(count, n)
    sched = {r: [Op("copy", r, *blocks[r], src_offset=blocks[r][0])] for r in range(n)}
    for s in range(1, n):
        for r in range(n):
            dst, src = (r + s) % n, (r - s) % n
            sched[r].append(send_op(dst, blocks[dst], s - 1, from_input=True))
            sched[r].append(recv_op(src, blocks[src], s - 1, {src}, src_offset=blocks[r][0]))
    return sched


def ring_sendrecv(n, count):
    whole = (0, count)
    return {r: [send_op((r + 1) % n, whole, 0, from_input=True),
                recv_op((r - 1) % n, whole, 0, {(r - 1) % n})] for r in range(n)}


def phase(algorithm: str, step: int, n: int, local: int = 1) -> str:
    """Which part of the algorithm a step belongs to (for timelines): the
    algorithm's own `phase` (collectives/algorithms/), by default its name."""
    from collectives.algorithms import ALGORITHM_REGISTRY
    return ALGORITHM_REGISTRY[algorithm].phase(step, n, local)


def hierarchical_phase(step: int, n: int, local: int) -> Optional[str]:
    """The hierarchical AllReduce's phase of a step; None on one GPU a server
    (then it is a flat ring)."""
    if local == 1:
        return None
    m = n // local
    if step < local - 1:
        return "intra-node reduce-scatter"
    if m > 1 and step < local - 1 + 2 * (m - 1):
        return "inter-node allreduce"
    return "intra-node allgather"


def rail_ring_phase(step: int, n: int, local: int) -> Optional[str]:
    """Each channel's reduce-scatter, then its all-gather (the hierarchical
    phases where the rail rings are that schedule); None but on whole servers."""
    if n % local:
        return None
    if rail_ring_leave_offsets(n // local, local) is None:
        return hierarchical_phase(step, n, local)
    return "reduce-scatter" if step < n - 1 else "all-gather"


def nccl_tree_phase(step: int, n: int, local: int) -> Optional[str]:
    """Up the chains, up the trees, down the trees, down the chains; None but
    on whole servers."""
    if n % local:
        return None
    m = n // local
    e = local - 1
    height = max(max(_depths(parents)) for parents in double_binary_tree(m))
    for end, name in ((e, "intra-node reduce"), (e + height, "inter-node reduce"),
                      (e + 2 * height, "inter-node broadcast")):
        if step < end:
            return name
    return "intra-node broadcast"


@dataclass(frozen=True)
class RankLayout:
    """How a schedule is laid out besides its size: the root rank, the
    pieces its messages are cut into (0: whole) and the GPUs per server."""
    root: int = 0
    piece_elements: int = 0
    local: int = 1


def build(collective: str, algorithm: str, n: int, count: int,
          layout: RankLayout = RankLayout(), data: Optional[bool] = None) -> Schedule:
    """The schedule of a collective from `layout.root`, its operations split
    into pieces of at most `layout.piece_elements` (0: unsplit);
    `layout.local` is the GPUs per server (the node size of the
    hierarchical, rail-ring and nccl-tree algorithms). With `data` False the receives carry no contributors (for timing:
    the simulator); left out, they do unless built within `timing_only`.
    ValueError, one sentence, for parameters no schedule can be built from
    (`check_params`)."""
    root, piece_elements, local = layout.root, layout.piece_elements, layout.local
    check_params(collective, algorithm, n, count, root, piece_elements, local)
    from collectives.algorithms import ALGORITHM_REGISTRY
    token = _WITH_DATA.set(_WITH_DATA.get() if data is None else data)
    try:
        sched = ALGORITHM_REGISTRY[algorithm].build(collective, n, count, root, local)
    finally:
        _WITH_DATA.reset(token)
    return chunked(sched, piece_elements) if piece_elements else sched


def check_params(collective, algorithm, n, count, root=0, piece_elements=0, local=1) -> None:
    """Raise ValueError with one sentence for what no schedule can be built
    from: an unknown name, a count of ranks, elements, GPUs or a piece size
    that is not a whole number in range, a root that is not a rank."""
    algorithms = registry.ALGORITHMS      # the registered ones, known once all are imported
    if collective not in algorithms:
        raise ValueError(f"unknown collective {shown(collective)}; expected one of "
                         f"{', '.join(COLLECTIVES)}")
    if algorithm not in algorithms[collective]:
        raise ValueError(f"no {shown(algorithm)} algorithm for {collective}; expected one of "
                         f"{', '.join(algorithms[collective])}")
    _whole(n, 2, "a collective needs a whole number of at least 2 ranks")
    _whole(count, 1, "count must be a whole number of at least 1 element")
    _whole(local, 1, "GPUs per server must be a whole number of at least 1")
    _whole(piece_elements, 0, "piece size must be a whole number of elements (0: unsplit)")
    _whole(root, 0, f"root must be a rank from 0 to {n - 1}")
    if root >= n:
        raise ValueError(f"root must be a rank from 0 to {n - 1}, got {root}")
    if collective in EQUAL_BLOCKS and count % n:
        raise ValueError(f"{collective} on {n} ranks needs a count that is a multiple of {n} "
                         f"(an equal block per rank), got {count}")
    if algorithm in registry.BY_SERVER and n % local:
        raise ValueError(f"{algorithm} AllReduce needs whole servers: {n} ranks are not "
                         f"a multiple of {local} GPUs per server")


def _whole(value, lo: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
        raise ValueError(f"{what}, got {shown(value)}")


def chunked(sched: Schedule, piece: int) -> Schedule:
    """Split every operation into pieces of at most `piece` elements. Both ends
    of a transfer split the same length the same way, so they still match."""
    out = {}
    for r, ops in sched.items():
        out[r] = []
        for op in ops:
            if op.length <= piece:
                out[r].append(op)
                continue
            for start in range(0, op.length, piece):
                size = min(piece, op.length - start)
                out[r].append(replace(op, offset=op.offset + start, length=size,
                                      src_offset=op.src_offset + start))
    return out


# --- what the buffers start and end with ---------------------------------------------

def initial_regions(collective: str, n: int, count: int, rank: int, root: int = 0):
    """Regions of the working buffer that start as a copy of the rank's input."""
    if collective in ("allreduce", "reducescatter", "reduce"):
        return [(0, count)]
    if collective == "broadcast":
        return [(0, count)] if rank == root else []
    if collective == "allgather":
        return [bounds(count, n)[rank]]
    return []                                   # alltoall, sendrecv: received or copied


def expected_regions(collective: str, n: int, count: int, rank: int, root: int = 0):
    """What the working buffer must hold at the end: (offset, length,
    contributors, src_offset), the sum of the contributors' inputs."""
    blocks = bounds(count, n)
    everyone = frozenset(range(n))
    if collective == "allreduce":
        return [(0, count, everyone, 0)]
    if collective == "reducescatter":
        o, l = blocks[rank]
        return [(o, l, everyone, o)]
    if collective == "allgather":
        return [(o, l, frozenset({b}), o) for b, (o, l) in enumerate(blocks)]
    if collective == "broadcast":
        return [(0, count, frozenset({root}), 0)]
    if collective == "reduce":
        return [(0, count, everyone, 0)] if rank == root else []
    if collective == "alltoall":
        return [(o, l, frozenset({b}), blocks[rank][0]) for b, (o, l) in enumerate(blocks)]
    if collective == "sendrecv":
        return [(0, count, frozenset({(rank - 1) % n}), 0)]
    raise ValueError(f"unknown collective {shown(collective)}")


# --- dependencies ----------------------------------------------------------------------

def _touches(op: Op):
    """(reads working buffer?, writes working buffer?) for hazard analysis."""
    if op.kind == "send":
        return (not op.from_input, False)
    return (op.kind == "recv" and op.reduce, True)


def dependencies(ops: Sequence[Op]) -> List[List[int]]:
    """For each op, the earlier ops of the same rank it must wait for: any that
    touch an overlapping part of the working buffer where one of the two writes
    (read-after-write, write-after-read, write-after-write)."""
    cuts = sorted({0} | {op.offset for op in ops} | {op.offset + op.length for op in ops})
    last_write: Dict[int, int] = {}
    reads: Dict[int, List[int]] = {}
    deps = []
    for i, op in enumerate(ops):
        reads_buf, writes_buf = _touches(op)
        lo = bisect.bisect_left(cuts, op.offset)
        hi = bisect.bisect_left(cuts, op.offset + op.length)
        mine = set()
        for seg in range(lo, hi):
            if seg in last_write:
                mine.add(last_write[seg])
            if writes_buf:
                mine.update(reads.get(seg, ()))
        if op.kind == "send" and op.from_input:
            mine = set()                        # the input never changes
        for seg in range(lo, hi):
            if writes_buf:
                last_write[seg] = i
                reads[seg] = []
            elif reads_buf:
                reads.setdefault(seg, []).append(i)
        deps.append(sorted(mine))
    return deps


def transfers(sched: Schedule):
    """(step, src, dst, elements) of every send, for replay by other engines."""
    return sorted((op.round, r, op.peer, op.length)
                  for r, ops in sched.items() for op in ops if op.kind == "send")
