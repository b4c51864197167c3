"""The fabric figure: tiers stacked bottom to top, nodes of a tier left to
right, every link coloured (and thickened) by its utilisation, its bytes as
a share of the busiest link between the same tiers, or another value, with
a colorbar, each switch's up-links' max/mean written beside it when given,
and a one-line summary naming the busiest link or the worst spread."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection
from matplotlib.colors import Colormap, ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from report.canvas import MAX_WIDTH_IN, new_figure, number, plain, save, wrapped
from topologies.roles import tier_names

LABEL_ALL_UP_TO = 32         # a tier with more nodes labels only its first and last

TIER_COLOURS = {0: "#4c72b0", 1: "#55a868", 2: "#8172b2", 3: "#c44e52", 4: "#937860"}
UTILISATION_LABEL = "link utilisation (busiest direction, share of rate)"
SHARE = "share"              # the unit of bytes as a share of the busiest link between the same tiers
SHARE_LABEL = "bytes, share of the busiest link between its tiers"
PERCENT_UNITS = ("utilisation", SHARE)
IMBALANCE_WARN = 1.25        # an up-link max/mean from here on is written in red
IMBALANCE_COLOURS = ("#333333", "#d62728")
MARK_GID = "up-links max/mean"   # the gid of the marks' texts, to tell them from node names
NO_DATA_COLOUR = "#9e9e9e"
OVER_COLOUR = "#3b0f70"      # utilisation above 100 %
SATURATED_REL_EPS = 1e-9     # a share this close to 1 is a saturated link (float error), not over
NO_DATA_DASHES = (0, (3, 3))


@dataclass
class _Layout:
    """Where the nodes go: the tiers present bottom to top, each tier's nodes
    in order, every node's (x, row) and each tier's node spacing in inches."""
    levels: list
    members: dict
    pos: dict
    spacing_in: dict
    width: float


@dataclass
class _Scale:
    """How a value becomes a colour: utilisation or share 0-100 % (`percent`),
    or 0 to the largest value."""
    utilisation: bool
    percent: bool
    values: list
    top: float
    cmap: Colormap
    norm: Normalize


# --- input --------------------------------------------------------------------

def check_nodes(nodes) -> dict:
    if nodes is None or len(nodes) == 0:
        raise ValueError("draw_fabric needs at least one node (name, tier): the node list is empty.")
    tiers = {}
    for i, node in enumerate(nodes):
        try:
            name, tier = node
        except (TypeError, ValueError):
            raise ValueError(f"node {i} must be a pair (name, tier), not {node!r}.") from None
        if isinstance(tier, bool) or not isinstance(tier, numbers.Integral) or tier < 0:
            raise ValueError(f"node {name!r} has tier {tier!r}: a tier is an int >= 0 "
                             "(0 endpoints, 1 node switch, 2 leaf, 3 spine, 4 core).")
        if name in tiers:
            raise ValueError(f"node {name!r} is listed twice.")
        tiers[name] = int(tier)
    return tiers


def check_edges(edges, tiers: dict) -> list:
    if edges is None or len(edges) == 0:
        raise ValueError("draw_fabric needs at least one edge (a, b, value): the edge list is empty.")
    checked = []
    for i, edge in enumerate(edges):
        try:
            a, b, value = edge
        except (TypeError, ValueError):
            raise ValueError(f"edge {i} must be a triple (a, b, value), not {edge!r}.") from None
        for end in (a, b):
            if end not in tiers:
                raise ValueError(f"edge {i} ({a!r} - {b!r}) names {end!r}, which is not in the nodes.")
        if a == b:
            raise ValueError(f"edge {i} joins {a!r} to itself.")
        checked.append((a, b, _edge_value(value, a, b)))
    return checked


def _edge_value(value, a, b):
    """An edge's value as a float >= 0, or None for no data (None or NaN)."""
    if value is None:
        return None
    value = number(value, f"the value of edge {a!r} - {b!r}")
    if math.isnan(value):
        return None                               # a measurement that failed: no data
    if math.isinf(value) or value < 0:
        raise ValueError(f"the value of edge {a!r} - {b!r} must be finite and >= 0, "
                         f"not {value!r}.")
    return value


