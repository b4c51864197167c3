"""A training step's report (runs/training.py): the console text, one
CSV row per timed step and one per collective of the last, and step.png,
the last step per rank with a compute lane and a communication lane."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from runs.experiment import size_text
from report.canvas import new_figure, save
from report.figures import network_title

LABELS_UP_TO = 400          # events; more: no bucket numbers in the bars
RANKS_SHOWN = 16            # ranks drawn at most: more, and an evenly spaced few of them
HOST_BUSY_PCT = 90          # above this, the host's CPU may have bent the times


def _s(x: float) -> str:
    return f"{x:.3f} s"


def step_text(result: dict) -> str:
    st = result["step"]
    if st["mode"] == "parallel":
        return parallel_text(result)
    if st["mode"] == "trace":
        return trace_text(result)
    reduce_ = ("allreduce (" + st["algorithm"] + ")" if st["mode"] == "allreduce"
               else "allgather before the forward pass, reducescatter after the backward")
    layer = result["step"]
    lines = [
        f"# Training step: {st['layers']} layers, {st['params']:,} parameters "
        f"({st['gradient_bytes']:,} B of {st['dtype']} gradients), {len(st['buckets'])} "
        f"bucket(s) of up to {size_text(st['bucket_bytes'])}, {reduce_} per bucket "
        f"({st['op']}), overlap {'on' if st['overlap'] else 'off'}, {st['in_flight']} in "
        f"flight; {st['ranks']} ranks, engine {result['engine']}",
        f"# Compute stands for itself as time ({layer['compute_s']:.3f} s a step): each "
        "layer's forward and backward pass is a timer on the rank, not a GPU",
        "#  step      step time   compute     comm        exposed     overlap   #wrong"]
    for i, r in enumerate(result["runs"]):
        wrong = "N/A" if r.get("wrong") is None else str(r["wrong"])
        lines.append(f"   {i + 1:<9d} {_s(r['step_s']):<11} {_s(r['compute_s']):<11} "
                     f"{_s(r['comm_s']):<11} {_s(r['exposed_s']):<11} "
                     f"{r['overlap_efficiency']:>6.0%}   {wrong:>6}")
    mid = result["summary"]
    added = mid["exposed_s"] / mid["compute_s"] if mid["compute_s"] else 0.0
    lines.append(f"# the median step: {_s(mid['step_s'])} = compute {_s(mid['compute_s'])} + "
                 f"exposed communication {_s(mid['exposed_s'])} (the fabric adds {added:.0%} "
                 f"to the step); communication {_s(mid['comm_s'])}, "
                 f"{mid['overlap_efficiency']:.0%} of it hidden behind compute")
    lines += _predicted_lines(result)
    lines.append("#  collective                 bytes      launch     start     finish  "
                 "(s after the step's start; the last step over all ranks)")
    for c in result["collectives"]:
        lines.append(f"   {c['name']:<24} {c['bytes']:>9,}  {c['launch']:>8.3f}  "
                     f"{c['start']:>8.3f}  {c['finish']:>8.3f}")
    host = result.get("host")
    if host:
        lines.append(_host_line(host))
    return "\n".join(lines)


def parallel_text(result: dict) -> str:
    """A hybrid step (runs/parallel_step.py)."""
    st, par = result["step"], result["step"]["parallel"]
    lines = [f"# Hybrid training step: TP {par['tp']} x PP {par['pp']} x DP {par['dp']} over "
             f"{st['ranks']} ranks, {par['micro_batches']} micro-batch(es) in 1F1B, "
             f"{st['layers']} layers, activations {par['activation']:,} B a micro-batch, "
             f"{st['gradient_bytes']:,} B of {st['dtype']} gradients a rank; "
             f"{st['collectives']} collectives; engine {result['engine']}",
             f"# Compute stands for itself as time ({st['compute_s']:.3f} s a rank a step)",
             "#  step      step time   compute     comm        exposed   #wrong"]
    for i, r in enumerate(result["runs"]):
        wrong = "N/A" if r.get("wrong") is None else str(r["wrong"])
        lines.append(f"   {i + 1:<9d} {_s(r['step_s']):<11} {_s(r['compute_s']):<11} "
                     f"{_s(r['comm_s']):<11} {_s(r['exposed_s']):<11} {wrong:>6}")
    p = result["predicted"]["parallel"]
    kinds = ", ".join(f"{k.upper()} {v:.3f} s" for k, v in p["rank0_comm_by_kind_s"].items())
    lines.append(f"# simulator (each wave of concurrent collectives replayed on this fabric): "
                 f"step {_s(p['step_s'])}, exposed {_s(p['exposed_s'])}; rank 0's "
                 f"collectives alone: {kinds}")
    if result["engine"] != "sim" and result.get("measured_over_predicted"):
        lines.append(f"# measured / simulated step: {result['measured_over_predicted']:.2f}")
    if result.get("host"):
        lines.append(_host_line(result["host"]))
    return "\n".join(lines)


def trace_text(result: dict) -> str:
    """A recorded job's iteration replayed (runs/trace_replay.py)."""
    st, p = result["step"], result["predicted"]["trace"]
    kinds = ", ".join(f"{k} x{n}" for k, n in st["by_kind"].items())
    lines = [f"# Trace replay: {st['path']} ({st['format']}, {st['iteration'] or 'one iteration'})"
             f", {st['world']} ranks; {st['collectives']} operations ({kinds}); "
             f"engine {result['engine']}"]
    if st["replicas"] > 1:
        lines.append(f"# scaled: the recorded job repeated over {st['replicas']} data-parallel "
                     f"replicas ({st['ranks']} ranks); groups spanning the job span every "
                     "replica, the others stay in theirs")
    lines += [f"# Compute stands for itself as time: the trace's measured spans "
              f"({st['compute_s']:.3f} s on the busiest rank) and the host's own time between "
              "them, as timers, not GPUs",
              "#  iteration  time        compute+host comm       exposed   #wrong"]
    for i, r in enumerate(result["runs"]):
        wrong = "N/A" if r.get("wrong") is None else str(r["wrong"])
        lines.append(f"   {i + 1:<10d} {_s(r['step_s']):<11} {_s(r['compute_s']):<11} "
                     f"{_s(r['comm_s']):<11} {_s(r['exposed_s']):<9} {wrong:>6}")
    t = p["trace"]
    low, high = t["iteration_range_s"]
    lines += [f"# the trace measured {_s(t['iteration_s'])} an iteration (the mean of its ranks'"
              f", {low:.3f} to {high:.3f} s; its operations' own times through this replay: "
              f"{_s(t['reproduced_s'])}); on this fabric the "
              f"simulator gives {_s(p['step_s'])}, {_s(p['exposed_s'])} of it exposed "
              "communication",
              "#  exposed communication (the last rank to end)   in the trace   on this fabric"]
    for label in sorted(set(t["exposed_by_kind_s"]) | set(p["exposed_by_kind_s"])):
        lines.append(f"   {label:<46} {_s(t['exposed_by_kind_s'].get(label, 0.0)):>12}   "
                     f"{_s(p['exposed_by_kind_s'].get(label, 0.0)):>12}")
    lines.append("# critical path on this fabric: " + ", ".join(
        f"{k} {v:.3f} s" for k, v in sorted(p["critical_path_s"].items(),
                                            key=lambda kv: -kv[1])))
    if result["engine"] != "sim" and result.get("measured_over_predicted"):
        lines.append(f"# measured / simulated iteration: {result['measured_over_predicted']:.2f}")
    if result.get("host"):
        lines.append(_host_line(result["host"]))
    return "\n".join(lines)


