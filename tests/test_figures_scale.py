"""Every figure kind a run writes (fabric.png, busbw.png, timeline.png,
step.png), drawn for 4 ranks and for 16,384 (topologies/sim/leaf-spine-16k.yaml,
simulated), read back through matplotlib's renderer: no axes left empty, no
two texts whose drawn boxes overlap (every Text of the figure: titles, tick
labels, legends, labels in and over the plot), and titles that say what the
tables say. The 16,384-rank simulator records no step timeline (it prices
the ring step by step) and a hybrid step of that size is not simulated here:
their timeline and step figures are drawn from events of that many ranks
made for the test, which is what the figures' handling of so many ranks
needs. Nothing here times anything."""

import copy
import itertools
import math
import re
from pathlib import Path

import pytest
from matplotlib.colors import to_hex
from matplotlib.text import Text

from report import figures, tables
from report.step_report import step_figure, step_text
from report.timeline_plot import KIND_COLOURS
from runs.experiment import Experiment, experiment_from
from runs.record import ABSENT
from runs.simulated import simulate_experiment
from runs.training import simulate_step
from topologies.fabric import load_fabric

REPO = Path(__file__).resolve().parent.parent
RANKS_16K = 16384


# --- what a figure must be ---------------------------------------------------------

def texts(fig) -> list:
    """The texts the figure draws: every visible, non-empty Text but the
    labels of ticks outside their axis' view (which matplotlib keeps and
    does not draw)."""
    fig.canvas.draw()
    ticks, drawn_ticks = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks |= {id(tick.label1), id(tick.label2)}
            for tick in axis._update_ticks():          # those drawn
                drawn_ticks |= {id(tick.label1), id(tick.label2)}
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()
            and (id(t) not in ticks or id(t) in drawn_ticks)]


def overlapping(fig) -> list:
    """The pairs of the figure's texts whose drawn boxes overlap."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts(fig)]
    boxes = [(s, b) for s, b in boxes if b.width > 0 and b.height > 0]
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
            if ba.overlaps(bb)]


def outside(fig) -> list:
    """The texts drawn (partly) outside the figure: cut off in the PNG."""
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    page = fig.bbox
    return [t.get_text() for t in texts(fig) 
            for b in [t.get_window_extent(renderer)]
            if b.width > 0 and (b.x0 < page.x0 - 1 or b.x1 > page.x1 + 1
                                or b.y0 < page.y0 - 1 or b.y1 > page.y1 + 1)]


def empty_axes(fig) -> list:
    """Axes that draw nothing: no line, collection, patch or image with data."""
    def drawn(ax):
        lines = any(len(l.get_xdata()) for l in ax.lines)
        colls = any(len(c.get_paths()) for c in ax.collections)
        return lines or colls or bool(ax.patches) or bool(ax.images)
    return [ax.get_title() or ax.get_ylabel() or str(ax) for ax in fig.axes if not drawn(ax)]


def readable(fig) -> None:
    assert not empty_axes(fig), empty_axes(fig)
    assert not overlapping(fig), overlapping(fig)
    assert not outside(fig), outside(fig)


def as_measured(record, flag):
    """The record as a lab would leave it, every size flagged `flag` and its
    simulated time beside (0.8 of the time), each link's peak above its mean."""
    record = copy.deepcopy(record)
    record.simulated = ABSENT
    record.probe, record.idle_latency = ["h1", "h2"], {"p50_us": 100.0, "p99_us": 200.0}
    for run in record.runs:
        run["simulated_s"] = 0.8 * run["time_s"]
        run["flags"] = [flag]
        run.update(latency={"p50_us": 1.0, "p99_us": 2.0, "max_us": 3.0}, cpu_busy_pct=10.0,
                   measured_over_simulated=1.25)
        for link in run["links"].values():
            link["peak_util"] = min(1.0, link["mean_util"] * 1.2)
    return record


def ring_events(ranks: int, steps: int = 6) -> list:
    """A ring's steps as the agents record them: each rank's send and its
    receive of a step at once."""
    events = []
    for r in range(ranks):
        for s in range(steps):
            t = 0.01 * s + 1e-5 * (r % 7)
            events += [{"rank": r, "step": s, "kind": "send", "start": t, "end": t + 0.002,
                        "phase": "ring"},
                       {"rank": r, "step": s, "kind": "recv" if s >= steps // 2 else "reduce",
                        "start": t, "end": t + 0.01, "phase": "ring"}]
    return events


# --- the runs ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small():
    """4 ranks, an 18-size sweep (8 B to 1 MiB)."""
    fabric = load_fabric(REPO / "topologies" / "default.yaml", emulate=False)
    return fabric, simulate_experiment(fabric, Experiment(engine="sim", algorithm="ring",
                                                          minbytes=8, maxbytes=1 << 20,
                                                          stepfactor=2))


@pytest.fixture(scope="module")
def large():
    """16,384 ranks, three sizes."""
    fabric = load_fabric(REPO / "topologies" / "sim" / "leaf-spine-16k.yaml", emulate=False)
    return fabric, simulate_experiment(fabric, Experiment(engine="sim", algorithm="ring",
                                                          minbytes=1 << 10, maxbytes=1 << 20,
                                                          stepfactor=32))


def drawn(fabric, record) -> dict:
    return dict(figures.figures(fabric, record))


def test_the_runs_have_the_ranks_they_claim(small, large):
    assert len(small[1].ranks) == 4 and len(small[1].runs) == 18
    assert len(large[1].ranks) == RANKS_16K


# --- fabric.png, busbw.png, timeline.png ---------------------------------------------