# --- layout and colours -------------------------------------------------------

def _layout(tiers: dict) -> _Layout:
    """A row per tier present (skipped tiers leave no gap), nodes spread evenly
    across it, and the figure width the widest tier needs (capped)."""
    levels = sorted(set(tiers.values()))
    row = {tier: i for i, tier in enumerate(levels)}
    members = {tier: [name for name, t in tiers.items() if t == tier] for tier in levels}
    widest = max(len(m) for m in members.values())
    width = min(MAX_WIDTH_IN, max(7.0, 0.36 * widest + 2.5))
    plot_width_in = width - 2.5                                 # about, less tick labels and colorbar
    pos, spacing_in = {}, {}
    for tier, names in members.items():
        n = len(names)
        spacing_in[tier] = plot_width_in / n
        for i, name in enumerate(names):
            pos[name] = ((i + 0.5) / n, row[tier])
    return _Layout(levels, members, pos, spacing_in, width)


def _utilisation_cmap() -> ListedColormap:
    """Light yellow for idle links through dark red for saturated ones; over 100 % purple."""
    base = matplotlib.colormaps["YlOrRd"]
    return ListedColormap(base(np.linspace(0.15, 1.0, 256)), name="utilisation").with_extremes(
        over=OVER_COLOUR)


def _saturated_is_one(links: list) -> list:
    """Utilisations within SATURATED_REL_EPS of 1 (1.0000000000000002 from a
    sum of shares) taken as exactly 1: a saturated link, coloured as one,
    not with the over-100 % colour."""
    return [(a, b, 1.0 if v is not None and abs(v - 1.0) <= SATURATED_REL_EPS else v)
            for a, b, v in links]


def _scale(links: list, unit: str) -> _Scale:
    utilisation, percent = unit == "utilisation", unit in PERCENT_UNITS
    values = [v for _, _, v in links if v is not None]
    top = 1.0 if percent else max(values, default=0.0) or 1.0
    cmap = _utilisation_cmap() if percent else matplotlib.colormaps["viridis"]
    return _Scale(utilisation, percent, values, top, cmap, Normalize(vmin=0.0, vmax=top))


def _thinness(links: list, tiers: dict, spacing_in: dict):
    """A width factor per link: 1 where nodes are half an inch apart and their
    tiers share few edges, down to 0.3 where crowded."""
    pair_count = {}
    for a, b, _ in links:
        pair = frozenset((tiers[a], tiers[b]))
        pair_count[pair] = pair_count.get(pair, 0) + 1

    def thinness(a, b):
        apart = min(spacing_in[tiers[a]], spacing_in[tiers[b]]) / 0.5
        sparse = math.sqrt(64 / pair_count[frozenset((tiers[a], tiers[b]))])
        return min(1.0, max(0.3, min(apart, sparse)))
    return thinness


# --- drawing ------------------------------------------------------------------

def _route(pa, pb, points: int = 16):
    """A link's line: straight between tiers; between two nodes of one tier
    (a mesh server's GPUs, a full mesh's switches) an arc below them, deeper
    the farther apart they are, so that links between neighbours and those
    passing over them do not lie on one another."""
    if pa[1] != pb[1]:
        return [pa, pb]
    t = np.linspace(0.0, 1.0, points)
    depth = min(0.4, 1.2 * abs(pb[0] - pa[0]))          # x spans 0..1, tiers 1 apart
    return list(zip(pa[0] + (pb[0] - pa[0]) * t, pa[1] - depth * 4 * t * (1 - t)))


