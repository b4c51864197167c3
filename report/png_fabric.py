"""fabric.png: every switch and endpoint by tier during the largest size,
each link coloured by its bytes against the busiest link between the same
tiers, each switch's up-link max/mean beside it; a large fabric by tier,
its links in bundles (report/fabric_tiers_plot.py)."""

from __future__ import annotations

from typing import Optional

from matplotlib.figure import Figure

from report import plots
from report.fabric_plot import SHARE, fabric_figure
from report.fabric_tiers_plot import fabric_tiers_figure
from report.figures import (FIGURES, RunFigure, busiest_text, endpoint_groups, fabric_nodes,
                            kind, link_shares, network_title, uplink_spread)
from runs.record import RunRecord
from topologies.fabric import Fabric

LARGE_NODES = 128            # a fabric with more nodes (or LARGE_LINKS links) is drawn by tier
LARGE_LINKS = 256


@FIGURES.register
class FabricPng(RunFigure):
    """fabric.png: the links during the largest size, where the run has
    per-link figures (a size NCCL's model priced has none); a large fabric
    by tier."""
    name, order = "fabric.png", 1

    def draw(self, fabric: Fabric, result: RunRecord, compared, label: str) -> Optional[Figure]:
        if not result.runs[-1]["links"]:
            return None
        return fabric_png(fabric, result, label)


def fabric_png(fabric: Fabric, result: RunRecord, label: str) -> Figure:
    """The figure: by tier past LARGE_NODES nodes or LARGE_LINKS links."""
    largest = result.runs[-1]
    links = largest["links"]
    nodes = fabric_nodes(fabric)
    title = (f"{fabric.name} ({network_title(fabric)}), {kind(result)}: bytes per link during "
             f"{label}, {plots.size_label(largest['size_bytes'])}B\n"
             f"{busiest_text(fabric, result)}; "
             "x: a switch's up-links' max/mean")
    edges, marks = link_shares(fabric, links), uplink_spread(fabric, links)
    if len(nodes) > LARGE_NODES or len(edges) > LARGE_LINKS:
        return fabric_tiers_figure(nodes, edges, title, endpoint_groups(fabric), marks)
    return fabric_figure(nodes, edges, title, unit=SHARE, marks=marks)
