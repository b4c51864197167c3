"""The schedule's structure as a shortcut: step by step instead of event by
event.

A collective's steps are, to a good approximation, bulk-synchronous: the
transfers of a step run together, sharing the links max-min fairly (a
transfer that finishes early gives its share to the rest), and the step
ends with its slowest transfer plus its path's latency; the steps add up.
Steps that move the same transfers (every step of a ring) are computed
once. This needs no per-operation state, so it reaches rank counts the
event-by-event replay (replay.py) cannot. Where steps run alike on every
rank (ring, rhd over a power of two) the two agree within 5%; where some
ranks run ahead into the next step and compete with the rest (rhd's fold
over other rank counts), the shortcut is a lower bound, about 10% under
(the tests hold them to both).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, FrozenSet, Tuple

from collectives import schedules
from sim.fairness import max_min_rates, weighted_max_min_rates
from sim.network import Network
from collectives.metrics import TYPE_SIZE

Transfer = Tuple[int, int, int, float]          # (src rank, dst rank, channel, bits)


def stepwise_seconds(network: Network, ranks, sched: schedules.Schedule, channels: int = 1,
                     wire_per_byte: float = 1.0, hop_latency_s: float = 0.0) -> float:
    """The collective's time, step by step (see the module docstring)."""
    steps: Dict[int, Dict[Tuple[int, int, int], float]] = defaultdict(lambda: defaultdict(float))
    for r, ops in sched.items():
        sent: Dict[int, int] = defaultdict(int)
        for op in ops:
            if op.kind == "send":
                # the k-th message to a peer goes on connection k mod channels, as the agents send
                ch = sent[op.peer] % channels
                sent[op.peer] += 1
                steps[op.round][(r, op.peer, ch)] += op.length * TYPE_SIZE * wire_per_byte * 8
    known: Dict[FrozenSet[Transfer], float] = {}
    total = 0.0
    for step in sorted(steps):
        key = frozenset((ranks[s], ranks[d], c, b) for (s, d, c), b in steps[step].items())
        if key not in known:
            known[key] = step_seconds(network, key, hop_latency_s)
        total += known[key]
    return total


def step_seconds(network, transfers, hop_latency_s: float = 0.0) -> float:
    """One step: its transfers (src, dst endpoint as `network.path` takes
    them, channel, bits) start together and share the links max-min fairly;
    a transfer that finishes gives its share to the rest; the step ends with
    the last, plus the longest path's latency."""
    done = transfer_times(network, transfers, hop_latency_s)
    return max(t for t, _ in done.values()) + max(lat for _, lat in done.values())


def transfer_times(network, transfers, hop_latency_s: float = 0.0,
                   with_latency: bool = True) -> dict:
    """(src, dst, channel) -> (when its last bit left, its path's latency),
    the transfers starting together and sharing the links max-min fairly.
    On a network whose routing splits every flow evenly over the equal-cost
    paths (`network.splits`: packet spraying, adaptive routing), a transfer
    loads each link by its share (`network.spread`). `with_latency` False:
    latencies 0, the bandwidth alone."""
    split = getattr(network, "splits", False)
    paths, shares, left, capacity, latency = {}, {}, {}, {}, {}
    for s, d, c, bits in transfers:
        links = network.path(s, d, flow=c)
        key = (s, d, c)
        if split:
            shares[key] = network.even_split(s, d)
            paths[key] = tuple(shares[key])
        else:
            paths[key] = tuple(l.intf for l in links)
        left[key] = left.get(key, 0.0) + bits
        for intf in paths[key]:
            if intf not in capacity:
                capacity[intf] = network.links[intf].rate_bps
        latency[key] = (sum(l.delay_s for l in links) + hop_latency_s * len(links)
                        if with_latency else 0.0)
    # only a split over parallel links (not pooled) gives a link part of a flow
    weighted = any(w != 1.0 for share in shares.values() for w in share.values())
    done, users = {}, defaultdict(int)
    for path in paths.values():
        for intf in path:
            users[intf] += 1
    for f, path in paths.items():            # alone on all its links: its slowest, at once
        if all(users[intf] == 1 for intf in path):
            done[f] = (left.pop(f) / min(capacity[intf] / (shares[f][intf] if weighted else 1.0)
                                         for intf in path), latency[f])
    now = 0.0
    while left:
        if weighted:
            rates = weighted_max_min_rates({f: shares[f] for f in left}, capacity)
        else:
            rates = max_min_rates({f: paths[f] for f in left}, capacity)
        dt = min(left[f] / rates[f] for f in left)
        now += dt
        for f in list(left):
            left[f] -= rates[f] * dt
            if left[f] <= 1e-9 * max(1.0, rates[f]):
                del left[f]
                done[f] = (now, latency[f])
    return done
