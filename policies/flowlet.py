"""Flowlet switching, done by the senders: a rank keeps `routing.entropy`
connections to each peer (each its own source port, so its own ECMP path)
and moves to a random one only after an idle gap with everything sent and
acknowledged, so pieces never overtake each other. The simulator cannot see
the gaps: it replays the channels alone (sim_faithful is False)."""

from typing import Sequence

from policies.policy import Lane, Policy, ready, register


@register
class Flowlet(Policy):
    name = "flowlet"
    order = 3
    summary = "flowlet lets the senders move pieces between paths after an idle gap"
    spreads = True
    sim_faithful = False

    def connections_per_peer(self, channels: int, entropy: int) -> int:
        return max(channels, entropy)

    def choose(self, lanes: Sequence[Lane], current, now, gap, lowat, draw):
        free = ready(lanes, lowat)
        cur = lanes[current]
        if not cur.waiting and cur.in_flight == 0 and now - cur.last >= gap:
            return free[draw(len(free))]          # a new flowlet: any path (all are ready)
        return current if current in free else None

    def watched(self, current: int, connections: int):
        return [current]
