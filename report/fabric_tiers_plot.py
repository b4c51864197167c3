"""The fabric figure of a large fabric, drawn by tier with aggregates: a
tier of more than FOLD_ABOVE nodes is folded into groups (the groups the
caller names, such as the servers under each leaf, else runs of nodes in
order), and the links between two groups are drawn as one bundle, coloured
by the bundle's max/mean (1 = an even spread over its links, 2 and more
red) and thickened by its mean value. Hundreds of links become a figure of
a bounded number of elements that shows where the spread is uneven."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from report.canvas import new_figure, plain, save, wrapped
from report.fabric_plot import (NO_DATA_COLOUR, NO_DATA_DASHES, TIER_COLOURS, check_edges,
                                check_marks, check_nodes, draw_marks)
from topologies.roles import tier_names

FOLD_ABOVE = 16              # a tier with more nodes (or groups) than this is folded
BLOCKS = 8                   # into at most this many runs of nodes
SPREAD_TOP = 2.0             # max/mean at which a bundle takes the scale's top colour
SPREAD_LABEL = "bundle's max/mean over its links (1 = even spread)"
IDLE_COLOUR = "#d9d9d9"      # a bundle whose links all carried nothing


@dataclass
class Bundle:
    """The links between two groups: their ends, count, measured values."""
    a: str
    b: str
    links: int
    values: list

    @property
    def mean(self):
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def spread(self):
        """max/mean of the values; None with no data or nothing carried."""
        mean = self.mean
        return max(self.values) / mean if mean else None


# --- folding ------------------------------------------------------------------

def _runs(names: list, label) -> dict:
    """{name: its run's label}: `names` in order cut into at most BLOCKS runs."""
    size = math.ceil(len(names) / BLOCKS)
    out = {}
    for i in range(0, len(names), size):
        run = names[i:i + size]
        name = label(run)
        out.update({n: name for n in run})
    return out


def fold(tiers: dict, groups=None) -> dict:
    """{node: the group it is drawn in}: a tier of at most FOLD_ABOVE nodes
    keeps them; a larger one takes `groups` (node -> name) where given,
    then, while it has more than FOLD_ABOVE groups, runs of them."""
    groups = groups or {}
    out = {}
    for tier in sorted(set(tiers.values())):
        names = [n for n, t in tiers.items() if t == tier]
        if len(names) <= FOLD_ABOVE:
            out.update({n: n for n in names})
            continue
        mine = {n: str(groups.get(n, n)) for n in names}
        order = list(dict.fromkeys(mine.values()))
        if len(order) > FOLD_ABOVE:
            runs = _runs(order, _run_name)
            mine = {n: runs[g] for n, g in mine.items()}
        out.update(mine)
    return out


def _run_name(run: list) -> str:
    """'first..last' of a run of groups (its node count added by the drawing),
    the words they share said once: 'GPUs on leaf1..leaf16'."""
    if len(run) == 1:
        return run[0]
    first, last = str(run[0]), str(run[-1])
    shared = len(first[:len(first) - len(first.lstrip())])
    while shared < min(len(first), len(last)) and first[shared] == last[shared]:
        shared += 1
    cut = first.rfind(" ", 0, shared + 1) + 1          # at a word's start
    return f"{first}..{last[cut:]}"


def bundles(links: list, group: dict) -> tuple:
    """([Bundle] between groups in the order first met, links inside one group)."""
    found, inside = {}, 0
    for a, b, value in links:
        ga, gb = group[a], group[b]
        if ga == gb:
            inside += 1
            continue
        key = (ga, gb) if (gb, ga) not in found else (gb, ga)
        bundle = found.setdefault(key, Bundle(key[0], key[1], 0, []))
        bundle.links += 1
        if value is not None:
            bundle.values.append(value)
    return list(found.values()), inside


# --- drawing ------------------------------------------------------------------

def _layout(tiers: dict, group: dict) -> tuple:
    """(tiers present bottom first, {tier: [group]}, {group: (x, row)},
    {group: nodes in it})."""
    levels = sorted(set(tiers.values()))
    members, count = {}, {}
    for name, tier in tiers.items():
        g = group[name]
        if g not in count:
            members.setdefault(tier, []).append(g)
        count[g] = count.get(g, 0) + 1
    pos = {g: ((i + 0.5) / len(members[tier]), row) for row, tier in enumerate(levels)
           for i, g in enumerate(members[tier])}
    return levels, members, pos, count


def _draw_bundles(ax, found: list, pos: dict, norm: Normalize, cmap) -> None:
    """No-data bundles dashed grey, idle ones light grey, the rest coloured
    by their spread and thickened by their mean (a share of 1 at most 3 pt)."""
    none = [b for b in found if not b.values]
    idle = [b for b in found if b.values and b.spread is None]
    shown = sorted((b for b in found if b.spread is not None), key=lambda b: b.spread)
    if none:
        ax.add_collection(LineCollection([(pos[b.a], pos[b.b]) for b in none], zorder=1,
                                         colors=NO_DATA_COLOUR, linestyles=NO_DATA_DASHES,
                                         linewidths=1.0))
    if idle:
        ax.add_collection(LineCollection([(pos[b.a], pos[b.b]) for b in idle], zorder=1,
                                         colors=IDLE_COLOUR, linewidths=0.8))
    if shown:
        ax.add_collection(LineCollection(
            [(pos[b.a], pos[b.b]) for b in shown], zorder=2, alpha=0.9,
            colors=cmap(norm(np.array([b.spread for b in shown]))),
            linewidths=[0.8 + 2.2 * min(b.mean, 1.2) for b in shown]))


def _draw_groups(ax, levels: list, members: dict, pos: dict, count: dict) -> None:
    """A square per group (bigger for more nodes) and its name with its size."""
    for tier in levels:
        xy = np.array([pos[g] for g in members[tier]])
        sizes = [min(14.0, 6.0 + 2.0 * math.log2(count[g])) ** 2 for g in members[tier]]
        ax.scatter(xy[:, 0], xy[:, 1], s=sizes, marker="o" if tier == 0 else "s",
                   color=TIER_COLOURS.get(tier, "#666666"), edgecolors="black",
                   linewidths=0.4, zorder=3)
        turn = len(members[tier]) > 8
        # characters a label may take across its share of the axes (7 pt: ~4.3 px a character)
        room = max(8, int(ax.figure.get_figwidth() * 100 * 0.8 / len(members[tier]) / 5.2))
        for g in members[tier]:
            text = g if count[g] == 1 else f"{g} ({count[g]})"
            if not turn and len(text) > room:
                text = "\n".join(textwrap.wrap(text, room, break_on_hyphens=False))
            ax.annotate(plain(text), pos[g], xytext=(0, -9), textcoords="offset points",
                        ha="right" if turn else "center", va="top", fontsize=7,
                        rotation=30 if turn else 0, rotation_mode="anchor", zorder=4,
                        bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.7))


