"""Figures as PNG files: the fabric coloured by link utilisation, bus bandwidth
against message size, and a collective's per-rank step timeline.

Every function takes plain data (lists, dicts, numbers and strings, no project
objects), writes one PNG to `path` and returns it as a `pathlib.Path`:

    draw_fabric(nodes, edges, path, title="", unit="utilisation")
        nodes: [(name, tier)], tier 0 = GPU/server endpoints, 1 = node switch,
        2 = leaf, 3 = spine/aggregation, 4 = core (numbers may be skipped).
        edges: [(a, b, value)], value a share of the link's rate (0..1, a little
        over 1 is fine) or None for no data (drawn grey and dashed).
    plot_busbw(curves, path, title="", link_gbps=None)
        curves: {label: [(size_bytes, busbw_GBps)]}, one line per label.
    plot_timeline(events, path, title="")
        events: [{"rank", "start", "end", "kind", optional "step", "label",
        "phase"}], times in seconds from the iteration start.
    is_png(path) -> bool, png_size(path) -> (width, height)

Empty or malformed input raises ValueError with a sentence saying what was
wrong. Drawing uses matplotlib's object API (`Figure` on an Agg canvas), so no
window is opened, no global pyplot state is touched and nothing can block on a
display; each figure is cleared once written. The PNG is written to a
temporary file beside `path` and renamed into place, so `path` is never left
half-written.
"""

from __future__ import annotations

import math
import numbers
import os
import struct
import sys
import zlib
from pathlib import Path

import matplotlib

if "matplotlib.pyplot" not in sys.modules:       # never switch a backend already in use
    matplotlib.use("Agg")

import numpy as np                                              # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg    # noqa: E402
from matplotlib.cm import ScalarMappable                        # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402
from matplotlib.colors import ListedColormap, Normalize, to_rgb    # noqa: E402
from matplotlib.figure import Figure                            # noqa: E402
from matplotlib.lines import Line2D                             # noqa: E402
from matplotlib.patches import Patch                            # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter  # noqa: E402

__all__ = ["draw_fabric", "plot_busbw", "plot_timeline", "is_png", "png_size", "size_label"]

DPI = 100
MAX_WIDTH_IN = 24.0          # figure width cap: 2400 px at DPI
MAX_HEIGHT_IN = 40.0
LABEL_ALL_UP_TO = 32         # a tier with more nodes labels only its first and last

TIER_NAMES = {0: "GPU / server", 1: "node", 2: "leaf", 3: "spine / agg", 4: "core"}
TIER_COLOURS = {0: "#4c72b0", 1: "#55a868", 2: "#8172b2", 3: "#c44e52", 4: "#937860"}
UTILISATION_LABEL = "link utilisation (busiest direction, share of rate)"
NO_DATA_COLOUR = "#9e9e9e"
OVER_COLOUR = "#3b0f70"      # utilisation above 100 %

KIND_COLOURS = {"send": "#1f77b4", "recv": "#ff7f0e", "reduce": "#d62728", "copy": "#2ca02c"}
SPARE_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
PHASE_COLOURS = ["#a6cee3", "#fdbf6f", "#b2df8a", "#cab2d6", "#fb9a99", "#ffff99", "#d9d9d9"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"     # the empty IEND chunk every PNG ends with


# --- shared helpers -----------------------------------------------------------

def _plain(text) -> str:
    """Text shown as written: a '$' would otherwise start matplotlib's mathtext."""
    return str(text).replace("$", r"\$")


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, not {value!r}.")
    return float(value)


def _finite(value, what: str) -> float:
    number = _number(value, what)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be finite, not {value!r}.")
    return number


def _new_figure(width: float, height: float) -> Figure:
    width = min(max(width, 3.0), MAX_WIDTH_IN)
    height = min(max(height, 2.5), MAX_HEIGHT_IN)
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path) -> Path:
    """Write `fig` as PNG to `path` (atomically), then clear it."""
    out = Path(path)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, format="png", dpi=DPI, facecolor="white")
        os.replace(tmp, out)
    finally:
        fig.clear()
        if tmp.exists():
            tmp.unlink()
    return out


