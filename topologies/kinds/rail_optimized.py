"""rail-optimized: scalable units of servers; NIC r of every server of a unit
on the unit's rail leaf r, so GPU r of every server in a unit shares a leaf;
spines above all leaves. A wiring of the planner's clos-2 (the Clos model's
``rail`` wiring, at 2 or 3 tiers)."""

from topologies.kinds.base import FabricKind, Layout, ceil_div, parallel, register, to_spines


@register
class RailOptimized(FabricKind):
    name = "rail-optimized"
    order = 20
    required = ("spines", "servers_per_unit")
    optional = ("units", "uplinks_per_spine")
    links = ("leaf_spine",)
    cut = ("leaf_spine",)
    group = ("unit", "units", "each unit (its servers and rail leaves)")
    planner_design = "clos-2"
    clos_wiring = "rail"
    clos_wiring_name = "rail-optimized"
    clos_several_nics = True            # with one NIC, a unit's rail leaf is a leaf of servers

    def layout(self, spec):
        f, nics = spec["fabric"], spec["server"]["nics"]
        units = f["units"] or 1
        homes = [[u * nics + r for r in range(1, nics + 1)]
                 for u in range(units) for _ in range(f["servers_per_unit"])]
        return Layout({"leaf": units * nics, "spine": f["spines"]}, homes,
                      to_spines(units * nics, f["spines"], f["uplinks_per_spine"] or 1))

    def head(self, fabric):
        f = fabric.spec["fabric"]
        return (f"rail-optimized: {f['units'] or 1} unit(s) of {f['servers_per_unit']} "
                f"servers on {len(fabric.leaves)} rail leaves, {f['spines']} spines"
                f"{parallel(f)}")

    def clos_leaves(self, servers, nics, down):
        return ceil_div(servers, down) * nics

    def clos_leaf(self, server, nic, nics, down):
        return server // down * nics + nic

    def clos_port(self, server, nic, nics, down):
        return server % down