@pytest.mark.parametrize("case", ["small", "large"])
@pytest.mark.parametrize("how", ["simulated", "measured"])
def test_every_run_figure_is_readable_at_4_and_16384_ranks(case, how, request):
    fabric, record = request.getfixturevalue(case)
    if how == "measured":
        record = as_measured(record, "below-resolution")
    if record.timeline is None or not record.timeline.get("events"):
        record = copy.copy(record)
        record.timeline = {"size_bytes": record.runs[-1]["size_bytes"],
                           "events": ring_events(len(record.ranks))}
    figs = drawn(fabric, record)
    assert set(figs) == {"fabric.png", "busbw.png", "timeline.png"}
    for name, fig in figs.items():
        assert not empty_axes(fig), (name, empty_axes(fig))
        assert not overlapping(fig), (name, overlapping(fig))
        assert not outside(fig), (name, outside(fig))


def test_a_sweep_flagged_throughout_reads_one_flag_label(small):
    fabric, record = small
    fig = drawn(fabric, as_measured(record, "below-resolution"))["busbw.png"]
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.texts] == ["below-resolution: 8..1M"]


@pytest.mark.parametrize("case", ["small", "large"])
def test_the_fabric_title_says_the_busiest_link_as_the_table_does(case, request):
    fabric, record = request.getfixturevalue(case)
    title = drawn(fabric, record)["fabric.png"].get_suptitle()
    # the simulated table: "busiest link" is the mean utilisation, its last size's row
    row = tables.sim_table(record).splitlines()[-2].split()
    mean = re.search(r"busiest link at mean (\d+)% of its rate", title)
    assert mean and f"{mean.group(1)}%" == row[3], (title, row)
    measured = as_measured(record, "below-resolution")
    title = drawn(fabric, measured)["fabric.png"].get_suptitle()
    # a lab's table: "peak util" is the peak utilisation
    last = str(measured.runs[-1]["size_bytes"])
    (line,) = [l for l in tables.fabric_table(measured, measured.link_rate_mbit).splitlines()
               if l.split()[0] == last]
    peak = re.search(r"busiest link at peak (\d+)% \(mean (\d+)%\)", title)
    assert peak and f"{peak.group(1)}%" == line.split()[4], (title, line)


def test_a_ring_step_is_drawn_as_a_send_and_a_receive_at_once(small):
    fabric, record = small
    record = copy.copy(record)
    record.timeline = {"size_bytes": 1 << 20, "events": ring_events(4)}
    fig = drawn(fabric, record)["timeline.png"]
    lanes = fig.axes[1]
    bars = {}                     # kind (by its colour): (left, top, bottom) of each bar
    for coll in lanes.collections:
        colour = to_hex(coll.get_facecolor()[0])
        bars[colour] = [(p.vertices[:, 0].min(), p.vertices[:, 1].min(), p.vertices[:, 1].max())
                        for p in coll.get_paths()]
    send = bars[to_hex(KIND_COLOURS["send"])]
    recv = bars[to_hex(KIND_COLOURS["reduce"])]
    # a send and the receive of the same step start together, one above the other
    (sx, _, sy1), (rx, ry0, _) = send[0], recv[0]
    assert sx == pytest.approx(rx) and sy1 <= ry0
    assert "at once" in fig.legends[0].get_title().get_text()


# --- step.png ----------------------------------------------------------------------

def step_of(path):
    fabric = load_fabric(path, emulate=False)
    return fabric, simulate_step(fabric, experiment_from(fabric, {"engine": "sim"}))


@pytest.fixture(scope="module")
def hybrid():
    return step_of(REPO / "topologies" / "hybrid-step.yaml")


def test_a_simulated_hybrid_step_draws_its_timeline(hybrid):
    fabric, result = hybrid
    assert result["timeline"], "the simulated hybrid step recorded no timeline"
    kinds = {e["kind"] for e in result["timeline"]}
    assert {"forward", "backward"} <= kinds and {"tp", "pp", "dp"} & kinds
    fig = step_figure(fabric, result)
    readable(fig)
    par = result["step"]["parallel"]
    what = f"TP {par['tp']} x PP {par['pp']} x DP {par['dp']}"
    assert what in fig.axes[0].get_title() and what in step_text(result)


def test_a_4_rank_step_is_readable(tmp_path):
    """The data-parallel step of docs/training.md, simulated on the default fabric."""
    text = (REPO / "topologies" / "default.yaml").read_text() + (
        "experiment:\n  engine: sim\n  step: {layers: 8, params: 512Ki, fwd_ms: 50, "
        "bucket: 256K, mode: allreduce}\n")
    (tmp_path / "step.yaml").write_text(text)
    fabric, result = step_of(tmp_path / "step.yaml")
    assert len({e["rank"] for e in result["timeline"]}) == 4
    fig = step_figure(fabric, result)
    readable(fig)
    assert f"{len(result['step']['buckets'])} buckets" in fig.axes[0].get_title()


def test_a_16384_rank_step_draws_16_ranks_and_says_so(hybrid):
    fabric, result = hybrid
    result = copy.deepcopy(result)
    n = len({e["rank"] for e in result["timeline"]})
    result["timeline"] = [dict(e, rank=e["rank"] + n * k) for k in range(RANKS_16K // n)
                          for e in result["timeline"]]
    fig = step_figure(fabric, result)
    readable(fig)
    assert "16 of its 16,384 ranks" in fig.axes[0].get_title()
    assert len(fig.axes[0].get_yticklabels()) == 32            # 16 ranks, two lanes each
    assert math.isclose(fig.get_figheight(), 1.2 + 0.7 * 16)
