"""single-switch: every server on one switch. The counter-example at small n
(a switch has only so many ports); the planner's single-switch design."""

from topologies.kinds.base import FabricKind, Layout, register


@register
class SingleSwitch(FabricKind):
    name = "single-switch"
    order = 40
    required = ("servers",)
    group = ("switch", "switches", "every server with the one switch")
    planner_design = "single-switch"

    def layout(self, spec):
        nics = spec["server"]["nics"]
        return Layout({"leaf": 1}, [[1] * nics for _ in range(spec["fabric"]["servers"])], [])

    def head(self, fabric):
        return "single switch"
