"""The pictures of a run, from its run records: the fabric with every link
coloured by its bytes against the busiest link between the same tiers and
each switch's up-link spread written beside it (a large fabric by tier, in
bundles), busbw against message size (measured beside simulated, flagged
sizes marked), and the step timeline of the last iteration (per rank, or
per server when the ranks are many). Every title says whether the run was
measured or simulated. PNG files in the results folder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from matplotlib.figure import Figure

from collectives.metrics import imbalance
from topologies.fabric import Fabric
from topologies.roles import role
from report import plots
from report.busbw_plot import MEASURED, SIMULATED, busbw_figure
from report.canvas import save
from report.fabric_plot import SHARE, fabric_figure
from report.fabric_tiers_plot import fabric_tiers_figure
from report.timeline_heatmap import timeline_busy_figure
from report.timeline_plot import timeline_figure
from runs.record import ABSENT, RunRecord

LARGE_NODES = 128            # a fabric with more nodes (or LARGE_LINKS links) is drawn by tier
LARGE_LINKS = 256
AGGREGATE_RANKS = 64         # a timeline of more ranks is drawn per server


def kind(result: RunRecord) -> str:
    """"simulated" for a run of the simulator, "measured" for a lab's."""
    return "simulated" if result.simulated is not ABSENT else "measured"


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


def link_shares(fabric: Fabric, links: Dict[str, dict]) -> List[Tuple[str, str, object]]:
    """(a, b, bytes of its busiest direction over those of the busiest link
    between the same two tiers) per link, 0..1; None where neither end was
    measured. Two up-links of one leaf read 1.0 and 0.5 where their
    utilisation may read the same."""
    tier = dict(fabric_nodes(fabric))
    sent = []
    for link in fabric.links:
        seen = [links[i]["tx_bytes"] for i in (link.a_intf, link.b_intf) if i in links]
        sent.append((link.a, link.b, max(seen) if seen else None))
    def pair(a, b):
        return tuple(sorted((tier[a], tier[b])))
    busiest: Dict[tuple, float] = {}
    for a, b, n in sent:
        busiest[pair(a, b)] = max(busiest.get(pair(a, b), 0), n or 0)
    return [(a, b, None if n is None else n / busiest[pair(a, b)] if busiest[pair(a, b)] else 0.0)
            for a, b, n in sent]


def uplink_spread(fabric: Fabric, links: Dict[str, dict]) -> Dict[str, float]:
    """{switch: max/mean of the bytes it sent on its up-links} (links to a
    higher tier), for switches of two up-links or more that sent any: the
    ECMP imbalance of the fabric table, for every tier."""
    tier = dict(fabric_nodes(fabric))
    ups: Dict[str, list] = {}
    for link in fabric.links:
        for me, intf, other in ((link.a, link.a_intf, link.b), (link.b, link.b_intf, link.a)):
            if tier[me] > 0 and tier[other] > tier[me] and intf in links:
                ups.setdefault(me, []).append(links[intf]["tx_bytes"])
    return {s: imbalance(v) for s, v in ups.items() if len(v) > 1 and sum(v) > 0}


def endpoint_groups(fabric: Fabric) -> Dict[str, str]:
    """{endpoint: "on <leaf>"}: the servers (or GPUs) under each leaf, the
    groups a large fabric's endpoints are folded into."""
    what = "GPUs" if fabric.gpus_per_server > 1 else "servers"
    return {h.name: f"{what} on {h.leaf}" for h in fabric.endpoints if h.leaf}


def busiest_text(fabric: Fabric, result: RunRecord) -> str:
    """The busiest link of the largest size as the run's table gives it: a
    lab's fabric table its peak utilisation (and here its mean beside), the
    simulated fabric table its mean."""
    links = result.runs[-1]["links"]
    mean = max((u for _, _, u in link_utilisation(fabric, links) if u is not None), default=0.0)
    if kind(result) == "simulated":
        return f"busiest link at mean {mean:.0%} of its rate"
    peak = max((l.get("peak_util", 0.0) for l in links.values()), default=0.0)
    return f"busiest link at peak {peak:.0%} (mean {mean:.0%}) of its rate"


