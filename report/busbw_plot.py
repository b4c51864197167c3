"""The bus-bandwidth figure: busbw (GB/s) against message size on a log2 axis
with K/M/G ticks, one marked line per curve, beside a curve the simulator's
busbw for the same sizes (dashed, open markers, the curve's colour), the
link rate dashed, and the sizes the fidelity verdict says are not figures to
quote ringed in red and labelled with their flags, one a line (over-rate,
below-resolution, ...); a flagged size without a figure (NaN) gets a red
cross on the size axis."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from report.canvas import finite, new_figure, number, plain, save, wrapped

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
FLAG_COLOUR = "#d62728"
FLAGGED_LABEL = "not a figure to quote (flagged)"
MEASURED = ", measured"
SIMULATED = ", simulated"


def simulated_label(label) -> str:
    """The legend label of the simulated curve beside `label`: "X, measured"
    becomes "X, simulated"; any other label gets ", simulated" added."""
    label = str(label)
    return (label[:-len(MEASURED)] if label.endswith(MEASURED) else label) + SIMULATED


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


# --- input --------------------------------------------------------------------

def _check_curves(curves) -> dict:
    """{label: [(size, busbw)] sorted by size}, every point checked."""
    if not curves:
        raise ValueError("plot_busbw needs at least one curve {label: [(size_bytes, busbw_GBps)]}: "
                         "got none.")
    return {label: _check_curve(label, points) for label, points in curves.items()}


def _check_curve(label, points) -> list:
    if points is None or len(points) == 0:
        raise ValueError(f"curve {label!r} has no points (size_bytes, busbw_GBps).")
    rows = []
    for point in points:
        try:
            size, bw = point
        except (TypeError, ValueError):
            raise ValueError(f"curve {label!r}: a point must be (size_bytes, busbw_GBps), "
                             f"not {point!r}.") from None
        size = finite(size, f"curve {label!r}: a message size")
        if size <= 0:
            raise ValueError(f"curve {label!r}: message size {size:g} is not > 0 "
                             "(the size axis is logarithmic).")
        bw = number(bw, f"curve {label!r}: the bus bandwidth at {size:g} B")
        if math.isinf(bw) or bw < 0:
            raise ValueError(f"curve {label!r}: the bus bandwidth at {size:g} B must be "
                             f"finite and >= 0, not {bw!r}.")
        rows.append((size, bw))
    return sorted(rows)


def _check_flagged(flagged, checked: dict) -> list:
    """[(label, size, busbw, flags text)] for {label: {size: [flag, ...]}}: every
    label a curve's, every size one of its points; sizes without flags dropped."""
    if not flagged:
        return []
    out = []
    for label, sizes in flagged.items():
        if label not in checked:
            raise ValueError(f"flagged names curve {label!r}, which is not one of the curves "
                             f"({', '.join(map(repr, checked))}).")
        points = dict(checked[label])
        for size, flags in sizes.items():
            if not flags:
                continue
            size = finite(size, f"curve {label!r}: a flagged size")
            if size not in points:
                raise ValueError(f"curve {label!r} has no point at {size:g} B to flag.")
            text = flags if isinstance(flags, str) else "\n".join(map(str, flags))
            out.append((label, size, points[size], text))
    return sorted(out, key=lambda f: f[1])


def _check_simulated(simulated, checked: dict) -> dict:
    """{curve label: [(size, busbw)]} of the simulated curves, each beside a curve."""
    if not simulated:
        return {}
    for label in simulated:
        if label not in checked:
            raise ValueError(f"simulated names curve {label!r}, which is not one of the curves "
                             f"({', '.join(map(repr, checked))}).")
    return {label: _check_curve(simulated_label(label), points)
            for label, points in simulated.items()}


def _check_link_rate(link_gbps):
    if link_gbps is None:
        return None
    link_gbps = finite(link_gbps, "link_gbps")
    if link_gbps <= 0:
        raise ValueError(f"link_gbps must be > 0 GB/s, not {link_gbps:g}.")
    return link_gbps


# --- drawing ------------------------------------------------------------------

def _draw_curves(ax, checked: dict, simulated: dict, link_gbps) -> int:
    """A marked line per curve, its simulated curve (if any) dashed in its
    colour right after it, then the link rate; returns the number of points."""
    total = 0
    for i, (label, rows) in enumerate(checked.items()):
        sizes, bws = zip(*rows)
        total += len(rows)
        marker = MARKERS[i % len(MARKERS)]
        (line,) = ax.plot(sizes, bws, marker=marker, markersize=5, linewidth=1.5,
                          label=plain(label))
        if label in simulated:
            sizes, bws = zip(*simulated[label])
            total += len(sizes)
            ax.plot(sizes, bws, marker=marker, markersize=6, markerfacecolor="none",
                    linestyle=(0, (4, 2)), linewidth=1.2, color=line.get_color(),
                    label=plain(simulated_label(label)))
    if link_gbps is not None:
        ax.axhline(link_gbps, color="black", linestyle="--", linewidth=1.0,
                   label=f"link rate ({link_gbps:g} GB/s)")
    return total


