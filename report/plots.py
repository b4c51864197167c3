"""Figures as PNG files: the fabric coloured by link utilisation, bus bandwidth
against message size, and a collective's per-rank step timeline.

Every function takes plain data (lists, dicts, numbers and strings, no project
objects), writes one PNG to `path` and returns it as a `pathlib.Path`:

    draw_fabric(nodes, edges, path, title="", unit="utilisation")
        nodes: [(name, tier)], tier 0 = GPU/server endpoints, 1 = node switch,
        2 = leaf, 3 = spine/aggregation, 4 = core (numbers may be skipped).
        edges: [(a, b, value)], value a share of the link's rate (0..1, a little
        over 1 is fine) or None for no data (drawn grey and dashed).
    plot_busbw(curves, path, title="", link_gbps=None, flagged=None, simulated=None)
        curves: {label: [(size_bytes, busbw_GBps)]}, one line per label.
        flagged: {label: {size_bytes: [flag, ...]}}, points not to quote,
        ringed in red with their flags written above.
        simulated: {label: [(size_bytes, busbw_GBps)]}, the simulator's
        curve beside that one, dashed.
    plot_timeline(events, path, title="")
        events: [{"rank", "start", "end", "kind", optional "step", "label",
        "phase"}], times in seconds from the iteration start.
    is_png(path) -> bool, png_size(path) -> (width, height)

    draw_fabric_tiers(nodes, edges, path, title="", groups=None, marks=None)
        a large fabric by tier: tiers of over 16 nodes folded into groups,
        links between groups drawn as bundles coloured by their max/mean.
    plot_timeline_busy(events, path, title="", lane_of=None)
        many ranks: a lane per server ({rank: server}), the share of its
        ranks busy over time.

fabric_figure, busbw_figure and timeline_figure take the same arguments less
`path` and return the matplotlib `Figure` unwritten, so what a figure shows
(titles, lines, colours, legends) can be read from it.

Empty or malformed input raises ValueError with a sentence saying what was
wrong. Drawing uses matplotlib's object API (`Figure` on an Agg canvas), so no
window is opened, no global pyplot state is touched and nothing can block on a
display; each figure is cleared once written. The PNG is written to a
temporary file beside `path` and renamed into place, so `path` is never left
half-written.

The drawings live in their own modules (fabric_plot, busbw_plot,
timeline_plot, on the shared canvas); this module is their public entry and
holds the PNG checks.
"""

from __future__ import annotations

import os
import struct
import zlib

from report.busbw_plot import busbw_figure, plot_busbw, size_label
from report.fabric_plot import draw_fabric, fabric_figure
from report.fabric_tiers_plot import draw_fabric_tiers, fabric_tiers_figure
from report.timeline_heatmap import plot_timeline_busy, timeline_busy_figure
from report.timeline_plot import plot_timeline, timeline_figure

__all__ = ["draw_fabric", "plot_busbw", "plot_timeline", "fabric_figure", "busbw_figure",
           "timeline_figure", "draw_fabric_tiers", "fabric_tiers_figure", "plot_timeline_busy",
           "timeline_busy_figure", "is_png", "png_size", "size_label"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"     # the empty IEND chunk every PNG ends with


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
