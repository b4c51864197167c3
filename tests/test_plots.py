"""The figures say what the data says: titles, axis labels, the plotted
points, the link-rate line, the sizes the verdict does not quote ringed and
labelled, links coloured by utilisation (a saturated link, 1.0 give or take
float error, in the scale's top colour, only a link over 100 % in the over
colour), a lane per rank, legends. Each is read from the matplotlib Figure
the drawing function builds, or from the one it wrote (the `written`
fixture keeps a written figure whole); the written files are complete PNGs
of a plausible size. Malformed input is refused with a sentence, and is_png
tells a whole PNG from text and truncated files."""

import math
import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PolyCollection, QuadMesh
from matplotlib.colors import to_hex

from harness.fabrics import leaf_spine
from runs.experiment import Experiment
from traffic.measure.fidelity import size_flags
from report import busbw_plot, canvas, fabric_plot, figures, step_report, timeline_plot
from report import plots as P
from report.timeline_plot import rows_for
from runs.simulated import simulate_experiment
from topologies.fabric import parse_fabric

REPO = Path(__file__).resolve().parent.parent


def small_fabric():
    """2 spines, 2 leaves, 4 hosts; one host link without data."""
    nodes = [("h1", 0), ("h2", 0), ("h3", 0), ("h4", 0),
             ("leaf1", 2), ("leaf2", 2), ("spine1", 3), ("spine2", 3)]
    edges = [("h1", "leaf1", 0.2), ("h2", "leaf1", 0.9), ("h3", "leaf2", 0.5), ("h4", "leaf2", None),
             ("leaf1", "spine1", 1.0), ("leaf1", "spine2", 0.1),
             ("leaf2", "spine1", 0.7), ("leaf2", "spine2", 0.0)]
    return nodes, edges


