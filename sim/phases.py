"""Ring and hierarchical AllReduce step by step, from their structure: what
collectives/schedules.py would build, without building it (at 200,000 GPUs a
flat ring has 1.6e11 operations).

A phase is a set of transfers every rank makes at once, and how many steps
repeat it. A ring's steps all move a block of S/n to the next rank; the
k-th message to a peer travels on connection k mod `channels`, so with
several channels the steps cycle over that many transfer sets (ECMP may send
each another way). The hierarchical AllReduce (NCCL's, as
`schedules.hierarchical_allreduce`): a ring ReduceScatter inside each server
(g-1 steps of S/g), a ring AllReduce per rail between servers (2(m-1) steps
of S/(g m)), an AllGather inside each server (g-1 steps of S/g).

`phase_seconds` prices a phase from one step of it (steps.py: the
transfers share the links max-min fairly) and the rings' pipelining
(`ring_seconds`); the tests hold these phases to the schedules they stand
for (the same sends; the same time as the step shortcut where a ring's edges
are alike) and to the full event-by-event simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Tuple

from sim.steps import transfer_times
from collectives.metrics import TYPE_SIZE
from collectives.registry import FLAT_RING, PHASED, SERVER_RINGS


@dataclass(frozen=True)
class Phase:
    name: str
    steps: int                               # how many steps move these transfers
    transfers: Tuple[Tuple[int, int, int], ...]  # (src rank, dst rank, channel), ring by ring
    elements: int                            # per transfer (the largest block)
    group: int                               # ranks per ring: transfers come in rings of this many


def allreduce_phases(algorithm: str, n: int, count: int, local: int = 1,
                     channels: int = 1) -> List[Phase]:
    """The phases of an AllReduce of `count` elements over `n` ranks (servers
    of `local` GPUs for hierarchical)."""
    if algorithm == FLAT_RING or (algorithm == SERVER_RINGS and local == 1):
        return _ring(list(range(n)), 2 * (n - 1), math.ceil(count / n), channels, FLAT_RING, 0)
    if algorithm != SERVER_RINGS:
        raise ValueError(f"the structural phases cover {PHASED}, not {algorithm!r}")
    if n % local:
        raise ValueError(f"{n} ranks are not whole servers of {local} GPUs")
    m, block = n // local, math.ceil(count / local)
    nodes = [range(k * local, (k + 1) * local) for k in range(m)]
    within = [r for node in nodes for r in node]
    out = _ring(within, local - 1, block, channels, "intra-node reduce-scatter", 0, local)
    if m > 1:
        rails = [node[j] for j in range(local) for node in nodes]     # rail by rail
        out += _ring(rails, 2 * (m - 1), math.ceil(block / m), channels,
                     "inter-node allreduce", 0, m)
    out += _ring(within, local - 1, block, channels, "intra-node allgather", local - 1, local)
    return out


def replay_operations(phases: List[Phase], piece: int = 0) -> int:
    """The operations of the schedule these phases stand for, its messages
    cut into pieces of at most `piece` elements (0: whole), as the
    event-by-event replay runs it: a send and a receive per piece (a bound:
    each transfer counted at its phase's largest block)."""
    def pieces(elements: int) -> int:
        return max(1, -(-elements // piece)) if piece else 1
    return sum(2 * ph.steps * len(ph.transfers) * pieces(ph.elements) for ph in phases)


def _ring(order, steps, elements, channels, name, first_message, group=None) -> List[Phase]:
    """`steps` ring steps among consecutive groups of `group` ranks of
    `order` (all of them when None); the step s message is the
    (first_message + s)-th to that peer."""
    if steps <= 0:
        return []
    group = group or len(order)
    pairs = [(order[i], order[i - i % group + (i % group + 1) % group]) for i in range(len(order))]
    out = []
    kinds = min(steps, channels)
    for c in range(kinds):
        repeat = len(range(c, steps, kinds))
        ch = (first_message + c) % channels
        out.append(Phase(name, repeat, tuple((a, b, ch) for a, b in pairs), elements, group))
    return out


def phase_seconds(network, phases: List[Phase], wire_per_byte: float = 1.0,
                  hop_latency_s: float = 0.0, with_latency: bool = True) -> float:
    """The AllReduce's time: a step of each phase priced once, its rings'
    pipelining over all their steps (`ring_seconds`), the parts in turn;
    `with_latency` False: the bandwidth's part alone (no link delay nor
    hop latency)."""
    known, parts = {}, []
    for ph in phases:
        key = (ph.transfers, ph.elements)       # the allgather's steps are the reduce-scatter's
        if key not in known:
            bits = ph.elements * TYPE_SIZE * wire_per_byte * 8
            known[key] = transfer_times(network, [(a, b, c, bits) for a, b, c in ph.transfers],
                                        hop_latency_s, with_latency)
        if parts and parts[-1][0][0].name == ph.name:      # the same ring on another channel
            parts[-1].append((ph, known[key]))
        else:
            parts.append([(ph, known[key])])
    return sum(ring_seconds(part) for part in parts)


def ring_seconds(part) -> float:
    """The steps of one part (phases of the same rings, one per channel in
    use, with one step of each priced), each ring pipelined as the ranks run
    it: a rank forwards a block once it has it, and an edge sends its blocks
    one after another. Edge e moves a block in serial_e (its max-min share of
    the step, averaged over the channels' steps) and delivers it lat_e
    later; a ring then advances one step every max(max_e serial_e, mean_e
    (serial_e + lat_e)): its slowest edge, or the time a block takes round
    the ring, per hop (the cycle times of the two loops of its
    dependencies). Alike edges give the bulk-synchronous step, serial + lat;
    a ring of NVLink edges and one NIC edge runs at the NIC's pace and hides
    the latency. The rings of a part run side by side; it ends with the
    slowest."""
    first = part[0][0]
    steps = sum(ph.steps for ph, _ in part)
    count, size = len(first.transfers), first.group
    serial, lat, last = [0.0] * count, [0.0] * count, [0.0] * count   # per edge
    for ph, times in part:
        weight = ph.steps / steps
        for e, t in enumerate(ph.transfers):
            moving, delay = times[t]
            serial[e] += weight * moving
            lat[e] += weight * delay
            last[e] = max(last[e], moving + delay)
    worst = 0.0
    for start in range(0, count, size):
        ring = slice(start, start + size)
        period = max(max(serial[ring]), (sum(serial[ring]) + sum(lat[ring])) / size)
        worst = max(worst, (steps - 1) * period + max(last[ring]))
    return worst