def _draw_links(ax, links: list, pos: dict, scale: _Scale, thinness) -> tuple:
    """No-data links dashed grey first, then the measured ones by value so the
    busiest are drawn on top. Returns (missing pairs, measured links by value)."""
    missing = [(a, b) for a, b, v in links if v is None]
    if missing:
        ax.add_collection(LineCollection(
            [_route(pos[a], pos[b]) for a, b in missing], colors=NO_DATA_COLOUR,
            linewidths=[1.0 * thinness(a, b) for a, b in missing],
            linestyles=NO_DATA_DASHES, zorder=1))
    measured = sorted(((a, b, v) for a, b, v in links if v is not None), key=lambda e: e[2])
    if measured:
        top = scale.top
        ax.add_collection(LineCollection(
            [_route(pos[a], pos[b]) for a, b, _ in measured],
            colors=scale.cmap(scale.norm(np.array([v for _, _, v in measured]))),
            linewidths=[(0.7 + 2.3 * min(v / top, 1.2)) * thinness(a, b) for a, b, v in measured],
            alpha=0.9, zorder=2))
    return missing, measured


def _draw_tier(ax, tier: int, names: list, pos: dict, spacing_in: float) -> None:
    """One tier's nodes, circles for endpoints and squares for switches sized to
    their spacing, then their name labels."""
    size_pt = min(12.0, max(2.0, 0.55 * spacing_in * 72))
    xy = np.array([pos[name] for name in names])
    ax.scatter(xy[:, 0], xy[:, 1], s=size_pt ** 2, marker="o" if tier == 0 else "s",
               color=TIER_COLOURS.get(tier, "#666666"), edgecolors="black",
               linewidths=0.4 if size_pt > 4 else 0.2, zorder=3)
    _label_tier(ax, names, pos, spacing_in, size_pt)


def _label_tier(ax, names: list, pos: dict, spacing_in: float, size_pt: float) -> None:
    """Names under the nodes: all of them in a small tier (turned upright when
    they would overlap), only the first and last in a large one."""
    shown = names if len(names) <= LABEL_ALL_UP_TO else [names[0], names[-1]]
    longest_in = max(len(str(n)) for n in shown) * 7 * 0.6 / 72
    rotate = len(names) <= LABEL_ALL_UP_TO and longest_in > 0.9 * spacing_in
    for name in shown:
        x, y = pos[name]
        ax.annotate(plain(name), (x, y), xytext=(0, -(size_pt / 2 + 2)),
                    textcoords="offset points", ha="center", va="top", fontsize=7,
                    rotation=90 if rotate else 0, zorder=4,
                    bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.7))


def _tier_axes(ax, levels: list, members: dict) -> None:
    """A row per tier labelled with its name and node count; no x axis."""
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.75, len(levels) - 0.45)
    ax.set_xticks([])
    ax.set_yticks(range(len(levels)))
    ax.set_yticklabels([f"{tier_names().get(t, f'tier {t}')} ({len(members[t])})" for t in levels])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)


def _colorbar(fig, ax, scale: _Scale, unit: str) -> None:
    """The colour scale, with an arrow when some value is above its top."""
    mappable = ScalarMappable(norm=scale.norm, cmap=scale.cmap)
    over = any(v > scale.top for v in scale.values)
    bar = fig.colorbar(mappable, ax=ax, fraction=0.04, pad=0.01, extend="max" if over else "neither")
    label = {"utilisation": UTILISATION_LABEL, SHARE: SHARE_LABEL}.get(unit, plain(unit))
    bar.set_label(label, fontsize=8)
    if scale.percent:
        bar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))


def _no_data_legend(ax) -> None:
    ax.legend(handles=[Line2D([], [], color=NO_DATA_COLOUR, linestyle=NO_DATA_DASHES,
                              label="no data")], loc="upper right", fontsize=7, frameon=False)


def draw_marks(ax, marks: dict, pos: dict) -> None:
    """Each switch's up-links' max/mean ("x1.99") above and right of it, in
    red from IMBALANCE_WARN on."""
    for name, ratio in marks.items():
        colour = IMBALANCE_COLOURS[ratio >= IMBALANCE_WARN]
        ax.annotate(f"x{ratio:.2f}", pos[name], xytext=(6, 5), textcoords="offset points",
                    ha="left", va="bottom", fontsize=7, color=colour, fontweight="bold",
                    zorder=5, gid=MARK_GID, bbox=dict(boxstyle="square,pad=0.1", fc="white",
                                                      ec="none", alpha=0.8))


