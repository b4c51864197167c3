"""The step-timeline figure: a Gantt chart of one iteration, a lane per rank
with bars coloured by kind, phase strips under the bars and a band above the
lanes showing each phase's span across all ranks."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from report.canvas import darker, finite, new_figure, plain, save, wrapped

KIND_COLOURS = {"send": "#1f77b4", "recv": "#ff7f0e", "reduce": "#d62728", "copy": "#2ca02c"}
SPARE_COLOURS = ["#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]
PHASE_COLOURS = ["#a6cee3", "#fdbf6f", "#b2df8a", "#cab2d6", "#fb9a99", "#ffff99", "#d9d9d9"]
MS = 1e3                     # seconds to the axis' milliseconds
LABELS_UP_TO = 500           # more events than this: no text inside the bars
LANES_WIDTH_IN = 8.3         # about, the lanes' width in an 11 in figure less ticks and legends
CHAR_WIDTH = 0.62            # a character's width, as a share of the font size (about)
SENDS = ("send",)            # kinds drawn in a lane's upper half when they overlap the others


def text_ms(text: str, fontsize: float, span_ms: float) -> float:
    """About how many ms of lanes showing `span_ms` `text` covers, a margin included."""
    return (len(text) * CHAR_WIDTH * fontsize + 4) / 72 / LANES_WIDTH_IN * span_ms


def fits(text: str, fontsize: float, width_ms: float, span_ms: float) -> bool:
    """Whether `text` at `fontsize` fits (with a little margin) across a bar
    `width_ms` long on lanes showing `span_ms`: what keeps labels from
    running over their bar and into the next one."""
    return width_ms >= text_ms(text, fontsize, span_ms)


@dataclass
class _Plan:
    """What the chart shows, worked out before drawing: lanes, colours, the
    time range (ms) and the phases' spans with the band row of each."""
    evs: list
    ranks: list
    lane: dict
    kinds: list
    colour: dict
    phases: list
    phase_colour: dict
    span: float
    xlim: tuple
    phase_spans: list
    phase_rows: list
    split: bool = False       # sends and receives overlap in a lane: each its half of it

    @property
    def n_phase_rows(self) -> int:
        return max(self.phase_rows, default=-1) + 1

    @property
    def bar_extent(self) -> tuple:
        """(top, bottom) of a bar relative to its lane; shorter above phase strips."""
        return (-0.38, 0.22) if self.phases else (-0.38, 0.38)

    def extent(self, kind: str) -> tuple:
        """(top, bottom) of an event's bar: the lane's, or where sends and
        receives overlap (a ring step does both at once), sends in its upper
        half and everything else in its lower half, side by side in time."""
        top, bottom = self.bar_extent
        if not self.split:
            return top, bottom
        mid = (top + bottom) / 2
        return (top, mid - 0.02) if kind in SENDS else (mid + 0.02, bottom)


# --- input --------------------------------------------------------------------

def check_events(events) -> list:
    if events is None or len(events) == 0:
        raise ValueError("plot_timeline needs at least one event {rank, start, end, kind}: "
                         "the event list is empty.")
    return [_check_event(i, ev) for i, ev in enumerate(events)]


def _check_event(i: int, ev) -> dict:
    if not isinstance(ev, dict):
        raise ValueError(f"event {i} must be a dict with rank, start, end and kind, not {ev!r}.")
    for key in ("rank", "start", "end", "kind"):
        if key not in ev:
            raise ValueError(f"event {i} has no {key!r} (each event needs rank, start, end "
                             "and kind).")
    rank = ev["rank"]
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0:
        raise ValueError(f"event {i}: rank must be an int >= 0, not {rank!r}.")
    start = finite(ev["start"], f"event {i}: start")
    end = finite(ev["end"], f"event {i}: end")
    if end < start:
        raise ValueError(f"event {i} (rank {rank}) ends at {end:g} s, before it starts "
                         f"at {start:g} s.")
    step, label, phase = ev.get("step"), ev.get("label"), ev.get("phase")
    return dict(rank=int(rank), start=start, end=end, kind=str(ev["kind"]),
                step=step, label=None if label is None else str(label),
                phase=None if phase is None else str(phase))


# --- planning -----------------------------------------------------------------

def rows_for(spans: list) -> list:
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


def _phase_spans(evs: list, phases: list) -> list:
    """(first start, last end, phase) per phase in ms, across all ranks, by start."""
    spans = []
    for p in phases:
        mine = [e for e in evs if e["phase"] == p]
        spans.append((min(e["start"] for e in mine) * MS, max(e["end"] for e in mine) * MS, p))
    spans.sort()
    return spans


