"""What every figure shares: an off-screen matplotlib `Figure` on an Agg
canvas sized within the caps, the atomic PNG write, text shown as written, and
the number checks behind the input errors."""

from __future__ import annotations

import math
import numbers
import os
import sys
import textwrap
from pathlib import Path

import matplotlib

if "matplotlib.pyplot" not in sys.modules:       # never switch a backend already in use
    matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg    # noqa: E402
from matplotlib.colors import to_rgb                            # noqa: E402
from matplotlib.figure import Figure                            # noqa: E402

DPI = 100
MAX_WIDTH_IN = 24.0          # figure width cap: 2400 px at DPI
MAX_HEIGHT_IN = 40.0


def plain(text) -> str:
    """Text shown as written: a '$' would otherwise start matplotlib's mathtext."""
    return str(text).replace("$", r"\$")


def wrapped(text, fig: Figure, fontsize: float = 12.0, share: float = 0.95) -> str:
    """`text` shown as written (`plain`), each line wrapped at the words to
    fit `share` of the figure's width at `fontsize` (a character about 0.6
    of it wide), so that a long title is not cut off at the PNG's edges."""
    chars = max(20, int(fig.get_figwidth() * 72 * share / (fontsize * 0.6)))
    return "\n".join(part for line in plain(text).split("\n")
                     for part in (textwrap.wrap(line, chars, break_on_hyphens=False) or [""]))


def number(value, what: str) -> float:
    """`value` as a float; ValueError naming `what` if it is not a real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, not {value!r}.")
    return float(value)


def finite(value, what: str) -> float:
    """`value` as a float; ValueError naming `what` unless it is a finite number."""
    result = number(value, what)
    if not math.isfinite(result):
        raise ValueError(f"{what} must be finite, not {value!r}.")
    return result


def darker(colour, factor=0.65) -> tuple:
    """The RGB of `colour` scaled towards black, for outlines."""
    return tuple(c * factor for c in to_rgb(colour))


def new_figure(width: float, height: float) -> Figure:
    """A constrained-layout figure on an Agg canvas, its size (inches) clamped
    to at least 3 x 2.5 and at most MAX_WIDTH_IN x MAX_HEIGHT_IN."""
    width = min(max(width, 3.0), MAX_WIDTH_IN)
    height = min(max(height, 2.5), MAX_HEIGHT_IN)
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path) -> Path:
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
