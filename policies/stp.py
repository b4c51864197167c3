"""Spanning tree: plain L2 learning switches running STP, no controller: one
tree, every other link blocked. A baseline only: the simulator routes as the
controller does, so it cannot replay it."""

from policies.policy import Policy, register


@register
class SpanningTree(Policy):
    name = "stp"
    order = 2
    summary = ("stp runs plain L2 switches with spanning tree and no controller "
               "(a baseline)")
    controller = False
    simulated = False
    why_not_simulated = "spanning tree is only emulated"