def _overlapping(evs: list) -> bool:
    """Whether, in some lane, a send overlaps in time an event of another kind."""
    by_rank: dict = {}
    for e in evs:
        by_rank.setdefault(e["rank"], []).append(e)
    for mine in by_rank.values():
        sends = [e for e in mine if e["kind"] in SENDS]
        others = [e for e in mine if e["kind"] not in SENDS]
        if any(a["start"] < b["end"] and b["start"] < a["end"] for a in sends for b in others):
            return True
    return False


def _plan(evs: list) -> _Plan:
    ranks = sorted({e["rank"] for e in evs})
    kinds = list(dict.fromkeys(e["kind"] for e in evs))
    spare = iter(SPARE_COLOURS)
    phases = list(dict.fromkeys(e["phase"] for e in evs if e["phase"] is not None))
    t0 = min(0.0, min(e["start"] for e in evs)) * MS
    t1 = max(e["end"] for e in evs) * MS
    span = (t1 - t0) or 1e-3
    phase_spans = _phase_spans(evs, phases)
    return _Plan(
        evs=evs, ranks=ranks, lane={r: i for i, r in enumerate(ranks)}, kinds=kinds,
        colour={k: KIND_COLOURS.get(k) or next(spare, "#7f7f7f") for k in kinds},
        phases=phases,
        phase_colour={p: PHASE_COLOURS[i % len(PHASE_COLOURS)] for i, p in enumerate(phases)},
        span=span, xlim=(t0, t1 + 0.02 * span), phase_spans=phase_spans,
        phase_rows=rows_for([(s, e) for s, e, _ in phase_spans]), split=_overlapping(evs))


def _new_timeline_figure(plan: _Plan) -> tuple:
    """(figure, phase band axes or None, lanes axes), the height growing with
    the ranks and phase rows."""
    n_ranks, n_phase_rows = len(plan.ranks), plan.n_phase_rows
    lane_in = 0.32 if n_ranks <= 64 else max(0.04, 30.0 / n_ranks)
    fig = new_figure(11.0, 1.6 + lane_in * n_ranks + 0.3 * n_phase_rows)
    if not n_phase_rows:
        return fig, None, fig.add_subplot()
    grid = fig.add_gridspec(2, 1, height_ratios=[0.3 * n_phase_rows, lane_in * n_ranks])
    band = fig.add_subplot(grid[0])
    return fig, band, fig.add_subplot(grid[1], sharex=band)


# --- drawing ------------------------------------------------------------------

def _draw_bars(ax, plan: _Plan) -> None:
    """The events' bars, one collection per kind: fast however many events there are;
    the kinds of longer bars first, so that a short bar (a reduce) is drawn over
    a long one of its half-lane (the recv it belongs to), not hidden under it."""
    def mean_ms(kind):
        mine = [e["end"] - e["start"] for e in plan.evs if e["kind"] == kind]
        return sum(mine) / len(mine)
    for z, kind in enumerate(sorted(plan.kinds, key=mean_ms, reverse=True)):
        bar_top, bar_bottom = plan.extent(kind)
        verts = []
        for e in plan.evs:
            if e["kind"] == kind:
                y = plan.lane[e["rank"]]
                x0, x1 = e["start"] * MS, e["end"] * MS
                verts.append([(x0, y + bar_top), (x1, y + bar_top),
                              (x1, y + bar_bottom), (x0, y + bar_bottom)])
        ax.add_collection(PolyCollection(verts, facecolors=plan.colour[kind], zorder=2 + z * 0.01,
                                         edgecolors=[darker(plan.colour[kind])], linewidths=0.4))


def _draw_phase_strips(ax, plan: _Plan) -> None:
    """Under each rank's bars, a thin strip per phase from its first to its last event."""
    lane = plan.lane
    for p in plan.phases:
        strips = {}
        for e in plan.evs:
            if e["phase"] == p:
                s, t = strips.get(e["rank"], (e["start"], e["end"]))
                strips[e["rank"]] = (min(s, e["start"]), max(t, e["end"]))
        verts = [[(s * MS, lane[r] + 0.27), (t * MS, lane[r] + 0.27),
                  (t * MS, lane[r] + 0.40), (s * MS, lane[r] + 0.40)]
                 for r, (s, t) in strips.items()]
        ax.add_collection(PolyCollection(verts, facecolors=plan.phase_colour[p],
                                         edgecolors="none"))