def check_marks(marks, tiers: dict) -> dict:
    """{switch: up-links' max/mean}, each a node's, each a finite number >= 0."""
    checked = {}
    for name, ratio in (marks or {}).items():
        if name not in tiers:
            raise ValueError(f"marks name {name!r}, which is not in the nodes.")
        ratio = number(ratio, f"the up-links' max/mean of {name!r}")
        if not math.isfinite(ratio) or ratio < 0:
            raise ValueError(f"the up-links' max/mean of {name!r} must be finite and >= 0, "
                             f"not {ratio!r}.")
        checked[name] = ratio
    return checked


def _summary(n_nodes: int, n_links: int, missing: list, measured: list, scale: _Scale,
             marks: dict) -> str:
    """'N nodes, M links; busiest a - b: 95%; K without data'; in the share
    unit (where every tier's busiest is 100 %), the worst up-link spread
    instead of the busiest link."""
    summary = f"{n_nodes} nodes, {n_links} links"
    if measured and (scale.utilisation or not scale.percent):
        a, b, v = measured[-1]
        shown_v = f"{v:.0%}" if scale.utilisation else f"{v:g}"
        summary += f"; busiest {plain(a)} - {plain(b)}: {shown_v}"
    if marks:
        worst = max(marks, key=marks.get)
        summary += f"; up-links' max/mean (x) worst {plain(worst)}: {marks[worst]:.2f}"
    if missing:
        summary += f"; {len(missing)} without data"
    return summary


def fabric_figure(nodes, edges, title: str = "", unit: str = "utilisation",
                  marks=None) -> Figure:
    """The figure draw_fabric writes, for reading what it shows: the fabric
    as tiers stacked bottom (tier 0) to top, nodes of a tier left to right in
    the given order, and each edge coloured by its value.

    With unit "utilisation" (the default) values are shares of the link rate:
    the colour scale runs 0-100 %, a value above 1 takes the over-colour, and
    the colorbar reads as link utilisation. With unit SHARE values are a
    link's bytes over the busiest link's between the same tiers, 0-100 %,
    so an uneven spread shows where utilisation would read the same. Any
    other unit is used as the colorbar's label and the scale runs from 0 to
    the largest value. An edge whose value is None (or NaN) is drawn grey
    and dashed as "no data". A utilisation within SATURATED_REL_EPS of 1 is
    a saturated link (100 %). `marks` {switch: its up-links' max/mean}
    writes "x1.99" beside each, red from IMBALANCE_WARN on.
    """
    tiers = check_nodes(nodes)
    links = check_edges(edges, tiers)
    marks = check_marks(marks, tiers)
    if unit == "utilisation":
        links = _saturated_is_one(links)
    layout = _layout(tiers)
    scale = _scale(links, unit)

    fig = new_figure(layout.width, 1.0 + 1.35 * len(layout.levels))
    ax = fig.add_subplot()
    thinness = _thinness(links, tiers, layout.spacing_in)
    missing, measured = _draw_links(ax, links, layout.pos, scale, thinness)
    for tier, names in layout.members.items():
        _draw_tier(ax, tier, names, layout.pos, layout.spacing_in[tier])
    draw_marks(ax, marks, layout.pos)
    _tier_axes(ax, layout.levels, layout.members)
    _colorbar(fig, ax, scale, unit)
    if missing:
        _no_data_legend(ax)

    if title:
        fig.suptitle(wrapped(title, fig))
    ax.set_title(_summary(len(tiers), len(links), missing, measured, scale, marks),
                 fontsize=9, loc="left")
    return fig


def draw_fabric(nodes, edges, path, title: str = "", unit: str = "utilisation",
                marks=None) -> Path:
    """fabric_figure written as a PNG to `path`: the fabric as tiers stacked
    bottom (tier 0) to top, each edge coloured by its value (see fabric_figure)."""
    return save(fabric_figure(nodes, edges, title, unit, marks), path)