def _draw_flagged(ax, flagged: list, checked: dict) -> None:
    """A red ring round each flagged point and its flags written above it;
    a flagged NaN (no figure to ring) a red cross on the size axis with its
    flags above that. One legend entry for all of them."""
    shown = [(size, bw) for _, size, bw, _ in flagged if not math.isnan(bw)]
    blank = [size for _, size, bw, _ in flagged if math.isnan(bw)]
    if shown:
        sizes, bws = zip(*shown)
        ax.plot(sizes, bws, linestyle="none", marker="o", markersize=12, markerfacecolor="none",
                markeredgecolor=FLAG_COLOUR, markeredgewidth=1.6, label=FLAGGED_LABEL, zorder=4)
    if blank:
        ax.plot(blank, [0.0] * len(blank), linestyle="none", marker="X", markersize=9,
                color=FLAG_COLOUR, clip_on=False, zorder=4,
                label="_" if shown else FLAGGED_LABEL)
    for i, (size, bw, text) in enumerate(_flag_runs(flagged, checked)):     # neighbours' staggered
        ax.annotate(plain(text), (size, bw), xytext=(0, 9 + 18 * (i % 2)),
                    textcoords="offset points", ha="center", va="bottom", fontsize=7,
                    color=FLAG_COLOUR, zorder=5)


def _flag_runs(flagged: list, checked: dict) -> list:
    """(size, busbw, text) of each label to write: a run of a curve's
    neighbouring flagged sizes with the same flags is written once, over its
    middle, with the sizes it spans ("below-resolution: 8..256K"), so an
    18-size sweep flagged throughout reads one label, not 18."""
    index = {label: {s: i for i, (s, _) in enumerate(rows)} for label, rows in checked.items()}
    runs: list = []
    for label, size, bw, text in flagged:        # by size
        at = index[label][size]
        last = next((r for r in reversed(runs) if r[0] == label), None)
        if last is not None and last[1] == text and last[2] == at - 1:
            last[2] = at
            last[3].append((size, bw))
        else:
            runs.append([label, text, at, [(size, bw)]])
    out = []
    for _, text, _, points in runs:
        sizes = [p[0] for p in points]
        bws = [0.0 if math.isnan(b) else b for _, b in points]
        middle = math.sqrt(sizes[0] * sizes[-1])
        if len(points) > 1:
            text = f"{text}: {size_label(sizes[0])}..{size_label(sizes[-1])}"
        out.append((middle, max(bws), text))
    return out


def _size_axis(ax, checked: dict) -> None:
    """Log2 message sizes with a little room each side, ticks labelled K/M/G."""
    sizes = [s for rows in checked.values() for s, _ in rows]
    low, high = min(sizes), max(sizes)
    ax.set_xscale("log", base=2)
    ax.set_xlim(low / 2 ** 0.4, high * 2 ** 0.4)
    ax.xaxis.set_major_locator(FixedLocator(_size_ticks(low, high)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_label(x)))
    ax.xaxis.set_minor_locator(NullLocator())


def _bandwidth_axis(ax, checked: dict, link_gbps, flagged: bool = False) -> None:
    """From 0 to a little above the highest bandwidth or link rate (more
    room above when flags are written over points)."""
    bws = [b for rows in checked.values() for _, b in rows if not math.isnan(b)]
    peak = max(bws + ([link_gbps] if link_gbps else []), default=0.0)
    ax.set_ylim(0, peak * (1.3 if flagged else 1.12) if peak > 0 else 1.0)


def busbw_figure(curves, title: str = "", link_gbps=None, flagged=None,
                 simulated=None) -> Figure:
    """The figure plot_busbw writes, for reading what it shows: bus bandwidth
    (GB/s) against message size (log2 axis, K/M/G ticks), one line with
    markers per curve, and the link rate as a dashed line if given. A NaN
    bandwidth leaves a gap in its curve. `flagged` {curve label: {size:
    [flag, ...]}} rings those points in red and writes their flags above.
    `simulated` {curve label: [(size, busbw)]} draws the simulator's busbw
    beside that curve, dashed in its colour, labelled simulated_label(label)."""
    checked = _check_curves(curves)
    link_gbps = _check_link_rate(link_gbps)
    marks = _check_flagged(flagged, checked)
    beside = _check_simulated(simulated, checked)

    fig = new_figure(8.5, 5.0)
    ax = fig.add_subplot()
    total = _draw_curves(ax, checked, beside, link_gbps)
    _draw_flagged(ax, marks, checked)
    every = {**checked, **{simulated_label(k): v for k, v in beside.items()}}
    _size_axis(ax, every)
    _bandwidth_axis(ax, every, link_gbps, bool(marks))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.grid(True, which="major", linewidth=0.5, alpha=0.5)
    ax.legend(loc="best" if total <= 500 else "lower right", fontsize=8)
    if title:
        ax.set_title(wrapped(title, fig))
    return fig


def plot_busbw(curves, path, title: str = "", link_gbps=None, flagged=None,
               simulated=None) -> Path:
    """busbw_figure written as a PNG to `path`."""
    return save(busbw_figure(curves, title, link_gbps, flagged, simulated), path)