def _label_bars(ax, plan: _Plan) -> None:
    """Labels inside bars wide enough to hold them, never over another
    label of the same lane (bars of a lane may overlap: a recv under its
    reduce), and only while there are few events."""
    if len(plan.evs) > LABELS_UP_TO:
        return
    span = plan.xlim[1] - plan.xlim[0]
    placed: dict = {}
    for e in plan.evs:
        text = e["label"] or (f"s{e['step']}" if e["step"] is not None else None)
        if not text or not fits(text, 6, (e["end"] - e["start"]) * MS, span):
            continue
        bar_top, bar_bottom = plan.extent(e["kind"])
        mid, half = (e["start"] + e["end"]) / 2 * MS, text_ms(text, 6, span) / 2
        taken = placed.setdefault((e["rank"], bar_top), [])
        if any(mid - half < b and a < mid + half for a, b in taken):
            continue
        taken.append((mid - half, mid + half))
        ax.text(mid, plan.lane[e["rank"]] + (bar_top + bar_bottom) / 2, plain(text),
                ha="center", va="center", fontsize=6, color="white", clip_on=True)


def _lane_axes(ax, plan: _Plan) -> None:
    """Time across, ranks down (rank 0 at the top), at most about 48 rank ticks."""
    ranks = plan.ranks
    ax.set_xlim(*plan.xlim)
    ax.set_ylim(len(ranks) - 0.5, -0.5)
    every = max(1, math.ceil(len(ranks) / 48))
    shown = list(range(0, len(ranks), every))
    ax.set_yticks(shown)
    ax.set_yticklabels([f"rank {ranks[i]}" for i in shown], fontsize=8 if len(ranks) <= 32 else 6)
    ax.set_xlabel("time since iteration start (ms)")
    ax.grid(True, axis="x", linewidth=0.5, alpha=0.4)
    ax.set_axisbelow(True)


def _kind_legend(fig, plan: _Plan) -> None:
    handles = [Patch(facecolor=plan.colour[k], edgecolor=darker(plan.colour[k]), label=plain(k))
               for k in plan.kinds]
    fig.legend(handles=handles, title="kind (send above,\nreceive below: at once)" if plan.split
               else "kind", loc="outside right upper", fontsize=8, title_fontsize=8)


def _draw_phase_band(band, ax, plan: _Plan) -> None:
    """Each phase's span as a bar in its band row, named when the name fits,
    with dotted lines marking its start and end across the lanes."""
    for (s, t, p), r in zip(plan.phase_spans, plan.phase_rows):
        colour = plan.phase_colour[p]
        band.broken_barh([(s, t - s)], (r + 0.1, 0.8), facecolors=colour,
                         edgecolors=darker(colour), linewidths=0.5)
        if fits(p, 7, t - s, plan.xlim[1] - plan.xlim[0]):      # else the legend names it
            band.text((s + t) / 2, r + 0.5, plain(p), ha="center", va="center", fontsize=7,
                      clip_on=True)
        for x in (s, t):
            ax.axvline(x, color="#555555", linewidth=0.6, linestyle=":", zorder=0)
    band.set_ylim(plan.n_phase_rows, 0)
    band.set_yticks([])
    band.set_ylabel("phase", fontsize=8, rotation=0, ha="right", va="center")
    band.tick_params(axis="x", labelbottom=False)
    for side in ("top", "right", "left"):
        band.spines[side].set_visible(False)


def _phase_legend(fig, plan: _Plan) -> None:
    fig.legend(handles=[Patch(facecolor=plan.phase_colour[p], label=plain(p)) for p in plan.phases],
               title="phase", loc="outside right lower", fontsize=8)


def timeline_figure(events, title: str = "") -> Figure:
    """The figure plot_timeline writes, for reading what it shows: a Gantt
    chart of one iteration, a lane per rank (rank 0 at the top), bars
    coloured by kind, time in milliseconds. Events carrying a "phase" get a
    thin phase-coloured strip under their bar, and a band above the lanes
    shows each phase's span across all ranks. A bar wide enough shows its
    "label" (or "s<step>") inside."""
    plan = _plan(check_events(events))
    fig, band, ax = _new_timeline_figure(plan)
    _draw_bars(ax, plan)
    if plan.phases:
        _draw_phase_strips(ax, plan)
    _label_bars(ax, plan)
    _lane_axes(ax, plan)
    _kind_legend(fig, plan)
    if band is not None:
        _draw_phase_band(band, ax, plan)
        _phase_legend(fig, plan)
    if title:
        (band if band is not None else ax).set_title(wrapped(title, fig, share=0.75))
    return fig


def plot_timeline(events, path, title: str = "") -> Path:
    """timeline_figure written as a PNG to `path`."""
    return save(timeline_figure(events, title), path)
