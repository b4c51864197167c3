"""The pictures of a run, from its results: the fabric with every link
coloured by how busy it was, busbw against message size, and the step
timeline of the last iteration per rank. PNG files in the results folder."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from topologies.fabric import Fabric
from traffic.report import plots

TIER = {"node": 1, "nvswitch": 1, "leaf": 2, "spine": 3, "agg": 3, "core": 4}


def fabric_nodes(fabric: Fabric) -> List[Tuple[str, int]]:
    return ([(h.name, 0) for h in fabric.endpoints]
            + [(s.name, TIER[s.role]) for s in fabric.switches])


def link_utilisation(fabric: Fabric, links: Dict[str, dict]) -> List[Tuple[str, str, object]]:
    """(a, b, busiest direction's mean utilisation) per link; None where
    neither end was measured (a server's own egress is not sampled)."""
    edges = []
    for link in fabric.links:
        seen = [links[i]["mean_util"] for i in (link.a_intf, link.b_intf) if i in links]
        edges.append((link.a, link.b, max(seen) if seen else None))
    return edges


def write_figures(fabric: Fabric, result: dict, folder: Path,
                  curves: Dict[str, Sequence[Tuple[int, float]]] = None) -> List[Path]:
    """fabric.png (links during the largest size), busbw.png and, when the
    rank agents recorded one, timeline.png. Returns the files written."""
    runs = result["runs"]
    if not runs:
        return []
    folder = Path(folder)
    largest = runs[-1]
    exp = result["experiment"]
    label = f"{exp['collective']} ({exp['algorithm']})"
    out = [plots.draw_fabric(
        fabric_nodes(fabric), link_utilisation(fabric, largest["links"]), folder / "fabric.png",
        title=f"{fabric.name}: mean link utilisation during {label}, "
              f"{plots.size_label(largest['size_bytes'])}B")]
    curves = curves or {f"{fabric.name} {label}": [(r["size_bytes"], r["busbw_gbps"])
                                                   for r in runs]}
    out.append(plots.plot_busbw(curves, folder / "busbw.png",
                                title=f"{exp['collective']}: bus bandwidth by message size",
                                link_gbps=result["link_rate_mbit"] / 8e3))
    timeline = result.get("timeline")
    if timeline and timeline["events"]:
        out.append(plots.plot_timeline(
            timeline["events"], folder / "timeline.png",
            title=f"{label}, {plots.size_label(timeline['size_bytes'])}B, "
                  f"{len(result['ranks'])} ranks: the last iteration, step by step"))
    return out
