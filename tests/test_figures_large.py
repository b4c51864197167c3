"""Screenshots by test: each figure of a run, for a small fabric (4 ranks)
and for the SuperPOD unit (topologies/superpod-su.yaml, 256 ranks), read
back from the matplotlib objects: titles say measured or simulated, the
busbw legend names the measured curve, the simulated one beside it and the
flagged sizes, every flagged size is marked, a link at exactly 100 % is not
drawn as over it, the aggregated timeline has a lane per server, the large
fabric is drawn in a bounded number of elements, and no two labels overlap.
The 256-rank run is simulated once for the module (one size, a few
seconds); nothing here times anything."""

import copy
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import LineCollection, PathCollection, QuadMesh
from matplotlib.colors import to_hex

from harness.fabrics import leaf_spine
from report import busbw_plot, fabric_plot, fabric_tiers_plot, figures, timeline_heatmap
from runs.experiment import Experiment
from runs.record import ABSENT
from runs.simulated import simulate_experiment
from topologies.fabric import load_fabric

REPO = Path(__file__).resolve().parent.parent


def simulate(fabric, low, high):
    return simulate_experiment(fabric, Experiment(engine="sim", algorithm="ring",
                                                  minbytes=low, maxbytes=high))


def as_measured(record, flags):
    """The record as a lab would leave it: no `simulated` part, every size
    with its simulated time beside it (here 0.8 of the time), `flags` {size: [...]}."""
    record = copy.deepcopy(record)
    record.simulated = ABSENT
    for run in record.runs:
        run["simulated_s"] = 0.8 * run["time_s"]
        run["flags"] = flags.get(run["size_bytes"], [])
    return record


@pytest.fixture(scope="module")
def small():
    fabric = leaf_spine(2, 2, 2, rate=20)
    return fabric, simulate(fabric, 1 << 15, 1 << 19)


@pytest.fixture(scope="module")
def superpod():
    fabric = load_fabric(REPO / "topologies" / "superpod-su.yaml", emulate=False)
    return fabric, simulate(fabric, 1 << 15, 1 << 15)


@pytest.fixture(scope="module")
def superpod_figures(superpod):
    """The 256-rank run's figures, drawn once for the module's tests."""
    return drawn(*superpod)


def drawn(fabric, record, compared=None) -> dict:
    return dict(figures.figures(fabric, record, compared))


def titles(figs: dict) -> list:
    out = []
    for fig in figs.values():
        out += [fig.get_suptitle()] + [ax.get_title() for ax in fig.axes]
    return [t for t in out if t]


def legend(ax) -> list:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def line(ax, label):
    (found,) = [l for l in ax.lines if l.get_label() == label]
    return list(found.get_xdata()), list(found.get_ydata())


