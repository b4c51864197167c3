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


def weighted_max_min_rates(flows: Mapping[Hashable, Mapping[str, float]],
                           capacity: Mapping[str, float]) -> Dict[Hashable, float]:
    """Max-min fair rates of flows that each put a share of themselves on
    several links (`flows`: flow -> {link: share of the flow's rate it
    carries}), as a flow split evenly over several paths does: every flow
    grows at the same pace until a link is full (its users' shares times
    their rates reach its capacity), freezing its users, and so on. With
    every share 1 this is `max_min_rates`."""
    users: Dict[str, set] = {}
    for f, links in flows.items():
        for link in links:
            users.setdefault(link, set()).add(f)
    rate: Dict[Hashable, float] = {f: float("inf") for f, links in flows.items() if not links}
    left = {link: float(capacity[link]) for link in users}
    level = 0.0                                   # the rate every unfrozen flow has reached
    while any(users.values()):
        best, link_best = float("inf"), None
        for link, u in users.items():
            if u:
                weight = sum(flows[f][link] for f in u)
                grow = max(left[link], 0.0) / weight if weight > 0 else float("inf")
                if grow < best:
                    best, link_best = grow, link
        if link_best is None or best == float("inf"):
            for u in users.values():
                for f in u:
                    rate[f] = float("inf")
            break
        level += best
        for link, u in users.items():             # everyone grew by `best`
            left[link] -= best * sum(flows[f][link] for f in u)
        for f in list(users[link_best]):
            rate[f] = level
            for link in flows[f]:
                users[link].discard(f)
    return rate