def _predicted_lines(result: dict) -> list:
    on, off = result["predicted"]["overlap_on"], result["predicted"]["overlap_off"]
    lines = [f"# simulator (each bucket's collective simulated alone on this fabric): overlap "
             f"on {_s(on['step_s'])} (exposed {_s(on['exposed_s'])}), off {_s(off['step_s'])} "
             f"(exposed {_s(off['exposed_s'])}); with overlap a step takes at least "
             f"{_s(on['lower_bound_s'])}, the larger of compute and communication"]
    if result["engine"] != "sim" and result.get("measured_over_predicted"):
        lines.append(f"# measured / simulated step: {result['measured_over_predicted']:.2f}")
    return lines


def _host_line(host: dict) -> str:
    line = (f"# host: CPU {host['cpu_busy_pct']:.0f}% busy, ovs-vswitchd "
            f"{host['ovs_core_pct']:.0f}% of a core, busiest link peak "
            f"{host['busiest_link_peak_util']:.0%}, {host['drops']} drops")
    if host["shortfalls"] or host["cpu_busy_pct"] > HOST_BUSY_PCT:
        line += ("; note: the host fell behind (links that sent less than their queue "
                 "held, or a CPU near full): communication times include the host's own")
    return line


CSV_FIELDS = ["kind", "step", "step_s", "compute_s", "comm_s", "exposed_s",
              "overlap_efficiency", "name", "collective", "bucket", "bytes", "launch_s",
              "start_s", "finish_s", "wrong"]
