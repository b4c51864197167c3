"""The pictures of a run, from its run records, as PNG files in the results
folder. Each kind of picture is a module of report/ named png_*.py that
registers one `RunFigure` in `FIGURES` (png_fabric: the fabric with every
link coloured by its bytes against the busiest link between the same tiers;
png_busbw: busbw against message size; png_timeline: the last iteration's
steps): a new figure is one new module and its tests. Every title says
whether the run was measured or simulated, and over which network
technology (`network_title`). This module holds what they
share (which links carried what, the busiest link as the tables say it)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from matplotlib.figure import Figure

from collectives.metrics import imbalance
from registries import Registry
from topologies.fabric import Fabric
from topologies.roles import role
from report.canvas import save
from runs.record import ABSENT, RunRecord


class RunFigure:
    """One kind of picture of a run: its file, its place among the others,
    and how it is drawn (None: this run has nothing for it)."""
    name: str = ""              # its file, "fabric.png"
    order: int = 0

    def draw(self, fabric: Fabric, result: RunRecord, compared: Dict[str, RunRecord],
             label: str) -> Optional[Figure]:
        raise NotImplementedError


FIGURES = Registry("figure", "figures", key=lambda f: f.order)


def kind(result: RunRecord) -> str:
    """"simulated" for a run of the simulator, "measured" for a lab's."""
    return "simulated" if result.simulated is not ABSENT else "measured"


def network_title(fabric: Fabric) -> str:
    """The fabric's network technology as every figure's title names it,
    with any option its file set (InfiniBand; RoCEv2 (ecn False)): a
    picture read apart from its run still says what network it priced or
    measured."""
    return fabric.network.describe(fabric.network_settings)


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


def figures(fabric: Fabric, result: RunRecord,
            compared: Dict[str, RunRecord] = None) -> Iterator[Tuple[str, Figure]]:
    """(file name, figure) of each registered figure this run has, in their
    order, one at a time (`compared`: {algorithm: record}, the further
    algorithms swept). Nothing when the run has no sizes."""
    if not result.runs:
        return
    exp = result.experiment
    label = f"{exp['collective']} ({exp['algorithm']})"
    for figure in FIGURES.values():
        drawn = figure.draw(fabric, result, compared or {}, label)
        if drawn is not None:
            yield figure.name, drawn


def write_figures(fabric: Fabric, result: RunRecord, folder: Path,
                  compared: Dict[str, RunRecord] = None) -> List[Path]:
    """Each of `figures` as a PNG in `folder`, drawn and written one at a
    time. Returns the files written."""
    folder = Path(folder)
    return [save(fig, folder / name) for name, fig in figures(fabric, result, compared)]


def _discover() -> None:
    """Import every png_* module of report/: each registers its figure."""
    folder = Path(__file__).parent
    for module in pkgutil.iter_modules([str(folder)]):
        if module.name.startswith("png_"):
            importlib.import_module(f"report.{module.name}")


_discover()