def fabric_png(fabric: Fabric, result: RunRecord, label: str) -> Figure:
    """fabric.png: the links during the largest size; a large fabric by tier."""
    largest = result.runs[-1]
    links = largest["links"]
    nodes = fabric_nodes(fabric)
    title = (f"{fabric.name}, {kind(result)}: bytes per link during {label}, "
             f"{plots.size_label(largest['size_bytes'])}B\n{busiest_text(fabric, result)}; "
             "x: a switch's up-links' max/mean")
    edges, marks = link_shares(fabric, links), uplink_spread(fabric, links)
    if len(nodes) > LARGE_NODES or len(edges) > LARGE_LINKS:
        return fabric_tiers_figure(nodes, edges, title, endpoint_groups(fabric), marks)
    return fabric_figure(nodes, edges, title, unit=SHARE, marks=marks)


def _simulated_points(result: RunRecord) -> Optional[list]:
    """The simulator's busbw per size beside a measured run (busbw scales as
    1/time), None for a simulated run or when no size was simulated."""
    if result.simulated is not ABSENT:
        return None
    points = [(r["size_bytes"], r["busbw_gbps"] * r["time_s"] / r["simulated_s"]
               if r.get("simulated_s") and r.get("time_s") else math.nan) for r in result.runs]
    return points if any(not math.isnan(b) for _, b in points) else None


def busbw_png(fabric: Fabric, records: Dict[str, RunRecord]) -> Figure:
    """busbw.png: a curve per algorithm, labelled measured or simulated, the
    simulator's beside each measured one, every flagged size marked."""
    curves, simulated, flagged = {}, {}, {}
    for alg, record in records.items():
        exp = record.experiment
        name = f"{exp['collective']} ({alg})"
        if len(records) == 1:
            name = f"{fabric.name} {name}"
        label = name + (SIMULATED if kind(record) == "simulated" else MEASURED)
        curves[label] = [(r["size_bytes"], r["busbw_gbps"]) for r in record.runs]
        beside = _simulated_points(record)
        if beside:
            simulated[label] = beside
        marks = {r["size_bytes"]: r["flags"] for r in record.runs if r.get("flags")}
        if marks:
            flagged[label] = marks
    first = next(iter(records.values()))
    how = kind(first) + (", the simulator's dashed beside" if simulated else "")
    return busbw_figure(curves, title=f"{first.experiment['collective']}, {how}: bus bandwidth "
                                      f"by message size ({fabric.network.title})",
                        link_gbps=first.link_rate_mbit / 8e3, flagged=flagged or None,
                        simulated=simulated or None)


def timeline_png(fabric: Fabric, result: RunRecord, label: str) -> Figure:
    """timeline.png: per rank, or per server (a heat map of the share of its
    ranks busy) past AGGREGATE_RANKS ranks."""
    timeline = result.timeline
    n = len(result.ranks)
    head = (f"{label}, {plots.size_label(timeline['size_bytes'])}B, {n} ranks, {kind(result)}: "
            "the last iteration")
    if n <= AGGREGATE_RANKS:
        return timeline_figure(timeline["events"], title=f"{head}, step by step")
    box = {h.name: h.box or h.name for h in fabric.endpoints}
    lane_of = {i: box.get(name, name) for i, name in enumerate(result.ranks)}
    return timeline_busy_figure(timeline["events"], title=f"{head}, busy share per server",
                                lane_of=lane_of)


def figures(fabric: Fabric, result: RunRecord,
            compared: Dict[str, RunRecord] = None) -> Iterator[Tuple[str, Figure]]:
    """(file name, figure) of each figure of a run, one at a time: fabric.png
    (links during the largest size, where it has per-link figures: a size
    NCCL's model priced has none), busbw.png (with a curve per algorithm of
    `compared`, {algorithm: record}, the further algorithms swept) and,
    when the engine recorded one, timeline.png. Nothing when the run has no
    sizes."""
    runs = result.runs
    if not runs:
        return
    exp = result.experiment
    label = f"{exp['collective']} ({exp['algorithm']})"
    if runs[-1]["links"]:
        yield "fabric.png", fabric_png(fabric, result, label)
    yield "busbw.png", busbw_png(fabric, {exp["algorithm"]: result, **(compared or {})})
    timeline = result.timeline
    if timeline and timeline["events"]:
        yield "timeline.png", timeline_png(fabric, result, label)


def write_figures(fabric: Fabric, result: RunRecord, folder: Path,
                  compared: Dict[str, RunRecord] = None) -> List[Path]:
    """Each of `figures` as a PNG in `folder`, drawn and written one at a
    time. Returns the files written."""
    folder = Path(folder)
    return [save(fig, folder / name) for name, fig in figures(fabric, result, compared)]