STEP_FIGURES = ("step_s", "compute_s", "comm_s", "exposed_s", "overlap_efficiency")


def _title(fabric, result: dict, some: str) -> str:
    st = result["step"]
    over = network_title(fabric)
    if st["mode"] == "trace":
        return (f"One recorded iteration over {over}: {Path(st['path']).name}, "
                f"{st['ranks']} ranks ({result['engine']}; compute as the trace measured it, "
                f"timed{some})")
    what = (f"TP {st['parallel']['tp']} x PP {st['parallel']['pp']} x DP {st['parallel']['dp']}, "
            f"{st['parallel']['micro_batches']} micro-batches in 1F1B" if st["mode"] == "parallel"
            else f"{len(st['buckets'])} buckets, {st['mode']}, overlap "
                 f"{'on' if st['overlap'] else 'off'}")
    return (f"One training step over {over}: {st['layers']} layers, {what} ({result['engine']}; "
            f"compute is timed, not computed{some})")


def step_csv(result: dict) -> str:
    """Rows of kind "step" (each timed step) then "collective" (the last
    step's); `wrong` is each row's own (empty where no data is checked)."""
    out = io.StringIO()
    w = csv.DictWriter(out, CSV_FIELDS, restval="")
    w.writeheader()
    for i, r in enumerate(result["runs"]):
        w.writerow({"kind": "step", "step": i + 1, **{k: f"{r[k]:.6f}" for k in STEP_FIGURES},
                    "wrong": "" if r.get("wrong") is None else r["wrong"]})
    for c in result["collectives"]:
        w.writerow({"kind": "collective", "name": c["name"], "collective": c["collective"],
                    "bucket": c["bucket"], "bytes": c["bytes"],
                    **{f"{k}_s": f"{c[k]:.6f}" for k in ("launch", "start", "finish")},
                    "wrong": "" if c.get("wrong") is None else c["wrong"]})
    return out.getvalue()


COLOURS = {"forward": "#4c72b0", "backward": "#dd8452", "allreduce": "#55a868", "tp": "#55a868",
           "pp": "#937860", "dp": "#da8bc3",
           "allgather": "#8172b3", "reducescatter": "#c44e52", "compute": "#4c72b0",
           "alltoall": "#64b5cd"}
OTHER_COLOUR = "#999999"    # a kind not in COLOURS


