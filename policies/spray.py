"""Packet spraying, done by the senders: a rank keeps `routing.entropy`
connections to each peer and hands every piece to the least-loaded ready
one; pieces are cut small (SPRAY_PIECE) as a sprayed jumbo frame would be,
and a RoCE sender sprays its packets over `entropy` UDP source ports. The
simulator replays the same connections, connection k on path k."""

from policies.policy import Policy, ready, register

SPRAY_PIECE = 8 * 1024  # bytes: about one 9000-byte frame's payload (docs/routing.md)


@register
class Spray(Policy):
    name = "spray"
    order = 4
    summary = "spray lets the senders move every piece to the least-loaded path"
    spreads = True
    splits = True
    sim_paths = "per-connection"

    def connections_per_peer(self, channels: int, entropy: int) -> int:
        return max(channels, entropy)

    def sim_channels(self, channels: int, entropy: int) -> int:
        return self.connections_per_peer(channels, entropy)

    def piece_bytes(self, piece_bytes: int, smallest: int) -> int:
        return max(min(piece_bytes, SPRAY_PIECE), smallest)

    def roce_paths(self, entropy: int) -> int:
        return entropy

    def choose(self, lanes, current, now, gap, lowat, draw):
        free = ready(lanes, lowat)
        return min(free, key=lambda i: (lanes[i].unsent, lanes[i].last)) if free else None
