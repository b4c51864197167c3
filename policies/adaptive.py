"""Adaptive routing by the controller: switches send each new connection's
SYN to it, it follows the flows, and moves elephants off busy links onto the
least-loaded equal-cost path (controller/elephants.py). The simulator places
each connection on the path whose links carry the fewest so far."""

from policies.policy import Policy, register


@register
class Adaptive(Policy):
    name = "adaptive"
    order = 5
    summary = "adaptive has the controller move elephant flows off busy links"
    moves_elephants = True
    splits = True
    sim_paths = "least-placed"
