"""leaf-spine: the 2-tier (folded) Clos. Servers leaf by leaf, every NIC of a
server on its leaf; every leaf cabled to every spine, ``uplinks_per_spine``
links each. The planner's clos-2; the Clos model's ``server`` wiring."""

from topologies.kinds.base import FabricKind, Layout, ceil_div, parallel, register, to_spines


@register
class LeafSpine(FabricKind):
    name = "leaf-spine"
    order = 10
    required = ("spines", "leaves", "servers_per_leaf")
    optional = ("uplinks_per_spine",)
    links = ("leaf_spine",)
    cut = ("leaf_spine",)
    group = ("leaf", "leaves", "each leaf with its servers")
    planner_design = "clos-2"
    clos_wiring = "server"
    clos_wiring_name = "server per leaf"

    def layout(self, spec):
        f, nics = spec["fabric"], spec["server"]["nics"]
        homes = [[l] * nics for l in range(1, f["leaves"] + 1)
                 for _ in range(f["servers_per_leaf"])]
        return Layout({"leaf": f["leaves"], "spine": f["spines"]}, homes,
                      to_spines(f["leaves"], f["spines"], f["uplinks_per_spine"] or 1))

    def head(self, fabric):
        f = fabric.spec["fabric"]
        return (f"{f['spines']} spines x {f['leaves']} leaves x {f['servers_per_leaf']} "
                f"servers per leaf{parallel(f)}")

    def clos_leaves(self, servers, nics, down):
        return ceil_div(servers * nics, down)

    def clos_leaf(self, server, nic, nics, down):
        return (server * nics + nic) // down
