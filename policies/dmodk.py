"""Static destination routing, D-mod-K, as InfiniBand's subnet manager
routes a fat tree: every switch sends traffic for the k-th endpoint behind
a leaf up its (k mod n)-th equal-cost port, so destinations are spread over
the spines by number, never by hash, and every packet to one endpoint takes
the same path. A shift permutation (a ring's step) then never collides on
a non-blocking fabric, parallel links between two switches included. Routed by the controller as plain output flows; the
simulator follows the same plan."""

from typing import Tuple

from policies.policy import Policy, register


@register
class DModK(Policy):
    name = "dmodk"
    order = 6
    summary = "dmodk sends each destination endpoint up port (its number mod k), as InfiniBand does"
    per_endpoint = True

    def pin_endpoint(self, groups: Tuple[Tuple[int, ...], ...], endpoint: int, stride: int,
                     whole: int) -> int:
        """The next switch by the number over `stride`, mod the switches; the
        link among its parallel ones by the number over `whole`, mod them:
        the same digit on the way up and down, so parallel links share the
        destinations as single links do."""
        group = groups[endpoint // stride % len(groups)]
        return group[endpoint // whole % len(group)]