def overlapping(texts, fig) -> list:
    """The pairs of visible, non-empty texts whose drawn boxes overlap."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts
             if t.get_visible() and t.get_text()]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
            if ba.overlaps(bb) and ba.width > 0 and bb.width > 0]


# --- titles: measured or simulated --------------------------------------------------

@pytest.mark.parametrize("case", ["small", "superpod"])
def test_a_simulated_runs_titles_say_simulated_and_never_measured(case, request):
    figs = (request.getfixturevalue("superpod_figures") if case == "superpod"
            else drawn(*request.getfixturevalue(case)))
    assert list(figs) == ["fabric.png", "busbw.png", "timeline.png"]
    heads = titles(figs)
    assert sum("simulated" in t for t in heads) == 3                # one title per figure
    assert not any("measured" in t for t in heads)
    (ax,) = figs["busbw.png"].axes
    assert legend(ax)[0].endswith("allreduce (ring), simulated")
    assert not any(l.get_linestyle() == (0, (4, 2)) for l in ax.lines)   # nothing beside


@pytest.mark.parametrize("case", ["small", "superpod"])
def test_a_measured_runs_busbw_has_the_simulated_curve_beside_and_every_flag_marked(
        case, request):
    fabric, simulated = request.getfixturevalue(case)
    sizes = [r["size_bytes"] for r in simulated.runs]
    record = as_measured(simulated, {sizes[0]: ["over-rate", "below-resolution"]})
    figs = drawn(fabric, record)
    heads = titles(figs)
    assert sum("measured" in t for t in heads) == 3
    (ax,) = figs["busbw.png"].axes
    assert ax.get_title().replace("\n", " ") == ("allreduce, measured, the simulator's dashed beside: "
                              "bus bandwidth by message size (RoCEv2)")
    name = f"{fabric.name} allreduce (ring)"
    assert legend(ax) == [f"{name}, measured", f"{name}, simulated",
                          f"link rate ({record.link_rate_mbit / 8e3:g} GB/s)",
                          busbw_plot.FLAGGED_LABEL]
    measured = line(ax, f"{name}, measured")
    beside = line(ax, f"{name}, simulated")
    assert beside[0] == measured[0] == [float(s) for s in sizes]
    assert beside[1] == pytest.approx([b / 0.8 for b in measured[1]])   # busbw goes as 1/time
    (ring,) = [l for l in ax.lines if l.get_label() == busbw_plot.FLAGGED_LABEL]
    assert list(ring.get_xdata()) == [float(sizes[0])]
    assert [t.get_text() for t in ax.texts] == ["over-rate\nbelow-resolution"]
    assert not overlapping(ax.texts + ax.get_legend().get_texts(), figs["busbw.png"])


def test_every_flagged_size_of_every_curve_is_marked_even_without_a_figure(small):
    fabric, simulated = small
    sizes = [r["size_bytes"] for r in simulated.runs]
    record = as_measured(simulated, {s: ["below-resolution"] for s in sizes[:2]})
    record.runs[1]["busbw_gbps"] = math.nan                        # no figure at the second
    other = as_measured(simulated, {sizes[-1]: ["behind the simulator: the host?"]})
    ax = drawn(fabric, record, {"rhd": other})["busbw.png"].axes[0]
    marks = [l for l in ax.lines if l.get_label() in (busbw_plot.FLAGGED_LABEL, "_")]
    at = sorted(x for l in marks for x in l.get_xdata())
    assert at == sorted(float(s) for s in (sizes[0], sizes[1], sizes[-1]))
    (cross,) = [l for l in marks if l.get_marker() == "X"]
    assert list(cross.get_xdata()) == [float(sizes[1])] and list(cross.get_ydata()) == [0.0]
    assert legend(ax).count(busbw_plot.FLAGGED_LABEL) == 1
    # the two neighbouring sizes of one flag are written once, with the sizes they span
    assert sorted(t.get_text() for t in ax.texts) == sorted([
        "behind the simulator: the host?",
        f"below-resolution: {busbw_plot.size_label(sizes[0])}..{busbw_plot.size_label(sizes[1])}"])


# --- colours: exactly 100 % is not over it --------------------------------------------

def test_the_busiest_link_of_a_tier_takes_the_top_colour_never_the_over_colour(small):
    fabric, record = small
    fig = drawn(fabric, record)["fabric.png"]
    ax = fig.axes[0]
    mesh = next(c for c in fig.axes[1].collections if isinstance(c, QuadMesh))
    top = to_hex(mesh.to_rgba(1.0))
    colours = [to_hex(c) for coll in ax.collections if isinstance(coll, LineCollection)
               for c in coll.get_colors()]
    assert top in colours and fabric_plot.OVER_COLOUR not in colours
    assert not fig.axes[1].patches                                    # no over-arrow on the bar
    shares = [v for _, _, v in figures.link_shares(fabric, record.runs[-1]["links"])]
    assert max(shares) == 1.0 and all(0 <= v <= 1 for v in shares)


@pytest.mark.parametrize("saturated", [1.0, 1.0000000000000002])
def test_a_saturated_link_reads_100_percent_in_the_title_and_in_the_top_colour(small, saturated):
    fabric, record = small
    record = copy.deepcopy(record)
    for link in record.runs[-1]["links"].values():
        link["mean_util"] = min(link["mean_util"], 0.9)
    next(iter(record.runs[-1]["links"].values()))["mean_util"] = saturated
    fig = drawn(fabric, record)["fabric.png"]
    assert "busiest link at mean 100% of its rate" in fig.get_suptitle()
    edges = figures.link_utilisation(fabric, record.runs[-1]["links"])
    util = fabric_plot.fabric_figure(figures.fabric_nodes(fabric), edges)
    drawn_colours = [to_hex(c) for coll in util.axes[0].collections
                     if isinstance(coll, LineCollection) for c in coll.get_colors()]
    assert fabric_plot.OVER_COLOUR not in drawn_colours


def test_uplink_spread_is_written_beside_each_switch_and_red_when_uneven(small):
    fabric, record = small
    spread = figures.uplink_spread(fabric, record.runs[-1]["links"])
    assert set(spread) == {"leaf1", "leaf2"}
    assert spread == pytest.approx(record.runs[-1]["ecmp_imbalance"])   # the table's figure
    ax = drawn(fabric, record)["fabric.png"].axes[0]
    marks = sorted((t.get_text(), to_hex(t.get_color())) for t in ax.texts
                   if t.get_gid() == fabric_plot.MARK_GID)
    assert marks == sorted((f"x{v:.2f}", to_hex(fabric_plot.IMBALANCE_COLOURS[
        v >= fabric_plot.IMBALANCE_WARN])) for v in spread.values())


# --- the large fabric: by tier, bundled, bounded ------------------------------------------

def test_the_superpod_fabric_is_drawn_by_tier_in_a_bounded_number_of_elements(
        superpod, superpod_figures):
    fabric, record = superpod
    assert (len(fabric.endpoints), len(fabric.switches), len(fabric.links)) == (256, 44, 544)
    fig = superpod_figures["fabric.png"]
    ax = fig.axes[0]
    segments = sum(len(c.get_segments()) for c in ax.collections if isinstance(c, LineCollection))
    points = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    assert segments <= 150 and points <= 40 and len(ax.texts) <= 60
    summary = ax.get_title(loc="left")
    assert summary.startswith(f"300 nodes, 544 links as {segments} bundles between {points} groups")
    rows = [t.get_text() for t in ax.get_yticklabels()]
    assert rows == ["GPU / server (256 in 8 groups)", "node (32 in 8 groups)", "leaf (8)",
                    "spine / agg (4)"]
    names = {t.get_text() for t in ax.texts}
    assert {f"GPUs on leaf{i} (32)" for i in range(1, 9)} <= names
    assert fig.axes[1].get_ylabel() == fabric_tiers_plot.SPREAD_LABEL
    assert not overlapping([t for t in ax.texts if t.get_gid() != fabric_plot.MARK_GID], fig)


def test_bundles_are_coloured_by_their_max_over_mean():
    nodes = [(f"h{i}", 0) for i in range(40)] + [("leaf1", 2), ("leaf2", 2)]
    edges = [(f"h{i}", "leaf1", 0.5) for i in range(20)]                    # even: 1.0
    edges += [(f"h{i}", "leaf2", 1.0 if i == 20 else 0.25) for i in range(20, 40)]
    groups = {f"h{i}": f"on leaf{1 + i // 20}" for i in range(40)}
    fig = fabric_tiers_plot.fabric_tiers_figure(nodes, edges, groups=groups)
    found, inside = fabric_tiers_plot.bundles(
        fabric_plot.check_edges(edges, dict(nodes)),
        fabric_tiers_plot.fold(dict(nodes), groups))
    assert inside == 0 and [(b.a, b.b, b.links) for b in found] == [
        ("on leaf1", "leaf1", 20), ("on leaf2", "leaf2", 20)]
    assert found[0].spread == 1.0 and found[1].spread == pytest.approx(1.0 / (5.75 / 20))
    mesh = next(c for c in fig.axes[1].collections if isinstance(c, QuadMesh))
    (coll,) = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    colours = [to_hex(c) for c in coll.get_colors()]
    assert colours[0] == to_hex(mesh.to_rgba(1.0))                           # even: the bottom
    assert colours[1] == to_hex(mesh.to_rgba(fabric_tiers_plot.SPREAD_TOP))  # 3.48: the top
    assert len(fig.axes[1].patches) == 1                                     # and an arrow


# --- the timeline: per rank when few, per server when many -------------------------------

def test_a_small_timelines_labels_do_not_overlap(small):
    fabric, record = small
    fig = drawn(fabric, record)["timeline.png"]
    band, ax = fig.axes
    assert len(ax.get_yticklabels()) == 4
    assert not overlapping(ax.texts, fig)
    assert not overlapping(ax.get_yticklabels() + band.texts, fig)


def test_the_superpod_timeline_has_a_lane_per_server_and_a_busy_share(superpod_figures):
    fig = superpod_figures["timeline.png"]
    top, ax, bar = fig.axes
    (mesh,) = [c for c in ax.collections if isinstance(c, QuadMesh)]
    share = np.asarray(mesh.get_array()).reshape(32, timeline_heatmap.BINS)
    assert share.shape == (32, timeline_heatmap.BINS)                    # 256 ranks, 32 servers
    assert 0 <= share.min() and share.max() <= 1 and share.max() > 0.5
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"h{i} (8)" for i in range(1, 33)]
    assert top.get_title().endswith("256 ranks, simulated (RoCEv2): the last iteration, "
                                    "busy share per server")
    assert bar.get_ylabel() == timeline_heatmap.BUSY_LABEL
    assert [t.get_text() for t in top.get_legend().get_texts()] == [
        "least to most busy lane", "all ranks"]
    assert not overlapping(ax.get_yticklabels(), fig)


def test_ranks_without_servers_are_folded_into_at_most_64_lanes():
    events = [dict(rank=r, start=0.001 * (r % 7), end=0.001 * (r % 7) + 0.002, kind="send")
              for r in range(1000)]
    fig = timeline_heatmap.timeline_busy_figure(events, lane_of={r: f"h{r}" for r in range(1000)})
    ax = fig.axes[1]
    (mesh,) = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert np.asarray(mesh.get_array()).size == 63 * timeline_heatmap.BINS   # 16 ranks a lane
    assert ax.get_yticklabels()[0].get_text() == "ranks 0-15 (16)"
    assert not overlapping(ax.get_yticklabels(), fig)
