"""fat-tree: the 3-tier k-ary fat-tree. k pods of k/2 edge (leaf) and k/2
aggregation switches, each edge switch on every aggregation switch of its
pod; (k/2)^2 cores, aggregation switch a of a pod on the cores of group a.
The planner's clos-3, in the Clos model's ``server`` wiring."""

from topologies.kinds.base import FabricKind, Layout, ceil_div, register


@register
class FatTree(FabricKind):
    name = "fat-tree"
    order = 30
    required = ("k",)
    optional = ("servers_per_leaf",)
    links = ("leaf_spine",)
    optional_links = ("spine_core",)      # default: as leaf_spine
    cut = ("spine_core",)
    group = ("pod", "pods", "each pod (its edge and aggregation switches and servers)")
    planner_design = "clos-3"
    clos_wiring = "server"
    clos_wiring_name = "server per leaf"

    def layout(self, spec):
        f, nics = spec["fabric"], spec["server"]["nics"]
        half = f["k"] // 2
        per_edge = f["servers_per_leaf"] or half
        counts = {"leaf": f["k"] * half, "agg": f["k"] * half, "core": half * half}
        homes = [[e] * nics for e in range(1, counts["leaf"] + 1) for _ in range(per_edge)]
        wires = [("leaf_spine", ("leaf", e), ("agg", (e - 1) // half * half + a))
                 for e in range(1, counts["leaf"] + 1) for a in range(1, half + 1)]
        wires += [("spine_core", ("agg", a), ("core", (a - 1) % half * half + c))
                  for a in range(1, counts["agg"] + 1) for c in range(1, half + 1)]
        return Layout(counts, homes, wires)

    def head(self, fabric):
        k = fabric.spec["fabric"]["k"]
        return (f"{k}-ary fat-tree: {k} pods, {len(fabric.leaves)} edge, "
                f"{sum(s.role == 'agg' for s in fabric.switches)} aggregation and "
                f"{sum(s.role == 'core' for s in fabric.switches)} core switches")

    def clos_leaves(self, servers, nics, down):
        return ceil_div(servers * nics, down)

    def clos_leaf(self, server, nic, nics, down):
        return (server * nics + nic) // down
