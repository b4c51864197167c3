"""What a routing policy is: the Policy class, its hooks, and the registry.

Every part of the project that routes asks the fabric's policy instead of
comparing its name:

- the lab: `controller` (False: plain L2 switches with spanning tree, no
  os-ken controller, no link commands);
- the controller's plan (controller/routes.py): `pin` (which of a switch's
  equal-cost ports a destination leaf's group keeps), `per_endpoint` and
  `pin_endpoint` (a route per destination endpoint instead) and `moves_elephants`
  (the controller follows new connections and moves elephant flows);
- the senders (programs/spread.py, the engines): `connections_per_peer`,
  `spreads` and `choose` (which connection carries the next piece),
  `piece_bytes` (the size messages are cut into), `roce_paths` (UDP source
  ports a RoCE sender sprays over);
- the simulator (sim/network.py): `simulated`, `sim_paths` (how a flow's path
  is picked where the plan has a group: "hash", "per-connection" or
  "least-placed"), `sim_channels`, `sim_faithful` (whether the simulation
  models what the lab does, for the fidelity verdict), and `splits` (the
  step shortcut and NCCL's share take a flow as split evenly over every
  equal-cost path: per-packet spraying and adaptive routing as a fluid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Optional, Sequence, Tuple

from registries import Registry

# the policies, in the order --policy and the schema list them
REGISTRY = Registry("routing policy", "routing policies", key=lambda p: (p.order, p.name))
# class decorator: one instance of the class registered under its name
register = REGISTRY.register


@dataclass
class Lane:
    """What a spreading sender knows of one connection when it picks."""
    waiting: bool           # bytes of its own not yet handed to the kernel
    unsent: int             # in the kernel, not yet sent
    in_flight: int          # in the kernel, unsent or unacknowledged
    last: float             # when it was last given a piece


class Policy:
    """The defaults are ECMP's: the controller hashes each flow onto one of
    the equal-cost paths, senders keep one connection per channel."""
    name: ClassVar[str] = ""
    order: ClassVar[int] = 100         # where --policy lists it
    summary: ClassVar[str] = ""        # one clause for --policy's help and docs
    controller: ClassVar[bool] = True
    moves_elephants: ClassVar[bool] = False
    spreads: ClassVar[bool] = False
    simulated: ClassVar[bool] = True
    why_not_simulated: ClassVar[str] = ""   # when not simulated: the end of one sentence
    sim_paths: ClassVar[str] = "hash"
    sim_faithful: ClassVar[bool] = True
    per_endpoint: ClassVar[bool] = False   # routes each destination endpoint on its own
    splits: ClassVar[bool] = False         # the flow model splits a flow evenly over all paths


    def pin(self, ports: Tuple[int, ...], group: int) -> Tuple[int, ...]:
        """The ports a switch's group towards destination leaf `group` (1-based)
        keeps of its equal-cost `ports`: all of them, to hash over."""
        return ports

    def pin_endpoint(self, groups: Tuple[Tuple[int, ...], ...], endpoint: int, stride: int,
                     whole: int) -> int:
        """Under a policy that routes `per_endpoint`: the one port a switch
        sends destination number `endpoint` out of, among its next-hop
        `groups` (parallel links to one switch each), given the divisors the
        plan works out for its place on the way (controller/routes.py
        `_strides`): `stride` for the choice of switch, `whole` for the link
        among parallel ones. Here, the first port."""
        return groups[0][0]

    def connections_per_peer(self, channels: int, entropy: int) -> int:
        """Connections a rank opens to each peer (routing.entropy: how many a
        spreading sender wants to choose among)."""
        return channels

    def sim_channels(self, channels: int, entropy: int) -> int:
        """Connections per peer the simulator replays."""
        return channels

    def piece_bytes(self, piece_bytes: int, smallest: int) -> int:
        """The piece size engines cut messages into, given the experiment's
        and the smallest that keeps the largest message within its piece cap."""
        return piece_bytes

    def roce_paths(self, entropy: int) -> int:
        """UDP source ports a RoCE sender sprays its packets over (0: one
        per connection, as a NIC's queue pair keeps)."""
        return 0

    def choose(self, lanes: Sequence[Lane], current: int, now: float, gap: float,
               lowat: int, draw: Callable[[int], int]) -> Optional[int]:
        """A spreading sender's pick: the connection to carry the next piece,
        or None to wait for one to be ready. `current` is the last piece's
        connection, `draw(n)` a random index below n."""
        raise NotImplementedError(f"the {self.name} policy does not spread pieces")

    def watched(self, current: int, connections: int) -> Sequence[int]:
        """The connections a waiting spreader watches for room."""
        return range(connections)


def ready(lanes: Sequence[Lane], lowat: int):
    """The connections that can take a piece now."""
    return [i for i, lane in enumerate(lanes) if not lane.waiting and lane.unsent < lowat]
