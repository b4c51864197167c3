"""The figures: each function writes a complete PNG of a plausible size, from a
small fabric up to a SuperPOD-sized one, refuses empty or malformed input with
a sentence, and is_png tells a whole PNG from text and truncated files."""

import os
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from traffic.report import plots as P
from traffic.report.timeline_plot import _rows_for

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


def check_png(path, min_kb, width_range, height_range):
    assert isinstance(path, Path) and P.is_png(path)
    assert path.stat().st_size > min_kb * 1024
    width, height = P.png_size(path)
    assert width_range[0] <= width <= width_range[1]
    assert height_range[0] <= height <= height_range[1]


# --- draw_fabric ----------------------------------------------------------------

def test_small_fabric_is_a_png(tmp_path):
    nodes, edges = small_fabric()
    out = P.draw_fabric(nodes, edges, tmp_path / "small.png", title="2x2 leaf-spine")
    assert out == tmp_path / "small.png"
    check_png(out, 10, (500, 1200), (300, 900))


def test_superpod_fabric_is_capped_in_width(tmp_path):
    nodes, edges = superpod_fabric()
    out = P.draw_fabric(nodes, edges, str(tmp_path / "superpod.png"), title="SuperPOD")
    check_png(out, 50, (2000, 2400), (400, 1200))         # width capped at 24 in x 100 dpi


def test_fabric_with_skipped_tiers_and_another_unit(tmp_path):
    nodes = [("a", 0), ("b", 0), ("$x$", 2), ("core", 4)]  # '$' is text, not mathtext
    edges = [("a", "$x$", 3.0), ("b", "$x$", float("nan")), ("$x$", "core", 9.5)]
    out = P.draw_fabric(nodes, edges, tmp_path / "sub" / "dir" / "gbps.png", unit="Gbit/s")
    check_png(out, 5, (500, 1200), (250, 900))


def test_fabric_input_is_left_untouched(tmp_path):
    nodes, edges = small_fabric()
    before = (list(nodes), list(edges))
    P.draw_fabric(nodes, edges, tmp_path / "f.png")
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


# --- plot_busbw -------------------------------------------------------------------

def test_busbw_two_curves_and_the_link_rate(tmp_path):
    sizes = [2 ** k for k in range(15, 27)]                   # 32K .. 64M
    curves = {"ring": [(s, 11.5 * s / (s + 2e6)) for s in sizes],
              "rhd": [(s, 10.5 * s / (s + 1e6)) for s in reversed(sizes)]}   # order does not matter
    out = P.plot_busbw(curves, tmp_path / "busbw.png", title="allreduce, 8 ranks", link_gbps=12.5)
    check_png(out, 20, (600, 1200), (350, 800))


def test_busbw_single_point_and_gaps(tmp_path):
    curves = {"one": [(1 << 20, 5.0)], "gap": [(1 << 10, 1.0), (1 << 11, float("nan")), (1 << 12, 2.0)]}
    check_png(P.plot_busbw(curves, tmp_path / "b.png"), 10, (600, 1200), (350, 800))


@pytest.mark.parametrize("size,text", [
    (1, "1"), (512, "512"), (32 * 1024, "32K"), (1 << 20, "1M"), (64 << 20, "64M"),
    (1 << 30, "1G"), (1536, "1.5K")])
def test_size_labels_are_powers_of_1024(size, text):
    assert P.size_label(size) == text


@pytest.mark.parametrize("curves,link,message", [
    ({}, None, "at least one curve"),
    ({"a": []}, None, "curve 'a' has no points"),
    ({"a": [(0, 1.0)]}, None, "not > 0"),
    ({"a": [(1024, -1.0)]}, None, "finite and >= 0"),
    ({"a": [(1024,)]}, None, "must be \\(size_bytes, busbw_GBps\\)"),
    ({"a": [(1024, 1.0)]}, 0, "link_gbps must be > 0"),
])
def test_busbw_refuses_bad_input_with_a_sentence(tmp_path, curves, link, message):
    with pytest.raises(ValueError, match=message):
        P.plot_busbw(curves, tmp_path / "bad.png", link_gbps=link)


# --- plot_timeline ----------------------------------------------------------------

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


def test_timeline_eight_ranks_three_phases(tmp_path):
    out = P.plot_timeline(hierarchical_allreduce_events(), tmp_path / "timeline.png",
                          title="hierarchical allreduce")
    check_png(out, 30, (900, 1400), (350, 900))


def test_timeline_without_phases_and_with_zero_length_events(tmp_path):
    events = [dict(rank=1, start=0.0, end=0.0, kind="send"),
              dict(rank=0, start=0.001, end=0.003, kind="recv", step=0)]
    check_png(P.plot_timeline(events, tmp_path / "t.png"), 5, (900, 1400), (200, 600))


def test_a_thousand_ranks_fit_the_height_cap_in_a_bounded_file(tmp_path):
    events = hierarchical_allreduce_events(1024)              # 30720 events: no labels in bars
    out = P.plot_timeline(events, tmp_path / "big.png", title="1024 ranks")
    assert P.is_png(out)
    assert P.png_size(out) == (1100, 4000)                    # 11 in wide, capped at 40 in x 100 dpi
    assert 50 * 1024 < out.stat().st_size < 2 * 1024 * 1024


def test_overlapping_phases_take_separate_rows():
    assert _rows_for([(0, 3), (2, 5), (3, 4), (6, 7)]) == [0, 1, 0, 0]


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
    script = ("import sys; from traffic.report import plots as P; import matplotlib\n"
              "P.plot_busbw({'a': [(1024, 1.0)]}, sys.argv[1])\n"
              "assert 'matplotlib.pyplot' not in sys.modules\n"
              "assert matplotlib.get_backend().lower() == 'agg', matplotlib.get_backend()\n")
    out = tmp_path / "p.png"
    env = dict(os.environ, MPLBACKEND="svg")
    subprocess.run([sys.executable, "-c", script, str(out)], cwd=REPO, env=env, check=True,
                   timeout=60)
    assert P.is_png(out)
