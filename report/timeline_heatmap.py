"""The step timeline of many ranks, aggregated: a lane per server (or per
run of ranks) instead of per rank, each lane a heat map over time of the
share of its ranks busy, and above the lanes the share of all ranks busy
with the least and most busy lane around it. At 256 ranks a Gantt chart
is a wall of one colour; this shows where ranks wait and which servers
lag."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from report.canvas import new_figure, plain, save, wrapped
from report.timeline_plot import MS, check_events

MAX_LANES = 64               # more servers than this: runs of ranks instead
BINS = 240                   # time bins across the iteration
BUSY_LABEL = "share of the lane's ranks busy"


@dataclass
class Busy:
    """What the figure shows: lane names top first, the ranks in each, the
    bin edges (ms) and each lane's busy share per bin."""
    names: list
    sizes: list
    edges: np.ndarray
    share: np.ndarray                 # lanes x bins, 0..1

    @property
    def overall(self) -> np.ndarray:
        """Every rank's busy share per bin (lanes weighted by their ranks)."""
        sizes = np.array(self.sizes, dtype=float)[:, None]
        return (self.share * sizes).sum(axis=0) / sizes.sum()


def lanes(ranks: list, lane_of=None) -> dict:
    """{rank: lane name}: `lane_of`'s (a server per rank) while there are at
    most MAX_LANES of them, else runs of consecutive ranks, at most
    MAX_LANES of them ("ranks 0-15")."""
    lane_of = lane_of or {}
    named = {r: str(lane_of[r]) for r in ranks if r in lane_of}
    if len(named) == len(ranks) and len(set(named.values())) <= MAX_LANES:
        return named
    per = -(-len(ranks) // MAX_LANES)
    out = {}
    for i in range(0, len(ranks), per):
        run = ranks[i:i + per]
        name = f"rank {run[0]}" if len(run) == 1 else f"ranks {run[0]}-{run[-1]}"
        out.update({r: name for r in run})
    return out


def _merged(evs: list) -> dict:
    """{rank: [(start, end)]} the time each rank was busy, overlaps merged (ms)."""
    by_rank = {}
    for e in sorted(evs, key=lambda e: (e["rank"], e["start"])):
        spans = by_rank.setdefault(e["rank"], [])
        start, end = e["start"] * MS, e["end"] * MS
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    return by_rank


def _covered(spans: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Busy time of `spans` (n x 2, disjoint per rank) in each bin of `edges`:
    the running total C(x) = sum of clip(x - start, 0, end - start) at the
    edges, differenced."""
    starts, ends = np.sort(spans[:, 0]), np.sort(spans[:, 1])
    cum_s = np.concatenate([[0.0], np.cumsum(starts)])
    cum_e = np.concatenate([[0.0], np.cumsum(ends)])
    ks, ke = np.searchsorted(starts, edges), np.searchsorted(ends, edges)
    total = (ks * edges - cum_s[ks]) - (ke * edges - cum_e[ke])
    return np.diff(total)


def busy(evs: list, lane: dict) -> Busy:
    """Each lane's busy share per time bin over the iteration."""
    t0 = min(0.0, min(e["start"] for e in evs)) * MS
    t1 = max(max(e["end"] for e in evs) * MS, t0 + 1e-6)
    edges = np.linspace(t0, t1, BINS + 1)
    names = list(dict.fromkeys(lane[r] for r in sorted(lane)))
    merged = _merged(evs)
    share = np.zeros((len(names), BINS))
    sizes = []
    for i, name in enumerate(names):
        ranks = [r for r in lane if lane[r] == name]
        sizes.append(len(ranks))
        spans = [s for r in ranks for s in merged.get(r, [])]
        if spans:
            share[i] = _covered(np.array(spans), edges) / (len(ranks) * np.diff(edges))
    return Busy(names, sizes, edges, np.clip(share, 0.0, 1.0))


def _draw_overall(top, data: Busy) -> None:
    """Every rank's busy share, with the least and most busy lane shaded round it."""
    mid = (data.edges[:-1] + data.edges[1:]) / 2
    top.fill_between(mid, data.share.min(axis=0), data.share.max(axis=0), color="#9ecae1",
                     linewidth=0, label="least to most busy lane")
    top.plot(mid, data.overall, color="#08519c", linewidth=1.2, label="all ranks")
    top.set_ylim(0, 1.05)
    top.set_yticks([0, 0.5, 1])
    top.set_yticklabels(["0", "50%", "100%"], fontsize=7)
    top.set_ylabel("busy", fontsize=8)
    top.tick_params(axis="x", labelbottom=False)
    top.legend(loc="lower right", fontsize=7, frameon=False, ncol=2)


def _draw_lanes(fig, ax, data: Busy) -> None:
    """The lanes x time heat map, first lane at the top, at most about 32
    lane names so they never overlap, and its colour bar."""
    mesh = ax.pcolormesh(data.edges, np.arange(len(data.names) + 1), data.share,
                         cmap="magma", vmin=0.0, vmax=1.0, shading="flat")
    ax.set_ylim(len(data.names), 0)
    every = max(1, -(-len(data.names) // 32))
    shown = list(range(0, len(data.names), every))
    ax.set_yticks([i + 0.5 for i in shown])
    ax.set_yticklabels([plain(f"{data.names[i]} ({data.sizes[i]})") for i in shown], fontsize=7)
    ax.set_xlabel("time since iteration start (ms)")
    bar = fig.colorbar(mesh, ax=fig.axes, fraction=0.04, pad=0.01)     # both panels: aligned
    bar.set_label(BUSY_LABEL, fontsize=8)


def timeline_busy_figure(events, title: str = "", lane_of=None) -> Figure:
    """The aggregated timeline of one iteration: events as timeline_figure
    takes them, `lane_of` {rank: lane name} (the server of each rank);
    a lane per name (or per run of ranks when there are more than
    MAX_LANES, or no names), coloured by the share of its ranks busy in
    each of BINS time bins, under the busy share of all ranks."""
    evs = check_events(events)
    data = busy(evs, lanes(sorted({e["rank"] for e in evs}), lane_of))
    lane_in = min(0.3, 9.0 / len(data.names))
    fig = new_figure(11.0, 2.8 + lane_in * len(data.names))
    grid = fig.add_gridspec(2, 1, height_ratios=[1.1, lane_in * len(data.names)])
    top = fig.add_subplot(grid[0])
    ax = fig.add_subplot(grid[1], sharex=top)
    _draw_overall(top, data)
    _draw_lanes(fig, ax, data)
    ax.set_xlim(data.edges[0], data.edges[-1])
    if title:
        top.set_title(wrapped(title, fig))
    return fig


def plot_timeline_busy(events, path, title: str = "", lane_of=None) -> Path:
    """timeline_busy_figure written as a PNG to `path`."""
    return save(timeline_busy_figure(events, title, lane_of), path)