def _tier_label(tier: int, groups: list, count: dict) -> str:
    """'leaf (8)', or 'GPU / server (256 in 8 groups)' for a folded tier."""
    n = sum(count[g] for g in groups)
    folded = "" if n == len(groups) else f" in {len(groups)} groups"
    return f"{tier_names().get(tier, f'tier {tier}')} ({n}{folded})"


def _axes(ax, levels: list, members: dict, count: dict) -> None:
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.8, len(levels) - 0.45)
    ax.set_xticks([])
    ax.set_yticks(range(len(levels)))
    ax.set_yticklabels([_tier_label(t, members[t], count) for t in levels])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)


def _legend_and_bar(fig, ax, found: list, norm: Normalize, cmap) -> None:
    over = any(b.spread is not None and b.spread > SPREAD_TOP for b in found)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, fraction=0.04, pad=0.01,
                       extend="max" if over else "neither")
    bar.set_label(SPREAD_LABEL, fontsize=8)
    handles = [Line2D([], [], color="#555555", linewidth=w, label=text) for w, text in
               ((0.8, "thin: idle-ish"), (3.0, "thick: busy (mean of the bundle)"))]
    if any(b.values and b.spread is None for b in found):
        handles.append(Line2D([], [], color=IDLE_COLOUR, label="carried nothing"))
    if any(not b.values for b in found):
        handles.append(Line2D([], [], color=NO_DATA_COLOUR, linestyle=NO_DATA_DASHES,
                              label="no data"))
    ax.legend(handles=handles, loc="upper right", fontsize=7, frameon=False)


def _summary(n_nodes: int, n_links: int, found: list, groups: int, inside: int) -> str:
    summary = f"{n_nodes} nodes, {n_links} links as {len(found)} bundles between {groups} groups"
    spread = [b for b in found if b.spread is not None]
    if spread:
        worst = max(spread, key=lambda b: b.spread)
        summary += (f"; worst spread {plain(worst.a)} - {plain(worst.b)}: max/mean "
                    f"{worst.spread:.2f} over {worst.links} links")
    if inside:
        summary += f"; {inside} links inside a group not drawn"
    return summary


def fabric_tiers_figure(nodes, edges, title: str = "", groups=None, marks=None) -> Figure:
    """The large fabric by tier with aggregates: nodes and edges as
    fabric_figure takes them (values a share of a rate or of the busiest
    link), `groups` {node: group name} for the nodes of a tier too large to
    draw one by one, `marks` {switch: its up-links' max/mean}, shown on its
    group as the worst of the group's. Each bundle of links between two
    groups is coloured by its max/mean (0 to SPREAD_TOP, over: the top
    colour and an arrow on the bar) and thickened by its mean."""
    tiers = check_nodes(nodes)
    links = check_edges(edges, tiers)
    marks = check_marks(marks, tiers)
    group = fold(tiers, groups)
    found, inside = bundles(links, group)
    levels, members, pos, count = _layout(tiers, group)
    norm, cmap = Normalize(vmin=1.0, vmax=SPREAD_TOP), matplotlib.colormaps["RdYlGn_r"]

    fig = new_figure(14.0, 1.4 + 1.5 * len(levels))
    ax = fig.add_subplot()
    _draw_bundles(ax, found, pos, norm, cmap)
    _draw_groups(ax, levels, members, pos, count)
    worst = {}
    for name, ratio in marks.items():
        worst[group[name]] = max(ratio, worst.get(group[name], 0.0))
    draw_marks(ax, worst, pos)
    _axes(ax, levels, members, count)
    _legend_and_bar(fig, ax, found, norm, cmap)
    if title:
        fig.suptitle(wrapped(title, fig))
    ax.set_title(_summary(len(tiers), len(links), found, len(pos), inside), fontsize=9,
                 loc="left")
    return fig


def draw_fabric_tiers(nodes, edges, path, title: str = "", groups=None, marks=None) -> Path:
    """fabric_tiers_figure written as a PNG to `path`."""
    return save(fabric_tiers_figure(nodes, edges, title, groups, marks), path)