# --- the fabric ---------------------------------------------------------------

def _utilisation_cmap() -> ListedColormap:
    """Light yellow for idle links through dark red for saturated ones; over 100 % purple."""
    base = matplotlib.colormaps["YlOrRd"]
    return ListedColormap(base(np.linspace(0.15, 1.0, 256)), name="utilisation").with_extremes(
        over=OVER_COLOUR)


def _check_nodes(nodes) -> dict:
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


def _check_edges(edges, tiers: dict) -> list:
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
        if value is not None:
            value = _number(value, f"the value of edge {a!r} - {b!r}")
            if math.isnan(value):
                value = None                      # a measurement that failed: no data
            elif math.isinf(value) or value < 0:
                raise ValueError(f"the value of edge {a!r} - {b!r} must be finite and >= 0, "
                                 f"not {value!r}.")
        checked.append((a, b, value))
    return checked


def draw_fabric(nodes, edges, path, title: str = "", unit: str = "utilisation") -> Path:
    """Draw the fabric as tiers stacked bottom (tier 0) to top, nodes of a tier
    left to right in the given order, and colour each edge by its value.

    With unit "utilisation" (the default) values are shares of the link rate:
    the colour scale runs 0-100 %, a value above 1 takes the over-colour, and
    the colorbar reads as link utilisation. Any other unit is used as the
    colorbar's label and the scale runs from 0 to the largest value. An edge
    whose value is None (or NaN) is drawn grey and dashed as "no data".
    """
    tiers = _check_nodes(nodes)
    links = _check_edges(edges, tiers)

    levels = sorted(set(tiers.values()))
    row = {tier: i for i, tier in enumerate(levels)}            # skipped tiers leave no gap
    members = {tier: [name for name, t in tiers.items() if t == tier] for tier in levels}
    widest = max(len(m) for m in members.values())

    width = min(MAX_WIDTH_IN, max(7.0, 0.36 * widest + 2.5))
    fig = _new_figure(width, 1.0 + 1.35 * len(levels))
    ax = fig.add_subplot()
    plot_width_in = width - 2.5                                 # about, less tick labels and colorbar

    pos, spacing_in = {}, {}
    for tier, names in members.items():
        n = len(names)
        spacing_in[tier] = plot_width_in / n
        for i, name in enumerate(names):
            pos[name] = ((i + 0.5) / n, row[tier])

    # Edges: no data first, then by value, so the busiest links are drawn on top.
    utilisation = unit == "utilisation"
    values = [v for _, _, v in links if v is not None]
    top = 1.0 if utilisation else max(values, default=0.0) or 1.0
    cmap = _utilisation_cmap() if utilisation else matplotlib.colormaps["viridis"]
    norm = Normalize(vmin=0.0, vmax=top)

    pair_count = {}
    for a, b, _ in links:
        pair = frozenset((tiers[a], tiers[b]))
        pair_count[pair] = pair_count.get(pair, 0) + 1

    def thinness(a, b):
        # 1 where nodes are half an inch apart and their tiers share few edges,
        # down to 0.3 where crowded.
        apart = min(spacing_in[tiers[a]], spacing_in[tiers[b]]) / 0.5
        sparse = math.sqrt(64 / pair_count[frozenset((tiers[a], tiers[b]))])
        return min(1.0, max(0.3, min(apart, sparse)))

    missing = [(a, b) for a, b, v in links if v is None]
    if missing:
        ax.add_collection(LineCollection(
            [(pos[a], pos[b]) for a, b in missing], colors=NO_DATA_COLOUR,
            linewidths=[1.0 * thinness(a, b) for a, b in missing],
            linestyles=(0, (3, 3)), zorder=1))
    measured = sorted(((a, b, v) for a, b, v in links if v is not None), key=lambda e: e[2])
    if measured:
        ax.add_collection(LineCollection(
            [(pos[a], pos[b]) for a, b, _ in measured],
            colors=cmap(norm(np.array([v for _, _, v in measured]))),
            linewidths=[(0.7 + 2.3 * min(v / top, 1.2)) * thinness(a, b) for a, b, v in measured],
            alpha=0.9, zorder=2))

    # Nodes: circles for endpoints, squares for switches, sized to their spacing.
    for tier, names in members.items():
        size_pt = min(12.0, max(2.0, 0.55 * spacing_in[tier] * 72))
        xy = np.array([pos[name] for name in names])
        ax.scatter(xy[:, 0], xy[:, 1], s=size_pt ** 2, marker="o" if tier == 0 else "s",
                   color=TIER_COLOURS.get(tier, "#666666"), edgecolors="black",
                   linewidths=0.4 if size_pt > 4 else 0.2, zorder=3)
        shown = names if len(names) <= LABEL_ALL_UP_TO else [names[0], names[-1]]
        longest_in = max(len(str(n)) for n in shown) * 7 * 0.6 / 72
        rotate = len(names) <= LABEL_ALL_UP_TO and longest_in > 0.9 * spacing_in[tier]
        for name in shown:
            x, y = pos[name]
            ax.annotate(_plain(name), (x, y), xytext=(0, -(size_pt / 2 + 2)),
                        textcoords="offset points", ha="center", va="top", fontsize=7,
                        rotation=90 if rotate else 0, zorder=4,
                        bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.7))

    ax.set_xlim(0, 1)
    ax.set_ylim(-0.75, len(levels) - 0.45)
    ax.set_xticks([])
    ax.set_yticks(range(len(levels)))
    ax.set_yticklabels([f"{TIER_NAMES.get(t, f'tier {t}')} ({len(members[t])})" for t in levels])
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)

    mappable = ScalarMappable(norm=norm, cmap=cmap)
    over = any(v > top for v in values)
    bar = fig.colorbar(mappable, ax=ax, fraction=0.04, pad=0.01, extend="max" if over else "neither")
    bar.set_label(UTILISATION_LABEL if utilisation else _plain(unit), fontsize=8)
    if utilisation:
        bar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    if missing:
        ax.legend(handles=[Line2D([], [], color=NO_DATA_COLOUR, linestyle=(0, (3, 3)),
                                  label="no data")], loc="upper right", fontsize=7, frameon=False)

    summary = f"{len(tiers)} nodes, {len(links)} links"
    if measured:
        a, b, v = measured[-1]
        shown_v = f"{v:.0%}" if utilisation else f"{v:g}"
        summary += f"; busiest {_plain(a)} - {_plain(b)}: {shown_v}"
    if missing:
        summary += f"; {len(missing)} without data"
    if title:
        fig.suptitle(_plain(title))
    ax.set_title(summary, fontsize=9, loc="left")
    return _save(fig, path)


