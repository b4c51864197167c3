"""timeline.png: the last iteration's steps per rank, or per server (a
heat map of the share of its ranks busy) past AGGREGATE_RANKS ranks."""

from __future__ import annotations

from typing import Optional

from matplotlib.figure import Figure

from report import plots
from report.figures import FIGURES, RunFigure, kind, network_title
from report.timeline_heatmap import timeline_busy_figure
from report.timeline_plot import timeline_figure
from runs.record import RunRecord
from topologies.fabric import Fabric

AGGREGATE_RANKS = 64         # a timeline of more ranks is drawn per server


@FIGURES.register
class TimelinePng(RunFigure):
    """timeline.png, when the engine recorded the last iteration."""
    name, order = "timeline.png", 3

    def draw(self, fabric: Fabric, result: RunRecord, compared, label: str) -> Optional[Figure]:
        timeline = result.timeline
        if not (timeline and timeline["events"]):
            return None
        return timeline_png(fabric, result, label)


def timeline_png(fabric: Fabric, result: RunRecord, label: str) -> Figure:
    """timeline.png: per rank, or per server (a heat map of the share of its
    ranks busy) past AGGREGATE_RANKS ranks."""
    timeline = result.timeline
    n = len(result.ranks)
    head = (f"{label}, {plots.size_label(timeline['size_bytes'])}B, {n} ranks, {kind(result)} "
            f"({network_title(fabric)}): the last iteration")
    if n <= AGGREGATE_RANKS:
        return timeline_figure(timeline["events"], title=f"{head}, step by step")
    box = {h.name: h.box or h.name for h in fabric.endpoints}
    lane_of = {i: box.get(name, name) for i, name in enumerate(result.ranks)}
    return timeline_busy_figure(timeline["events"], title=f"{head}, busy share per server",
                                lane_of=lane_of)
