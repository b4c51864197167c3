"""The pictures of a run, from its results: the fabric with every link
coloured by how busy it was, busbw against message size, and the step
timeline of the last iteration per rank. PNG files in the results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

from matplotlib.figure import Figure

from topologies.fabric import Fabric
from topologies.roles import role
from report import plots
from report.busbw_plot import busbw_figure
from report.canvas import save
from report.fabric_plot import fabric_figure
from report.timeline_plot import timeline_figure
from runs.record import RunRecord

def fabric_nodes(fabric: Fabric) -> List[Tuple[str, int]]:
    return ([(h.name, 0) for h in fabric.endpoints]
            + [(s.name, role(s.role).tier) for s in fabric.switches])


def link_utilisation(fabric: Fabric, links: Dict[str, dict]) -> List[Tuple[str, str, object]]:
    """(a, b, busiest direction's mean utilisation) per link; None where
    neither end was measured (a server's own egress is not sampled)."""
    edges = []
    for link in fabric.links:
        seen = [links[i]["mean_util"] for i in (link.a_intf, link.b_intf) if i in links]
        edges.append((link.a, link.b, max(seen) if seen else None))
    return edges


def figures(fabric: Fabric, result: RunRecord,
            curves: Dict[str, Sequence[Tuple[int, float]]] = None) -> Iterator[Tuple[str, Figure]]:
    """(file name, figure) of each figure of a run, one at a time: fabric.png
    (links during the largest size, where it has per-link figures: a size
    NCCL's model priced has none), busbw.png (its sizes the verdict does
    not quote ringed with their flags) and, when the rank agents recorded
    one, timeline.png. Nothing when the run has no sizes."""
    runs = result.runs
    if not runs:
        return
    largest = runs[-1]
    exp = result.experiment
    label = f"{exp['collective']} ({exp['algorithm']})"
    if largest["links"]:
        yield "fabric.png", fabric_figure(
            fabric_nodes(fabric), link_utilisation(fabric, largest["links"]),
            title=f"{fabric.name}: mean link utilisation during {label}, "
                  f"{plots.size_label(largest['size_bytes'])}B")
    own = f"{fabric.name} {label}"
    if curves:
        own = label                   # the compared curves are named "collective (algorithm)"
    else:
        curves = {own: [(r["size_bytes"], r["busbw_gbps"]) for r in runs]}
    flagged = {r["size_bytes"]: r["flags"] for r in runs if r.get("flags")}
    yield "busbw.png", busbw_figure(
        curves, title=f"{exp['collective']}: bus bandwidth by message size",
        link_gbps=result.link_rate_mbit / 8e3,
        flagged={own: flagged} if flagged and own in curves else None)
    timeline = result.timeline
    if timeline and timeline["events"]:
        yield "timeline.png", timeline_figure(
            timeline["events"],
            title=f"{label}, {plots.size_label(timeline['size_bytes'])}B, "
                  f"{len(result.ranks)} ranks: the last iteration, step by step")


def write_figures(fabric: Fabric, result: RunRecord, folder: Path,
                  curves: Dict[str, Sequence[Tuple[int, float]]] = None) -> List[Path]:
    """Each of `figures` as a PNG in `folder`, drawn and written one at a
    time. Returns the files written."""
    folder = Path(folder)
    return [save(fig, folder / name) for name, fig in figures(fabric, result, curves)]
