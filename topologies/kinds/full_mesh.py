"""full-mesh: every server on a switch of its own, the switches cabled
pairwise (the mesh cables take links.leaf_spine). The counter-example at
small n: n(n-1)/2 cables; the planner's full-mesh design."""

from topologies.kinds.base import FabricError, FabricKind, Layout, register

MAX_MESH = 16               # a full mesh of n switches has n(n-1)/2 links


@register
class FullMesh(FabricKind):
    name = "full-mesh"
    order = 50
    required = ("servers",)
    json_counts = {"servers": {"maximum": MAX_MESH}}
    links = ("leaf_spine",)
    wire_classes = {"mesh": "leaf_spine"}
    cut = ("mesh",)
    group = ("server", "servers", "each server with its switch")
    planner_design = "full-mesh"

    def check(self, spec, source):
        n = spec["fabric"]["servers"]
        if n > MAX_MESH:
            raise FabricError(source, "fabric.servers", (
                f"expected at most {MAX_MESH} servers in a full mesh (it needs n(n-1)/2 links: "
                f"{n * (n - 1) // 2} for {n})"))

    def layout(self, spec):
        n, nics = spec["fabric"]["servers"], spec["server"]["nics"]
        wires = [("mesh", ("leaf", i), ("leaf", j)) for i in range(1, n + 1)
                 for j in range(i + 1, n + 1)]
        return Layout({"leaf": n}, [[s] * nics for s in range(1, n + 1)], wires)

    def head(self, fabric):
        return f"full mesh of {fabric.spec['fabric']['servers']} switches"
