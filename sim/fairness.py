"""Max-min fair rates of flows sharing links, by progressive filling.

Every flow's rate grows at the same pace until some link is full; the flows
crossing it are frozen at that share, the link's capacity is spent, and the
rest grow on. The result is the allocation TCP flows of equal round trip
approach on a shared bottleneck: k flows on one link get B/k each, and a
flow held back elsewhere leaves its unused share to the others.
"""

from __future__ import annotations

import heapq
from typing import Dict, Hashable, Iterable, Mapping


def max_min_rates(flows: Mapping[Hashable, Iterable[str]],
                  capacity: Mapping[str, float]) -> Dict[Hashable, float]:
    """The rate of every flow (same unit as `capacity`), given the links each
    crosses. A flow that crosses no link is given an infinite rate."""
    users: Dict[str, set] = {}
    paths = {}
    for f, links in flows.items():
        paths[f] = tuple(set(links))
        for link in paths[f]:
            users.setdefault(link, set()).add(f)
    rate: Dict[Hashable, float] = {f: float("inf") for f, p in paths.items() if not p}
    # a flow alone on every link it crosses gets its slowest link at once
    # (most flows of a ring step on a non-blocking fabric): no filling needed
    for f, p in paths.items():
        if p and all(len(users[link]) == 1 for link in p):
            rate[f] = min(float(capacity[link]) for link in p)
            for link in p:
                del users[link]
    left = {link: float(capacity[link]) for link in users}
    # the fair share each link could give its unfrozen flows, smallest first;
    # an entry is stale once the link's users or capacity changed since
    heap = [(left[link] / len(u), link) for link, u in users.items()]
    heapq.heapify(heap)
    while heap:
        share, link = heapq.heappop(heap)
        u = users[link]
        if not u or abs(share - max(left[link], 0.0) / len(u)) > 1e-12 * max(1.0, share):
            continue                                   # stale: pushed again when it changed
        touched = set()
        for f in list(u):
            rate[f] = share
            for other in paths[f]:
                left[other] -= share
                users[other].discard(f)
                touched.add(other)
        for other in touched:
            if users[other]:
                heapq.heappush(heap, (max(left[other], 0.0) / len(users[other]), other))
    return rate