def superpod_fabric():
    """4 spines, 8 leaves, 32 node switches of 8 GPUs each, every node switch
    on every leaf (8 uplinks), every leaf on every spine."""
    rng = random.Random(7)
    gpus = [f"gpu{i}" for i in range(256)]
    nodes_sw = [f"node{i}" for i in range(32)]
    leaves = [f"leaf{i}" for i in range(8)]
    spines = [f"spine{i}" for i in range(4)]
    nodes = ([(g, 0) for g in gpus] + [(n, 1) for n in nodes_sw]
             + [(l, 2) for l in leaves] + [(s, 3) for s in spines])
    edges = [(g, nodes_sw[i // 8], rng.random()) for i, g in enumerate(gpus)]
    edges += [(n, l, rng.uniform(0, 1.05)) for n in nodes_sw for l in leaves]
    edges += [(l, s, None if rng.random() < 0.1 else rng.random()) for l in leaves for s in spines]
    return nodes, edges


@pytest.fixture
def written(monkeypatch):
    """The figures the drawing modules write, in order, left whole after the
    PNG is written (canvas.save clears a figure once written)."""
    kept = []

    def save_and_keep(fig, path):
        fig.clear = lambda *args, **kwargs: None
        kept.append(fig)
        return canvas.save(fig, path)
    for module in (busbw_plot, fabric_plot, timeline_plot, step_report, figures):
        monkeypatch.setattr(module, "save", save_and_keep)
    return kept


def check_png(path, min_kb, width_range, height_range):
    assert isinstance(path, Path) and P.is_png(path)
    assert path.stat().st_size > min_kb * 1024
    width, height = P.png_size(path)
    assert width_range[0] <= width <= width_range[1]
    assert height_range[0] <= height <= height_range[1]


def texts(items) -> list:
    return [t.get_text() for t in items]


def legend_texts(ax_or_fig) -> list:
    legend = ax_or_fig.get_legend() if hasattr(ax_or_fig, "get_legend") else ax_or_fig.legends[0]
    return texts(legend.get_texts())


# --- what a fabric figure shows ---------------------------------------------------

def drawn_links(fig) -> dict:
    """{frozenset((a, b)): (colour hex, dashed)} for every link drawn, its
    ends found by the node labels drawn at them."""
    ax = fig.axes[0]
    at = {tuple(np.round(t.xy, 9)): t.get_text() for t in ax.texts
          if t.get_gid() != fabric_plot.MARK_GID}
    links = {}
    for coll in ax.collections:
        if not isinstance(coll, LineCollection):
            continue
        colours = coll.get_colors()
        dashed = coll.get_linestyle()[0][1] is not None
        for i, seg in enumerate(coll.get_segments()):
            ends = frozenset(at[tuple(np.round(point, 9))] for point in seg)
            assert ends not in links, f"{set(ends)} drawn twice"
            links[ends] = (to_hex(colours[i % len(colours)]), dashed)
    return links


def colour_scale(fig):
    """(colour of a value on the figure's colorbar, the colour the bar shows
    at its top, the over-arrow's colour or None when the bar has no arrow)."""
    cax = fig.axes[1]
    mesh = next(c for c in cax.collections if isinstance(c, QuadMesh))
    top = to_hex(mesh.to_rgba(mesh.get_array().max()))
    over = [to_hex(p.get_facecolor()) for p in cax.patches]
    assert len(over) <= 1
    return (lambda value: to_hex(mesh.to_rgba(value))), top, (over[0] if over else None)


def tier_rows(fig) -> list:
    return texts(fig.axes[0].get_yticklabels())


def summary(fig) -> str:
    return fig.axes[0].get_title(loc="left")



def test_small_fabric_shows_its_tiers_links_and_busiest_link(tmp_path, written):
    nodes, edges = small_fabric()
    out = P.draw_fabric(nodes, edges, tmp_path / "small.png", title="2x2 leaf-spine")
    assert out == tmp_path / "small.png"
    check_png(out, 10, (500, 1200), (300, 900))
    (fig,) = written
    assert fig.get_suptitle() == "2x2 leaf-spine"
    assert summary(fig) == "8 nodes, 8 links; busiest leaf1 - spine1: 100%; 1 without data"
    assert tier_rows(fig) == ["GPU / server (4)", "leaf (2)", "spine / agg (2)"]
    assert fig.axes[1].get_ylabel() == fabric_plot.UTILISATION_LABEL
    assert texts(fig.axes[1].get_yticklabels())[-1] == "100%"
    assert legend_texts(fig.axes[0]) == ["no data"]
    colour, top, over = colour_scale(fig)
    links = drawn_links(fig)
    assert len(links) == len(edges)
    for a, b, value in edges:
        shown, dashed = links[frozenset((a, b))]
        if value is None:
            assert (shown, dashed) == (fabric_plot.NO_DATA_COLOUR, True), (a, b)
        else:
            assert (shown, dashed) == (colour(value), False), (a, b)
    assert links[frozenset(("leaf1", "spine1"))][0] == top          # 100 %: the scale's top
    assert over is None                                             # nothing over 100 %: no arrow
    # every node is drawn on its tier's row
    rows = {t.get_text(): t.xy[1] for t in fig.axes[0].texts}
    assert rows == {name: ["h1", "leaf1", "spine1"].index(name[:-1] + "1") for name, _ in nodes}


@pytest.mark.parametrize("saturated", [1.0, 1.0000000000000002, 1 - 1e-12, 1 + 1e-10])
@pytest.mark.parametrize("with_over", [False, True])
def test_a_saturated_link_takes_the_top_colour_and_only_one_over_100_the_over_colour(
        saturated, with_over):
    # a link's share summed from its flows is 1.0000000000000002 as often as 1.0
    nodes = [("h1", 0), ("h2", 0), ("h3", 0), ("leaf", 2)]
    edges = [("h1", "leaf", 0.5), ("h2", "leaf", saturated)]
    if with_over:
        edges.append(("h3", "leaf", 1.25))
    fig = P.fabric_figure(nodes, edges)
    colour, top, over = colour_scale(fig)
    links = drawn_links(fig)
    assert links[frozenset(("h2", "leaf"))] == (top, False)
    assert top != fabric_plot.OVER_COLOUR
    assert links[frozenset(("h1", "leaf"))] == (colour(0.5), False)
    if with_over:
        assert links[frozenset(("h3", "leaf"))] == (fabric_plot.OVER_COLOUR, False)
        assert over == fabric_plot.OVER_COLOUR                        # the colorbar's arrow
        assert summary(fig).endswith("busiest h3 - leaf: 125%")
    else:
        assert over is None
        assert summary(fig).endswith("busiest h2 - leaf: 100%")


def test_superpod_fabric_is_capped_in_width_and_labels_only_a_large_tiers_ends(
        tmp_path, written):
    nodes, edges = superpod_fabric()
    out = P.draw_fabric(nodes, edges, str(tmp_path / "superpod.png"), title="SuperPOD")
    check_png(out, 50, (2000, 2400), (400, 1200))         # width capped at 24 in x 100 dpi
    (fig,) = written
    assert fig.get_suptitle() == "SuperPOD"
    assert tier_rows(fig) == ["GPU / server (256)", "node (32)", "leaf (8)", "spine / agg (4)"]
    labels = texts(fig.axes[0].texts)
    assert labels[:2] == ["gpu0", "gpu255"] and "gpu1" not in labels       # 256: ends only
    assert {f"node{i}" for i in range(32)} <= set(labels)                   # 32: all
    missing = sum(v is None for _, _, v in edges)
    assert summary(fig).startswith(f"300 nodes, {len(edges)} links; busiest ")
    assert summary(fig).endswith(f"; {missing} without data")
    segments = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    assert sorted(len(c.get_segments()) for c in segments) == [missing, len(edges) - missing]
    colour, top, over = colour_scale(fig)
    measured = next(c for c in segments if len(c.get_segments()) == len(edges) - missing)
    drawn = [to_hex(c) for c in measured.get_colors()]
    n_over = sum(v is not None and v > 1 for _, _, v in edges)
    assert n_over > 0 and drawn.count(fabric_plot.OVER_COLOUR) == n_over
    assert over == fabric_plot.OVER_COLOUR


def test_fabric_with_skipped_tiers_and_another_unit(tmp_path, written):
    nodes = [("a", 0), ("b", 0), ("$x$", 2), ("core", 4)]  # '$' is text, not mathtext
    edges = [("a", "$x$", 3.0), ("b", "$x$", float("nan")), ("$x$", "core", 9.5)]
    out = P.draw_fabric(nodes, edges, tmp_path / "sub" / "dir" / "gbps.png", unit="Gbit/s")
    check_png(out, 5, (500, 1200), (250, 900))
    (fig,) = written
    assert fig.get_suptitle() == ""
    assert tier_rows(fig) == ["GPU / server (2)", "leaf (1)", "core (1)"]   # no row for tiers 1, 3
    assert fig.axes[1].get_ylabel() == "Gbit/s"
    assert summary(fig) == r"4 nodes, 3 links; busiest \$x\$ - core: 9.5; 1 without data"
    colour, top, over = colour_scale(fig)
    links = drawn_links(fig)
    assert links[frozenset(("\\$x\\$", "core"))] == (top, False)        # the largest value tops it
    assert links[frozenset(("a", "\\$x\\$"))] == (colour(3.0), False)
    assert links[frozenset(("b", "\\$x\\$"))] == (fabric_plot.NO_DATA_COLOUR, True)  # NaN: no data
    assert over is None


def test_fabric_input_is_left_untouched():
    nodes, edges = small_fabric()
    before = (list(nodes), list(edges))
    P.fabric_figure(nodes, edges)
    assert (nodes, edges) == before


@pytest.mark.parametrize("nodes,edges,message", [
    ([], [], "at least one node"),
    ([("a", 0), ("b", 1)], [], "at least one edge"),
    ([("a", 0), ("a", 1)], [("a", "a", 0.1)], "listed twice"),
    ([("a", -1)], [("a", "a", 0.1)], "tier is an int >= 0"),
    ([("a", 1.5)], [("a", "a", 0.1)], "tier is an int >= 0"),
    (["a"], [], "pair \\(name, tier\\)"),
    ([("a", 0), ("b", 1)], [("a", "c", 0.5)], "names 'c', which is not in the nodes"),
    ([("a", 0), ("b", 1)], [("a", "a", 0.5)], "joins 'a' to itself"),
    ([("a", 0), ("b", 1)], [("a", "b")], "triple \\(a, b, value\\)"),
    ([("a", 0), ("b", 1)], [("a", "b", -0.1)], "finite and >= 0"),
    ([("a", 0), ("b", 1)], [("a", "b", float("inf"))], "finite and >= 0"),
    ([("a", 0), ("b", 1)], [("a", "b", "busy")], "must be a number"),
])
def test_fabric_refuses_bad_input_with_a_sentence(tmp_path, nodes, edges, message):
    with pytest.raises(ValueError, match=message):
        P.draw_fabric(nodes, edges, tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()


# --- what a busbw figure shows ------------------------------------------------------

def curve(ax, label):
    (line,) = [l for l in ax.lines if l.get_label() == label]
    return list(line.get_xdata()), list(line.get_ydata())


def flag_marks(ax):
    """(sizes ringed, their busbw) and {(size, busbw): text written there}."""
    rings = [l for l in ax.lines if l.get_label() == busbw_plot.FLAGGED_LABEL]
    assert len(rings) <= 1
    ringed = (list(rings[0].get_xdata()), list(rings[0].get_ydata())) if rings else ([], [])
    return ringed, {tuple(t.xy): t.get_text() for t in ax.texts}


def link_rate(ax):
    (line,) = [l for l in ax.lines if l.get_label().startswith("link rate")]
    assert line.get_linestyle() == "--"
    ys = set(line.get_ydata())
    assert len(ys) == 1 and list(line.get_xdata()) == [0, 1]      # across the whole axes
    return ys.pop()


SIZES = [2 ** k for k in range(15, 27)]                               # 32K .. 64M


def test_busbw_two_curves_and_the_link_rate(tmp_path, written):
    curves = {"ring": [(s, 11.5 * s / (s + 2e6)) for s in SIZES],
              "rhd": [(s, 10.5 * s / (s + 1e6)) for s in reversed(SIZES)]}   # order does not matter
    out = P.plot_busbw(curves, tmp_path / "busbw.png", title="allreduce, 8 ranks", link_gbps=12.5)
    check_png(out, 20, (600, 1200), (350, 800))
    (fig,) = written
    (ax,) = fig.axes
    assert ax.get_title() == "allreduce, 8 ranks"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("message size (bytes)", "bus bandwidth (GB/s)")
    assert ax.get_xscale() == "log"
    assert curve(ax, "ring") == ([float(s) for s in SIZES], [11.5 * s / (s + 2e6) for s in SIZES])
    assert curve(ax, "rhd") == ([float(s) for s in SIZES], [10.5 * s / (s + 1e6) for s in SIZES])
    assert link_rate(ax) == 12.5
    assert legend_texts(ax) == ["ring", "rhd", "link rate (12.5 GB/s)"]
    low, high = ax.get_ylim()
    assert low == 0 and 12.5 < high < 12.5 * 1.2                          # the rate line in view
    ticks = ax.get_xticks()
    labels = [ax.xaxis.get_major_formatter()(x, i) for i, x in enumerate(ticks)]
    assert labels[0] == "32K" and labels[-1] == "64M" and "1M" in labels
    assert all(ax.get_xlim()[0] < x < ax.get_xlim()[1] for x in ticks)
    assert flag_marks(ax) == (([], []), {})                              # nothing flagged, no ring


def test_busbw_rings_and_names_the_sizes_not_to_quote(tmp_path, written):
    # the 32K point beat the 12.5 GB/s link (over-rate, below the shaper's
    # resolution); 64K was too small to resolve; the other curve is clean
    ring = [(32768, 13.1), (65536, 9.0), (1 << 20, 11.9)]
    flagged = {"ring": {32768: ["over-rate", "below-resolution"], 65536: ["below-resolution"],
                        1 << 20: []}}
    P.plot_busbw({"ring": ring, "rhd": [(s, b * 0.9) for s, b in ring]}, tmp_path / "b.png",
                 link_gbps=12.5, flagged=flagged)
    (ax,) = written[0].axes
    ringed, notes = flag_marks(ax)
    assert ringed == ([32768.0, 65536.0], [13.1, 9.0])
    assert notes == {(32768.0, 13.1): "over-rate\nbelow-resolution",      # a flag a line
                     (65536.0, 9.0): "below-resolution"}
    assert ringed[1][0] > link_rate(ax)                    # the ring is above the rate line
    assert legend_texts(ax) == ["ring", "rhd", "link rate (12.5 GB/s)", busbw_plot.FLAGGED_LABEL]
    assert ax.get_ylim()[1] > 13.1


def test_busbw_single_point_and_gaps(tmp_path, written):
    curves = {"one": [(1 << 20, 5.0)],
              "gap": [(1 << 10, 1.0), (1 << 11, float("nan")), (1 << 12, 2.0)]}
    check_png(P.plot_busbw(curves, tmp_path / "b.png"), 10, (600, 1200), (350, 800))
    (ax,) = written[0].axes
    assert ax.get_title() == ""
    assert curve(ax, "one") == ([1048576.0], [5.0])
    sizes, bws = curve(ax, "gap")
    assert sizes == [1024.0, 2048.0, 4096.0]
    assert bws[0] == 1.0 and math.isnan(bws[1]) and bws[2] == 2.0     # a gap at 2K
    assert legend_texts(ax) == ["one", "gap"]                              # no link rate given
    assert ax.get_xlim()[0] < 1024 and ax.get_xlim()[1] > 1 << 20
    assert ax.get_ylim() == (0.0, pytest.approx(5.0 * 1.12))


@pytest.mark.parametrize("size,text", [
    (1, "1"), (512, "512"), (32 * 1024, "32K"), (1 << 20, "1M"), (64 << 20, "64M"),
    (1 << 30, "1G"), (1536, "1.5K")])
def test_size_labels_are_powers_of_1024(size, text):
    assert P.size_label(size) == text


@pytest.mark.parametrize("curves,link,flagged,message", [
    ({}, None, None, "at least one curve"),
    ({"a": []}, None, None, "curve 'a' has no points"),
    ({"a": [(0, 1.0)]}, None, None, "not > 0"),
    ({"a": [(1024, -1.0)]}, None, None, "finite and >= 0"),
    ({"a": [(1024,)]}, None, None, "must be \\(size_bytes, busbw_GBps\\)"),
    ({"a": [(1024, 1.0)]}, 0, None, "link_gbps must be > 0"),
    ({"a": [(1024, 1.0)]}, None, {"b": {1024: ["over-rate"]}}, "names curve 'b'"),
    ({"a": [(1024, 1.0)]}, None, {"a": {2048: ["over-rate"]}}, "no point at 2048 B"),
])
def test_busbw_refuses_bad_input_with_a_sentence(tmp_path, curves, link, flagged, message):
    with pytest.raises(ValueError, match=message):
        P.plot_busbw(curves, tmp_path / "bad.png", link_gbps=link, flagged=flagged)
    assert not (tmp_path / "bad.png").exists()


# --- what a timeline figure shows -----------------------------------------------------

def hierarchical_allreduce_events(ranks=8):
    phases = [("intra-node reduce-scatter", 0, 3), ("inter-node allreduce", 3, 7),
              ("intra-node allgather", 7, 10)]
    events = []
    for rank in range(ranks):
        for phase, first, last in phases:
            for step in range(first, last):
                t = step * 1e-3 + rank * 2e-5
                events.append(dict(rank=rank, start=t, end=t + 4e-4, kind="send", step=step,
                                   phase=phase))
                events.append(dict(rank=rank, start=t + 4e-4, end=t + 7e-4, step=step, phase=phase,
                                   kind="copy" if phase.endswith("allgather") else "reduce"))
                events.append(dict(rank=rank, start=t + 7e-4, end=t + 8e-4, kind="wait",
                                   label="w", phase=phase))
    return events


def bars(ax) -> dict:
    """{face colour: [(rank lane, start ms, end ms)]} of the event bars in the lanes."""
    out = {}
    for coll in ax.collections:
        if isinstance(coll, PolyCollection) and len(coll.get_edgecolor()):   # not phase strips
            for path in coll.get_paths():
                box = path.get_extents()
                out.setdefault(to_hex(coll.get_facecolor()[0]), []).append(
                    (round(box.y0 + 0.38), round(box.x0, 9), round(box.x1, 9)))
    return out


def lanes(ax) -> list:
    low, high = ax.get_ylim()
    assert high < low                                                  # the first rank at the top
    return texts(ax.get_yticklabels()), round(low - high)


def test_timeline_eight_ranks_three_phases(tmp_path, written):
    events = hierarchical_allreduce_events()
    out = P.plot_timeline(events, tmp_path / "timeline.png", title="hierarchical allreduce")
    check_png(out, 30, (900, 1400), (350, 900))
    (fig,) = written
    band, ax = fig.axes
    assert band.get_title() == "hierarchical allreduce"
    assert ax.get_xlabel() == "time since iteration start (ms)"
    assert lanes(ax) == ([f"rank {r}" for r in range(8)], 8)
    kind_legend, phase_legend = fig.legends
    assert texts(kind_legend.get_texts()) == ["send", "reduce", "wait", "copy"]
    assert texts(phase_legend.get_texts()) == ["intra-node reduce-scatter", "inter-node allreduce",
                                               "intra-node allgather"]
    assert texts(band.texts) == texts(phase_legend.get_texts())   # each phase named on the band
    colours = {k: timeline_plot.KIND_COLOURS[k] for k in ("send", "reduce", "copy")}
    colours["wait"] = timeline_plot.SPARE_COLOURS[0]                   # no colour of its own
    assert [to_hex(h.get_facecolor()) for h in kind_legend.legend_handles] == [
        colours[k] for k in ("send", "reduce", "wait", "copy")]
    drawn = bars(ax)
    for kind, colour in colours.items():
        want = sorted((e["rank"], round(e["start"] * 1e3, 9), round(e["end"] * 1e3, 9))
                      for e in events if e["kind"] == kind)
        assert sorted(drawn[colour]) == want, kind
    assert texts(ax.texts).count("w") == 0                       # 0.1 ms: too narrow to label
    assert texts(ax.texts).count("s0") == 16               # its 0.4 ms send and 0.3 ms reduce per rank


def test_timeline_without_phases_and_with_zero_length_events(tmp_path, written):
    events = [dict(rank=1, start=0.0, end=0.0, kind="send"),
              dict(rank=0, start=0.001, end=0.003, kind="recv", step=0)]
    check_png(P.plot_timeline(events, tmp_path / "t.png"), 5, (900, 1400), (200, 600))
    (fig,) = written
    (ax,) = fig.axes                                                    # no phase band
    assert ax.get_title() == ""
    assert lanes(ax) == (["rank 0", "rank 1"], 2)
    assert legend_texts(fig) == ["send", "recv"] and len(fig.legends) == 1
    assert bars(ax) == {timeline_plot.KIND_COLOURS["send"]: [(1, 0.0, 0.0)],
                        timeline_plot.KIND_COLOURS["recv"]: [(0, 1.0, 3.0)]}
    assert texts(ax.texts) == ["s0"] and ax.texts[0].get_position() == (2.0, 0.0)
    assert ax.get_xlim()[0] == 0.0 and ax.get_xlim()[1] > 3.0


def test_a_thousand_ranks_fit_the_height_cap_in_a_bounded_file(tmp_path, written):
    events = hierarchical_allreduce_events(1024)              # 30720 events: no labels in bars
    out = P.plot_timeline(events, tmp_path / "big.png", title="1024 ranks")
    assert P.is_png(out)
    assert P.png_size(out) == (1100, 4000)                    # 11 in wide, capped at 40 in x 100 dpi
    assert 50 * 1024 < out.stat().st_size < 2 * 1024 * 1024
    ax = written[0].axes[1]
    labels, n_lanes = lanes(ax)
    assert n_lanes == 1024
    assert labels == [f"rank {r}" for r in range(0, 1024, 22)]          # at most about 48 ticks
    assert len(ax.texts) == 0
    assert sum(len(c.get_paths()) for c in ax.collections if len(c.get_edgecolor())) == len(events)


def test_overlapping_phases_take_separate_rows():
    assert rows_for([(0, 3), (2, 5), (3, 4), (6, 7)]) == [0, 1, 0, 0]


@pytest.mark.parametrize("events,message", [
    ([], "at least one event"),
    ([dict(rank=0, start=0, end=1)], "has no 'kind'"),
    ([dict(rank=0, end=1, kind="send")], "has no 'start'"),
    ([dict(rank=-1, start=0, end=1, kind="send")], "rank must be an int >= 0"),
    ([dict(rank=0, start=2, end=1, kind="send")], "before it starts"),
    ([dict(rank=0, start=0, end=float("nan"), kind="send")], "must be finite"),
    (["send"], "must be a dict"),
])
def test_timeline_refuses_bad_input_with_a_sentence(tmp_path, events, message):
    with pytest.raises(ValueError, match=message):
        P.plot_timeline(events, tmp_path / "bad.png")


# --- a run's figures and a training step's ---------------------------------------------

def simulated_run(**flags_at):
    """A simulated allreduce on 2x2 leaf-spine, 32K and 128K; `flags_at`
    {"s32768": busbw over the link} sets a size's busbw to that share of the
    link rate and its flags as the verdict would."""
    fabric = leaf_spine(2, 2, 2, rate=20)
    result = simulate_experiment(fabric, Experiment(engine="sim", algorithm="ring",
                                                    minbytes=1 << 15, maxbytes=1 << 17))
    link = result.link_rate_mbit / 8e3
    for run in result.runs:
        share = flags_at.get(f"s{run['size_bytes']}")
        if share is not None:
            run["busbw_gbps"] = share * link
            run.update(size_flags(share, 6, 1.0, result.link_rate_mbit, fabric.mtu))
    return fabric, result


def test_a_runs_figures_ring_the_size_that_beat_the_link_and_no_other(tmp_path, written):
    fabric, result = simulated_run(s32768=1.2)
    assert result.runs[0]["flags"] == ["over-rate"]
    files = figures.write_figures(fabric, result, tmp_path)
    assert [p.name for p in files] == ["fabric.png", "busbw.png", "timeline.png"]
    for path in files:
        assert P.is_png(path) and path.parent == tmp_path
    fab, busbw, timeline = written
    assert fab.get_suptitle().replace("\n", " ").startswith(   # wrapped to the figure's width
        "t2x2 (RoCEv2), simulated: bytes per link during allreduce (ring), 128KB busiest link at ")
    assert fab.axes[1].get_ylabel() == fabric_plot.SHARE_LABEL
    colour, top, over = colour_scale(fab)
    links = drawn_links(fab)
    largest = result.runs[-1]["links"]
    tier = dict(figures.fabric_nodes(fabric))
    sent = {frozenset((l.a, l.b)): max(largest[i]["tx_bytes"] for i in (l.a_intf, l.b_intf)
                                       if i in largest) for l in fabric.links}
    for link in fabric.links:           # bytes over the busiest link's between the same tiers
        busiest = max(n for ends, n in sent.items()
                      if sorted(tier[e] for e in ends) == sorted((tier[link.a], tier[link.b])))
        share = sent[frozenset((link.a, link.b))] / busiest
        want = top if share == 1 else colour(share)
        assert links[frozenset((link.a, link.b))] == (want, False), (link.a, link.b)
    assert over is None                                           # a share is never over 100 %

    (ax,) = busbw.axes
    assert ax.get_title() == "allreduce, simulated: bus bandwidth by message size (RoCEv2)"
    rate = link_rate(ax)
    assert rate == pytest.approx(20 / 8e3)
    assert curve(ax, "t2x2 allreduce (ring), simulated") == (
        [32768.0, 131072.0], [r["busbw_gbps"] for r in result.runs])
    ringed, notes = flag_marks(ax)
    assert ringed == ([32768.0], [pytest.approx(1.2 * rate)]) and ringed[1][0] > rate
    assert list(notes.values()) == ["over-rate"]

    assert timeline.axes[0].get_title().replace("\n", " ") == (
        f"allreduce (ring), {P.size_label(result.timeline['size_bytes'])}B, 4 ranks, simulated "
        "(RoCEv2): the last iteration, step by step")
    assert lanes(timeline.axes[1]) == ([f"rank {r}" for r in range(4)], 4)


def test_a_clean_run_rings_nothing_and_compared_curves_carry_their_flags(tmp_path, written):
    fabric, clean = simulated_run()
    figures.write_figures(fabric, clean, tmp_path / "clean")
    assert flag_marks(written[1].axes[0]) == (([], []), {})
    assert busbw_plot.FLAGGED_LABEL not in legend_texts(written[1].axes[0])

    fabric, result = simulated_run(s131072=1.05)
    _, other = simulated_run(s32768=1.1)
    names = dict(figures.figures(fabric, result, {"rhd": other}))
    ax = names["busbw.png"].axes[0]
    assert legend_texts(ax)[:2] == ["allreduce (ring), simulated", "allreduce (rhd), simulated"]
    ringed, notes = flag_marks(ax)
    assert sorted(zip(*ringed)) == [(32768.0, curve(ax, "allreduce (rhd), simulated")[1][0]),
                                    (131072.0, curve(ax, "allreduce (ring), simulated")[1][1])]


INFINIBAND_SHARP = """
name: ib2x2
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
links: {server_leaf: {rate_mbit: 20}, leaf_spine: {rate_mbit: 20}}
network: {technology: infiniband, sharp: true}
"""


def test_every_figure_of_a_run_names_its_network_technology():
    """Each figure a run draws says, in its title, the network technology
    the run priced, with the options its file set."""
    fabric = parse_fabric(INFINIBAND_SHARP, "ib2x2.yaml")
    result = simulate_experiment(fabric, Experiment(engine="sim", algorithm="ring",
                                                    minbytes=1 << 15, maxbytes=1 << 17))
    drawn = dict(figures.figures(fabric, result))
    assert set(drawn) == {"fabric.png", "busbw.png", "timeline.png"}
    for name, fig in drawn.items():
        titles = [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
        assert any("InfiniBand (sharp True)" in t for t in titles), (name, titles)


def step_result(kinds=("forward", "backward", "allreduce")):
    forward, backward, collective = kinds
    timeline = []
    for rank in range(2):
        timeline += [dict(rank=rank, lane="compute", kind=forward, label="0", start=0.0, end=0.1),
                     dict(rank=rank, lane="compute", kind=backward, label="0", start=0.1, end=0.3),
                     dict(rank=rank, lane="comm", kind=collective, label="7", launch=0.2,
                          start=0.21, end=0.4 + 0.01 * rank)]
    return {"engine": "sim", "timeline": timeline,
            "step": {"layers": 1, "buckets": [0], "mode": "allreduce", "overlap": True}}


def test_a_steps_figure_has_a_compute_and_a_comm_lane_per_rank(tmp_path, written):
    result = step_result()
    infiniband = parse_fabric("fabric: {kind: single-switch, servers: 2}\nlinks:\n  "
                              "server_leaf: {rate_mbit: 10}\nnetwork: infiniband\n", "ib.yaml")
    out = step_report.plot_step(infiniband, result, tmp_path / "step.png")
    check_png(out, 5, (1000, 1300), (150, 500))
    (fig,) = written
    (ax,) = fig.axes
    assert ax.get_title() == ("One training step over InfiniBand: 1 layers, 1 buckets, "
                              "allreduce, overlap on (sim; compute is timed, not computed)")
    assert ax.get_xlabel() == "seconds after the step's start"
    assert texts(ax.get_yticklabels()) == ["rank 0 compute", "rank 0 comm",
                                           "rank 1 compute", "rank 1 comm"]
    assert legend_texts(ax) == ["forward", "backward", "allreduce"]
    drawn = {}
    bars = [c for c in ax.collections if not isinstance(c, LineCollection)]
    for coll in bars:                                # a bar per event: (colour, top) -> start, end
        for path in coll.get_paths():
            box = path.get_extents()
            key = (to_hex(coll.get_facecolor()[0]), round(box.y0, 6))
            assert key not in drawn
            drawn[key] = (round(box.x0, 6), round(box.x1, 6))
    c = step_report.COLOURS
    assert drawn == {(c["forward"], 0.0): (0.0, 0.1), (c["backward"], 0.0): (0.1, 0.3),
                     (c["allreduce"], 0.9): (0.21, 0.4),
                     (c["forward"], 2.0): (0.0, 0.1), (c["backward"], 2.0): (0.1, 0.3),
                     (c["allreduce"], 2.9): (0.21, 0.41)}
    # the launch tick on each comm lane, and the bucket inside its bar
    ticks = [seg.tolist() for c in ax.collections if isinstance(c, LineCollection)
             for seg in c.get_segments()]
    assert ticks == [[[0.2, 0.9], [0.2, pytest.approx(1.7)]],
                     [[0.2, 2.9], [0.2, pytest.approx(3.7)]]]
    assert texts(ax.texts) == ["7", "7"]


def test_a_step_of_a_kind_without_a_colour_is_drawn_grey_and_named(tmp_path, written):
    # the bars drew an unknown kind grey while the legend raised KeyError
    result = step_result(("forward", "backward", "broadcast"))
    result["step"]["overlap"] = False
    step_report.plot_step(leaf_spine(2, 2, 2, rate=20), result, tmp_path / "s.png")
    ax = written[0].axes[0]
    assert ", broadcast, overlap off (sim;" not in ax.get_title()      # the mode is the step's
    assert ", allreduce, overlap off (sim;" in ax.get_title()
    assert legend_texts(ax) == ["forward", "backward", "broadcast"]
    assert to_hex(ax.get_legend().legend_handles[2].get_facecolor()) == step_report.OTHER_COLOUR




# --- is_png and the writing -----------------------------------------------------

def test_is_png_refuses_text_truncated_and_missing_files(tmp_path):
    good = P.plot_busbw({"a": [(1024, 1.0), (2048, 2.0)]}, tmp_path / "good.png")
    data = good.read_bytes()
    text = tmp_path / "text.png"
    text.write_text("not a picture\n")
    header_only = tmp_path / "header.png"
    header_only.write_bytes(data[:20])
    half = tmp_path / "half.png"
    half.write_bytes(data[: len(data) // 2])
    zero_width = tmp_path / "zero.png"                       # a well-formed IHDR (CRC right) of width 0
    ihdr = b"IHDR" + b"\x00\x00\x00\x00" + data[20:29]
    zero_width.write_bytes(data[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + data[33:])
    bad_crc = tmp_path / "crc.png"
    bad_crc.write_bytes(data[:16] + b"\x00\x00\x00\x01" + data[20:])
    assert P.is_png(good)
    for bad in (text, header_only, half, zero_width, bad_crc, tmp_path / "missing.png", tmp_path):
        assert not P.is_png(bad), bad
    with pytest.raises(ValueError, match="truncated"):
        P.png_size(half)
    with pytest.raises(ValueError, match="0 x"):
        P.png_size(zero_width)
    with pytest.raises(ValueError, match="CRC mismatch"):
        P.png_size(bad_crc)


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "taken.png"
    target.mkdir()                                            # a directory cannot be replaced by a file
    with pytest.raises(OSError):
        P.plot_busbw({"a": [(1024, 1.0)]}, target)
    assert [p.name for p in tmp_path.iterdir()] == ["taken.png"]


def test_drawing_leaves_pyplot_alone(tmp_path):
    # Another default backend, so the Agg check tells whether plots chose Agg
    # itself (on a headless host the default would be Agg anyway).
    script = ("import sys; from report import plots as P; import matplotlib\n"
              "P.plot_busbw({'a': [(1024, 1.0)]}, sys.argv[1])\n"
              "assert 'matplotlib.pyplot' not in sys.modules\n"
              "assert matplotlib.get_backend().lower() == 'agg', matplotlib.get_backend()\n")
    out = tmp_path / "p.png"
    env = dict(os.environ, MPLBACKEND="svg")
    subprocess.run([sys.executable, "-c", script, str(out)], cwd=REPO, env=env, check=True,
                   timeout=60)
    assert P.is_png(out)