# --- bus bandwidth ------------------------------------------------------------

def size_label(size) -> str:
    """A byte count in powers of 1024: 512, 32K, 1M, 64M, 2G (1.5K when not whole)."""
    size = float(size)
    for unit, suffix in ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")):
        if size >= unit:
            return f"{size / unit:g}{suffix}"
    return f"{size:g}"


def _size_ticks(low: float, high: float) -> list:
    """Powers of two from low to high, every few so there are at most about 12."""
    kmin, kmax = math.floor(math.log2(low)), math.ceil(math.log2(high))
    if kmin == kmax:
        kmin, kmax = kmin - 1, kmax + 1
    step = max(1, math.ceil((kmax - kmin + 1) / 12))
    ticks = [2.0 ** k for k in range(kmin, kmax + 1) if k % step == 0]
    return ticks if len(ticks) >= 2 else [2.0 ** kmin, 2.0 ** kmax]


def plot_busbw(curves, path, title: str = "", link_gbps=None) -> Path:
    """Bus bandwidth (GB/s) against message size (log2 axis, K/M/G ticks), one
    line with markers per curve, and the link rate as a dashed line if given.
    A NaN bandwidth leaves a gap in its curve."""
    if not curves:
        raise ValueError("plot_busbw needs at least one curve {label: [(size_bytes, busbw_GBps)]}: "
                         "got none.")
    checked = {}
    for label, points in curves.items():
        if points is None or len(points) == 0:
            raise ValueError(f"curve {label!r} has no points (size_bytes, busbw_GBps).")
        rows = []
        for point in points:
            try:
                size, bw = point
            except (TypeError, ValueError):
                raise ValueError(f"curve {label!r}: a point must be (size_bytes, busbw_GBps), "
                                 f"not {point!r}.") from None
            size = _finite(size, f"curve {label!r}: a message size")
            if size <= 0:
                raise ValueError(f"curve {label!r}: message size {size:g} is not > 0 "
                                 "(the size axis is logarithmic).")
            bw = _number(bw, f"curve {label!r}: the bus bandwidth at {size:g} B")
            if math.isinf(bw) or bw < 0:
                raise ValueError(f"curve {label!r}: the bus bandwidth at {size:g} B must be "
                                 f"finite and >= 0, not {bw!r}.")
            rows.append((size, bw))
        checked[label] = sorted(rows)
    if link_gbps is not None:
        link_gbps = _finite(link_gbps, "link_gbps")
        if link_gbps <= 0:
            raise ValueError(f"link_gbps must be > 0 GB/s, not {link_gbps:g}.")

    fig = _new_figure(8.5, 5.0)
    ax = fig.add_subplot()
    total = 0
    for i, (label, rows) in enumerate(checked.items()):
        sizes, bws = zip(*rows)
        total += len(rows)
        ax.plot(sizes, bws, marker=MARKERS[i % len(MARKERS)], markersize=5, linewidth=1.5,
                label=_plain(label))
    if link_gbps is not None:
        ax.axhline(link_gbps, color="black", linestyle="--", linewidth=1.0,
                   label=f"link rate ({link_gbps:g} GB/s)")

    sizes = [s for rows in checked.values() for s, _ in rows]
    low, high = min(sizes), max(sizes)
    ax.set_xscale("log", base=2)
    ax.set_xlim(low / 2 ** 0.4, high * 2 ** 0.4)
    ax.xaxis.set_major_locator(FixedLocator(_size_ticks(low, high)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_label(x)))
    ax.xaxis.set_minor_locator(NullLocator())
    bws = [b for rows in checked.values() for _, b in rows if not math.isnan(b)]
    peak = max(bws + ([link_gbps] if link_gbps else []), default=0.0)
    ax.set_ylim(0, peak * 1.12 if peak > 0 else 1.0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.legend(loc="best" if total <= 500 else "lower right", fontsize=8)
    if title:
        ax.set_title(_plain(title))
    return _save(fig, path)


# --- step timeline ------------------------------------------------------------

def _check_events(events) -> list:
    if events is None or len(events) == 0:
        raise ValueError("plot_timeline needs at least one event {rank, start, end, kind}: "
                         "the event list is empty.")
    checked = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise ValueError(f"event {i} must be a dict with rank, start, end and kind, not {ev!r}.")
        for key in ("rank", "start", "end", "kind"):
            if key not in ev:
                raise ValueError(f"event {i} has no {key!r} (each event needs rank, start, end "
                                 "and kind).")
        rank = ev["rank"]
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
            raise ValueError(f"event {i}: rank must be an int >= 0, not {rank!r}.")
        start = _finite(ev["start"], f"event {i}: start")
        end = _finite(ev["end"], f"event {i}: end")
        if end < start:
            raise ValueError(f"event {i} (rank {rank}) ends at {end:g} s, before it starts "
                             f"at {start:g} s.")
        step, label, phase = ev.get("step"), ev.get("label"), ev.get("phase")
        checked.append(dict(rank=int(rank), start=start, end=end, kind=str(ev["kind"]),
                            step=step, label=None if label is None else str(label),
                            phase=None if phase is None else str(phase)))
    return checked


def _rows_for(spans: list) -> list:
    """Greedy rows so that overlapping (start, end) spans never share a row."""
    ends, rows = [], []
    for start, end in spans:
        for r, last in enumerate(ends):
            if start >= last:
                ends[r] = end
                rows.append(r)
                break
        else:
            ends.append(end)
            rows.append(len(ends) - 1)
    return rows


def _darker(colour, factor=0.65):
    return tuple(c * factor for c in to_rgb(colour))


def plot_timeline(events, path, title: str = "") -> Path:
    """A Gantt chart of one iteration: a lane per rank (rank 0 at the top),
    bars coloured by kind, time in milliseconds. Events carrying a "phase" get
    a thin phase-coloured strip under their bar, and a band above the lanes
    shows each phase's span across all ranks. A bar wide enough shows its
    "label" (or "s<step>") inside."""
    evs = _check_events(events)
    ms = 1e3
    ranks = sorted({e["rank"] for e in evs})
    lane = {r: i for i, r in enumerate(ranks)}
    kinds = list(dict.fromkeys(e["kind"] for e in evs))
    spare = iter(SPARE_COLOURS)
    colour = {k: KIND_COLOURS.get(k) or next(spare, "#7f7f7f") for k in kinds}
    phases = list(dict.fromkeys(e["phase"] for e in evs if e["phase"] is not None))
    phase_colour = {p: PHASE_COLOURS[i % len(PHASE_COLOURS)] for i, p in enumerate(phases)}

    t0 = min(0.0, min(e["start"] for e in evs)) * ms
    t1 = max(e["end"] for e in evs) * ms
    span = (t1 - t0) or 1e-3
    xlim = (t0, t1 + 0.02 * span)

    phase_spans = []
    for p in phases:
        mine = [e for e in evs if e["phase"] == p]
        phase_spans.append((min(e["start"] for e in mine) * ms, max(e["end"] for e in mine) * ms, p))
    phase_spans.sort()
    phase_rows = _rows_for([(s, e) for s, e, _ in phase_spans])
    n_phase_rows = max(phase_rows, default=-1) + 1

    lane_in = 0.32 if len(ranks) <= 64 else max(0.04, 30.0 / len(ranks))
    height = 1.6 + lane_in * len(ranks) + 0.3 * n_phase_rows
    fig = _new_figure(11.0, height)
    if n_phase_rows:
        grid = fig.add_gridspec(2, 1, height_ratios=[0.3 * n_phase_rows, lane_in * len(ranks)])
        band = fig.add_subplot(grid[0])
        ax = fig.add_subplot(grid[1], sharex=band)
    else:
        band, ax = None, fig.add_subplot()

    # Bars, one collection per kind: fast however many events there are.
    bar_top, bar_bottom = (-0.38, 0.22) if phases else (-0.38, 0.38)
    for kind in kinds:
        verts = []
        for e in evs:
            if e["kind"] == kind:
                y = lane[e["rank"]]
                x0, x1 = e["start"] * ms, e["end"] * ms
                verts.append([(x0, y + bar_top), (x1, y + bar_top),
                              (x1, y + bar_bottom), (x0, y + bar_bottom)])
        ax.add_collection(PolyCollection(verts, facecolors=colour[kind],
                                         edgecolors=[_darker(colour[kind])], linewidths=0.4))
    if phases:
        for p in phases:
            strips = {}
            for e in evs:
                if e["phase"] == p:
                    s, t = strips.get(e["rank"], (e["start"], e["end"]))
                    strips[e["rank"]] = (min(s, e["start"]), max(t, e["end"]))
            verts = [[(s * ms, lane[r] + 0.27), (t * ms, lane[r] + 0.27),
                      (t * ms, lane[r] + 0.40), (s * ms, lane[r] + 0.40)]
                     for r, (s, t) in strips.items()]
            ax.add_collection(PolyCollection(verts, facecolors=phase_colour[p],
                                             edgecolors="none"))

    # Labels inside bars wide enough to hold them, and only while there are few events.
    if len(evs) <= 500:
        for e in evs:
            text = e["label"] or (f"s{e['step']}" if e["step"] is not None else None)
            if text and (e["end"] - e["start"]) * ms >= 0.04 * span:
                ax.text((e["start"] + e["end"]) / 2 * ms, lane[e["rank"]] + (bar_top + bar_bottom) / 2,
                        _plain(text), ha="center", va="center", fontsize=6, color="white",
                        clip_on=True)

    ax.set_xlim(*xlim)
    ax.set_ylim(len(ranks) - 0.5, -0.5)                         # rank 0 at the top
    every = max(1, math.ceil(len(ranks) / 48))
    shown = list(range(0, len(ranks), every))
    ax.set_yticks(shown)
    ax.set_yticklabels([f"rank {ranks[i]}" for i in shown], fontsize=8 if len(ranks) <= 32 else 6)
    ax.set_xlabel("time since iteration start (ms)")
    ax.grid(True, axis="x", linewidth=0.5, alpha=0.4)
    ax.set_axisbelow(True)

    handles = [Patch(facecolor=colour[k], edgecolor=_darker(colour[k]), label=_plain(k))
               for k in kinds]
    fig.legend(handles=handles, title="kind", loc="outside right upper", fontsize=8)

    if band is not None:
        for (s, t, p), r in zip(phase_spans, phase_rows):
            band.broken_barh([(s, t - s)], (r + 0.1, 0.8), facecolors=phase_colour[p],
                             edgecolors=_darker(phase_colour[p]), linewidths=0.5)
            band.text((s + t) / 2, r + 0.5, _plain(p), ha="center", va="center", fontsize=7,
                      clip_on=True)
            for x in (s, t):
                ax.axvline(x, color="#555555", linewidth=0.6, linestyle=":", zorder=0)
        band.set_ylim(n_phase_rows, 0)
        band.set_yticks([])
        band.set_ylabel("phase", fontsize=8, rotation=0, ha="right", va="center")
        band.tick_params(axis="x", labelbottom=False)
        for side in ("top", "right", "left"):
            band.spines[side].set_visible(False)
        fig.legend(handles=[Patch(facecolor=phase_colour[p], label=_plain(p)) for p in phases],
                   title="phase", loc="outside right lower", fontsize=8)

    if title:
        (band or ax).set_title(_plain(title))
    return _save(fig, path)


# --- PNG checks ---------------------------------------------------------------

def png_size(path) -> tuple:
    """(width, height) of a complete PNG file; ValueError if it is not one.

    Checks the 8-byte signature, that the first chunk is a well-formed IHDR
    (length 13, CRC matching) with width and height > 0, and that the file
    ends with the IEND chunk, so a truncated file is refused."""
    try:
        with open(path, "rb") as f:
            head = f.read(33)
            f.seek(0, os.SEEK_END)
            length = f.tell()
            f.seek(max(0, length - len(PNG_IEND)))
            tail = f.read()
    except OSError as err:
        raise ValueError(f"{path} cannot be read: {err.strerror or err}.") from None
    if len(head) < 33 or head[:8] != PNG_SIGNATURE:
        raise ValueError(f"{path} does not start with the PNG signature.")
    chunk_len, chunk_type = struct.unpack(">I4s", head[8:16])
    if chunk_len != 13 or chunk_type != b"IHDR":
        raise ValueError(f"{path} has no IHDR chunk first.")
    (crc,) = struct.unpack(">I", head[29:33])
    if zlib.crc32(head[12:29]) != crc:
        raise ValueError(f"{path} has a corrupt IHDR chunk (CRC mismatch).")
    width, height = struct.unpack(">II", head[16:24])
    if not (0 < width < 2 ** 31 and 0 < height < 2 ** 31):
        raise ValueError(f"{path} declares an image of {width} x {height} pixels.")
    if length < 33 + len(PNG_IEND) or tail != PNG_IEND:
        raise ValueError(f"{path} does not end with the IEND chunk: it is truncated.")
    return width, height


def is_png(path) -> bool:
    """True if `path` is a complete PNG file with a non-empty image (see png_size)."""
    try:
        png_size(path)
    except ValueError:
        return False
    return True
