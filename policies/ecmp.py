"""ECMP: the controller puts every equal-cost path in a select group and
Open vSwitch hashes each flow (its 5-tuple) onto one: the default."""

from policies.policy import Policy, register


@register
class Ecmp(Policy):
    name = "ecmp"
    order = 0
    summary = "ecmp hashes each flow onto one of the equal-cost paths"
