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

from traffic import schedules as S
from traffic.sim.fairness import max_min_rates
from traffic.sim.network import Network

TYPE_SIZE = 4
Transfer = Tuple[int, int, int, float]          # (src rank, dst rank, channel, bits)


def stepwise_seconds(network: Network, ranks, sched: S.Schedule, channels: int = 1,
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
                steps[op.step][(r, op.peer, ch)] += op.length * TYPE_SIZE * wire_per_byte * 8
    capacity = {intf: link.rate_bps for intf, link in network.links.items()}
    known: Dict[FrozenSet[Transfer], float] = {}
    total = 0.0
    for step in sorted(steps):
        key = frozenset((s, d, c, b) for (s, d, c), b in steps[step].items())
        if key not in known:
            known[key] = _step_seconds(network, ranks, key, capacity, hop_latency_s)
        total += known[key]
    return total


def _step_seconds(network, ranks, transfers, capacity, hop_latency_s: float) -> float:
    paths, left, latency = {}, {}, 0.0
    for s, d, c, bits in transfers:
        links = network.path(ranks[s], ranks[d], flow=c)
        paths[(s, d, c)] = tuple(l.intf for l in links)
        left[(s, d, c)] = bits
        latency = max(latency, sum(l.delay_s for l in links) + hop_latency_s * len(links))
    now = 0.0
    while left:
        rates = max_min_rates({f: paths[f] for f in left}, capacity)
        dt = min(left[f] / rates[f] for f in left)
        now += dt
        for f in list(left):
            left[f] -= rates[f] * dt
            if left[f] <= 1e-9 * max(1.0, rates[f]):
                del left[f]
    return now + latency