def step_figure(fabric, result: dict) -> Figure:
    """The figure plot_step writes, for reading what it shows: the last step
    on `fabric` (its title names the network technology), per rank, compute
    on the upper lane, collectives below (a tick where each was launched,
    its bar from start to finish)."""
    every = sorted({e["rank"] for e in result["timeline"]})
    ranks = shown_ranks(every)
    keep = set(ranks)
    events = [e for e in result["timeline"] if e["rank"] in keep]
    end = max((e["end"] for e in events), default=0.0) or 1.0
    fig = new_figure(12, 1.2 + 0.7 * len(ranks))
    ax = fig.add_subplot()
    ax.set_autoscale_on(False)        # the limits once, after the last bar: not once a bar
    by_rank = {rank: [] for rank in ranks}
    for e in events:
        by_rank[e["rank"]].append(e)
    for row, rank in enumerate(ranks):
        draw_lanes(ax, by_rank[rank], 2 * row, end, len(events) <= LABELS_UP_TO)
    ax.set_autoscale_on(True)
    ax.autoscale_view()
    ax.set_yticks([2 * i + t for i in range(len(ranks)) for t in (0.4, 1.3)])
    ax.set_yticklabels([f"rank {r} {lane}" for r in ranks for lane in ("compute", "comm")],
                       fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, end * 1.02)
    ax.set_xlabel("seconds after the step's start")
    some = f"; {len(ranks)} of its {len(every):,} ranks" if len(ranks) < len(every) else ""
    ax.set_title(_title(fabric, result, some), fontsize=9)
    order = list(COLOURS)               # known kinds in COLOURS' order, others after by name
    kinds = sorted({e["kind"] for e in events},
                   key=lambda k: (order.index(k) if k in COLOURS else len(order), k))
    ax.legend(handles=[Patch(color=COLOURS.get(k, OTHER_COLOUR), label=k) for k in kinds],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    return fig


def draw_lanes(ax, events: list, y: float, end: float, labels: bool) -> None:
    """One rank's compute lane (at `y`) and communication lane below it.
    Consecutive bars of one lane and colour are one collection, in the
    events' order, so bars that overlap paint over each other as drawn one
    by one; every launch tick is one line collection."""
    run: list = []
    key = None
    ticks: list = []
    for e in events:
        top = y if e["lane"] == "compute" else y + 0.9
        colour = COLOURS.get(e["kind"], OTHER_COLOUR)
        if (top, colour) != key:
            if run:
                ax.broken_barh(run, (key[0], 0.8), facecolors=key[1], edgecolor="white",
                               linewidth=0.3)
            run, key = [], (top, colour)
        run.append((e["start"], max(e["end"] - e["start"], end * 1e-4)))
        if "launch" in e:
            ticks.append((e["launch"], top))
            if labels:
                ax.text((e["start"] + e["end"]) / 2, top + 0.4, e["label"], fontsize=6,
                        ha="center", va="center", color="white")
    if run:
        ax.broken_barh(run, (key[0], 0.8), facecolors=key[1], edgecolor="white", linewidth=0.3)
    if ticks:
        ax.vlines([x for x, _ in ticks], [t for _, t in ticks], [t + 0.8 for _, t in ticks],
                  colors="black", linewidth=0.6, zorder=2, capstyle="projecting")


def shown_ranks(ranks: list) -> list:
    """`ranks`, or RANKS_SHOWN of them evenly spaced, the first and last among them."""
    if len(ranks) <= RANKS_SHOWN:
        return list(ranks)
    picks = {round(i * (len(ranks) - 1) / (RANKS_SHOWN - 1)) for i in range(RANKS_SHOWN)}
    return [ranks[i] for i in sorted(picks)]


def plot_step(fabric, result: dict, path: Path) -> Path:
    """step_figure written as a PNG to `path`."""
    return save(step_figure(fabric, result), path)


def write_step_outputs(fabric, result: dict, folder: Path) -> list:
    """step.csv and step.png in the run's folder; the files written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "step.csv").write_text(step_csv(result))
    return [folder / "step.csv", plot_step(fabric, result, folder / "step.png")]


def report_step(fabric, result: dict, folder: Path, csv_path, say) -> None:
    """The step the run on `fabric` timed: its files in the run folder (and
    `csv_path`), and its text."""
    try:
        files = write_step_outputs(fabric, result, folder)
        result["figures"] = [f.name for f in files if f.suffix == ".png"]
    except Exception as exc:          # noqa: BLE001 (a picture is never worth the run)
        (Path(folder) / "step.csv").write_text(step_csv(result))
        result["figures"] = []
        say(f"figures  none: drawing failed ({type(exc).__name__}: {exc})")
    if csv_path:
        Path(csv_path).write_text(step_csv(result))
    say(step_text(result))
    say(f"figures  {', '.join(result['figures']) or 'none'}; step.csv in {folder}")
