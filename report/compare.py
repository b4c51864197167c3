"""Runs compared side by side: `python -m report.compare RUN RUN [...]`,
each RUN a results folder of run_topology.py or its summary.json.

It prints a header per run (its folder, fabric, shape, engine, collective
and algorithm, and its provenance: version, commit, command, start) and
what differs between the runs (the fabric's digest, the commit, the host,
what ran); then a row per message size of any run with, per run, the time,
busbw, busbw/link, #wrong and its time over the first run's. A ratio is
marked `!` where either run's verdict flagged the size (`flags`: not a
figure to quote). It writes compare.png (busbw by size, a curve per run,
report/busbw_plot.py's drawing) to --out; --json prints the comparison as
JSON instead of the tables. Training steps and replayed traces compare with
each other instead (report/compare_steps.py): step time, exposed
communication by kind, the collectives that moved. Anything it cannot
compare is one sentence on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

from matplotlib.figure import Figure

from report.busbw_plot import MEASURED, SIMULATED, busbw_figure
from report.canvas import save
from report.compare_steps import steps_comparison, steps_figure, steps_text

FIGURE = "compare.png"
NOT_TO_QUOTE = "!"
NO_PROVENANCE = "no provenance (a summary.json from before runs recorded it)"


class CompareError(ValueError):
    """Why these runs cannot be compared, in one sentence."""


@dataclass
class Run:
    """One run to compare: its results folder's name, its summary.json, and
    its place on the command line (1 for the first)."""
    number: int
    name: str
    path: Path
    summary: dict

    @property
    def is_step(self) -> bool:
        """A training step (or a replayed trace) rather than a size sweep."""
        return "collectives" not in self.summary

    @property
    def record(self) -> dict:
        return self.summary["step"] if self.is_step else self.summary["collectives"]

    @property
    def kind(self) -> str:
        simulated = "simulated" in self.record if not self.is_step \
            else self.record.get("engine") == "sim"
        return "simulated" if simulated else "measured"

    @property
    def network(self) -> Optional[str]:
        """Its network technology as its summary names it (None: a summary
        written before runs named it)."""
        return (self.summary.get("network") or {}).get("title")

    def label(self, with_network: bool = False) -> str:
        """The run's curve in compare.png: its number, folder (and network
        technology beside it, `with_network`), what ran, and measured or
        simulated as busbw.png says it."""
        exp = self.record["experiment"]
        name = f"{self.name} ({self.network})" if with_network and self.network else self.name
        return (f"{self.number}: {name}, {exp['collective']} ({exp['algorithm']})"
                + (SIMULATED if self.kind == "simulated" else MEASURED))


# --- reading ----------------------------------------------------------------------

def load_run(number: int, where) -> Run:
    """The run in `where` (a results folder or its summary.json); CompareError
    for a missing path, a folder without summary.json, a summary that is not
    JSON or has no collectives (a training step: one sentence saying so)."""
    path = Path(where)
    if not path.exists():
        raise CompareError(f"{where}: no such results folder or summary.json")
    file = path / "summary.json" if path.is_dir() else path
    if not file.is_file():
        raise CompareError(f"{where} has no summary.json: is it a results folder of "
                           "run_topology.py?")
    try:
        summary = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{file} is not a readable summary.json ({exc})") from None
    if not isinstance(summary, dict) or not ("collectives" in summary or "step" in summary):
        raise CompareError(f"{file} has no collectives to compare (not a sweep's summary.json)")
    return Run(number, file.parent.resolve().name, file, summary)


def load_runs(paths: Sequence) -> List[Run]:
    """Every run named, in order; CompareError unless there are two or more,
    all size sweeps or all training steps."""
    if len(paths) < 2:
        raise CompareError(f"it takes two runs or more to compare, got {len(paths)}")
    runs = [load_run(i + 1, p) for i, p in enumerate(paths)]
    odd = next((r for r in runs if r.is_step != runs[0].is_step), None)
    if odd is not None:
        what = {True: "a training step", False: "a size sweep"}
        raise CompareError(f"run {odd.number} ({odd.path}) is {what[odd.is_step]} and run 1 "
                           f"{what[runs[0].is_step]}: compare sweeps with sweeps, steps with "
                           "steps")
    return runs


# --- the comparison ------------------------------------------------------------------

def run_header(run: Run) -> dict:
    """What a run was: its folder, fabric, what ran, how, and its provenance
    (None when its summary has none)."""
    exp = run.record["experiment"]
    return {"number": run.number, "name": run.name, "summary": str(run.path), "label": run.label(),
            "fabric": run.summary.get("fabric"), "shape": run.summary.get("shape"),
            "policy": run.summary.get("policy"), "engine": exp.get("engine"), "kind": run.kind,
            "network": run.network,
            "collective": exp["collective"], "algorithm": exp["algorithm"],
            "ranks": len(run.record.get("ranks", [])),
            "link_rate_mbit": run.record.get("link_rate_mbit"),
            "also_swept": sorted(run.summary.get("compared") or {}),
            "workload": workload(run),
            "provenance": run.summary.get("provenance")}


WHAT_RAN = ("fabric", "workload", "collective", "algorithm", "engine", "network", "policy",
            "ranks", "link_rate_mbit")


def workload(run: Run) -> Optional[str]:
    """What a step ran: a trace's path, iteration and replicas, or the made-up
    step's mode; None for a sweep (its collective and algorithm say it)."""
    if not run.is_step:
        return None
    st = run.record.get("step") or {}
    if st.get("mode") == "trace":
        return f"{st['path']} {st['iteration']} x{st['replicas']}"
    return f"a {st.get('mode', 'training')} step"
ORIGIN = {"fabric digest": "fabric_sha256", "commit": "commit", "host": "host"}


def differences(headers: List[dict]) -> dict:
    """{item: {"values": one per run, "differ": True/False, or None where a
    run has no provenance to tell}} for what ran and where it came from
    (the fabric's digest, the commit, the host)."""
    out = {}
    for key in WHAT_RAN:
        values = [h.get(key) for h in headers]
        if key == "workload" and all(v is None for v in values):
            continue                        # sweeps: their collective and algorithm say it
        # a summary written before runs named their network cannot tell it
        told = key != "network" or all(v is not None for v in values)
        out[key] = {"values": values,
                    "differ": len(set(map(json.dumps, values))) > 1 if told else None}
    for item, key in ORIGIN.items():
        values = [(h["provenance"] or {}).get(key) for h in headers]
        known = all(h["provenance"] for h in headers)
        out[item] = {"values": values,
                     "differ": len(set(map(json.dumps, values))) > 1 if known else None}
    return out


def _number(value) -> Optional[float]:
    """A figure of the summary, None where it has none (null, NaN)."""
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _cell(row: Optional[dict], first: Optional[dict]) -> Optional[dict]:
    """One run's figures at one size, and its time over the first run's
    (`quote` False where either run flagged the size)."""
    if row is None:
        return None
    time_s, first_s = _number(row.get("time_s")), _number((first or {}).get("time_s"))
    flags = list(row.get("flags") or [])
    return {"time_us": None if time_s is None else time_s * 1e6,
            "busbw_gbps": _number(row.get("busbw_gbps")),
            "busbw_over_link": _number(row.get("busbw_over_link")),
            "wrong": row.get("wrong"), "flags": flags,
            "ratio": time_s / first_s if time_s is not None and first_s else None,
            "quote": not flags and not (first or {}).get("flags")}


def size_rows(runs: List[Run]) -> List[dict]:
    """A row per message size present in any run, smallest first: per run
    its cell (None where the run has no such size)."""
    by_run = [{r["size_bytes"]: r for r in run.record["runs"]} for run in runs]
    sizes = sorted(set().union(*by_run))
    return [{"size_bytes": size,
             "runs": [_cell(rows.get(size), by_run[0].get(size)) for rows in by_run]}
            for size in sizes]


def notes(headers: List[dict]) -> List[str]:
    """Sentences the reader needs before the table."""
    out = []
    collectives = [h["collective"] for h in headers]
    if len(set(collectives)) > 1:
        out.append("the runs ran different collectives (" + ", ".join(
            f"{h['number']} {h['collective']}" for h in headers) + "): busbw compares them, "
            "their times are of different work")
    for h in headers:
        if h["also_swept"]:
            out.append(f"run {h['number']} also swept {', '.join(h['also_swept'])} (--compare); "
                       f"only its {h['algorithm']} is compared here")
    return out


def comparison(runs: List[Run]) -> dict:
    """The whole comparison, as --json prints it. Where the runs differ by
    network technology, each label (compare.png's curve or bar) names its
    run's beside its folder."""
    headers = [run_header(run) for run in runs]
    differ = differences(headers)
    if differ["network"]["differ"]:
        for run, h in zip(runs, headers):
            h["label"] = run.label(with_network=True)
    out = {"runs": headers, "differences": differ, "notes": notes(headers)}
    if runs[0].is_step:
        same = len({h["workload"] for h in headers}) == 1
        if not same:
            out["notes"].append("the runs ran different steps (" + "; ".join(
                f"{h['number']} {h['workload']}" for h in headers) + "): their collectives are "
                "not the same ones, and none is matched by name")
        return {**out, **steps_comparison([run.record for run in runs], same)}
    return {**out, "sizes": size_rows(runs)}


# --- the text -----------------------------------------------------------------------

def _short(item: str, value) -> str:
    """A provenance value as the header shows it."""
    if value is None:
        return "unknown"
    if item == "host":
        return (f"{value.get('cores')} cores, kernel {value.get('kernel')}, Python "
                f"{value.get('python')}, OVS {value.get('ovs') or 'none'}")
    if item == "fabric digest":
        return str(value)[:12]
    if item == "commit":
        head, _, changes = str(value).partition("+")
        return head[:12] + (f"+{changes}" if changes else "")
    return str(value)


def run_lines(h: dict) -> List[str]:
    """A run's header: what ran, then where it came from."""
    lines = [f"run {h['number']:<4} {h['name']} ({h['kind']}; {h['summary']})",
             f"         {h['fabric']}: {h['shape']}",
             f"         {h['collective']} ({h['algorithm']}), engine {h['engine']}, "
             + (f"network {h['network']}, " if h.get("network") else "")
             + f"policy {h['policy']}, {h['ranks']} ranks, links {h['link_rate_mbit']:g} Mbit/s"]
    origin = h["provenance"]
    if not origin:
        return lines + [f"         {NO_PROVENANCE}"]
    return lines + [f"         fabric-lab {origin.get('version')}, commit "
                    f"{_short('commit', origin.get('commit'))}, started {origin.get('started')}",
                    f"         command {origin.get('command')}"]


def difference_lines(comp: dict) -> List[str]:
    """What differs between the runs (each run's value), what is the same,
    and what cannot be told for want of provenance."""
    differ, same, unknown = [], [], []
    for item, d in comp["differences"].items():
        if d["differ"] is None:
            unknown.append(item)
        elif d["differ"]:
            differ.append(f"{item} (" + "; ".join(
                f"{i + 1} {_short(item, v)}" for i, v in enumerate(d["values"])) + ")")
        else:
            same.append(item)
    lines = [f"differ   {', '.join(differ) or 'nothing of what ran or where it came from'}"]
    if same:
        lines.append(f"same     {', '.join(same)}")
    if "network" in unknown:
        unknown.remove("network")
        older = [str(h["number"]) for h in comp["runs"] if not h.get("network")]
        lines.append(f"unknown  network: run(s) {', '.join(older)} do not name it (written "
                     "before runs did)")
    if unknown:
        missing = [str(h["number"]) for h in comp["runs"] if not h["provenance"]]
        lines.append(f"unknown  {', '.join(unknown)}: run(s) {', '.join(missing)} have no "
                     "provenance")
    return lines + [f"note     {n}" for n in comp["notes"]]


def header_text(comp: dict) -> str:
    lines = [f"compare  {len(comp['runs'])} runs, each against run 1"]
    for h in comp["runs"]:
        lines += run_lines(h)
    return "\n".join(lines + difference_lines(comp))


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cell_text(cell: Optional[dict], first: bool) -> str:
    """One run's columns at one size; `!` after a flagged size's busbw and
    after a ratio either run flagged."""
    width = 39 if first else 48
    if cell is None:
        return f"{'-':>{width}}"
    wrong = "N/A" if cell["wrong"] is None else str(cell["wrong"])
    busbw = _fmt(cell["busbw_gbps"], ".4g") + (NOT_TO_QUOTE if cell["flags"] else " ")
    text = (f"  {_fmt(cell['time_us'], '.0f'):>9}  {busbw:>10}  "
            f"{_fmt(cell['busbw_over_link'], '.2f'):>6}  {wrong:>6}")
    if first:
        return text
    ratio = _fmt(cell["ratio"], ".2f") + (" " if cell["quote"] else NOT_TO_QUOTE)
    return text + f"  {ratio:>7}"


def table_text(comp: dict) -> str:
    """A row per size: per run time (us), busbw (GB/s), busbw/link, #wrong
    and, after the first, its time over run 1's; then what `!` marks."""
    heads = [f"run {h['number']} ({h['kind']})" for h in comp["runs"]]
    top = "#           " + "".join(f"  {head:<{37 if i == 0 else 46}}"
                                   for i, head in enumerate(heads))
    cols = "  time (us)  busbw GB/s  b/link  #wrong"
    lines = [top.rstrip(), "#       size" + cols + (cols + "  x run 1") * (len(heads) - 1)]
    for row in comp["sizes"]:
        lines.append(f"{row['size_bytes']:12d}" + "".join(
            _cell_text(cell, i == 0) for i, cell in enumerate(row["runs"])).rstrip())
    lines.append("# x run 1: the run's time over run 1's at the same size")
    flagged = [(h, [(row["size_bytes"], row["runs"][i]["flags"]) for row in comp["sizes"]
                    if row["runs"][i] and row["runs"][i]["flags"]])
               for i, h in enumerate(comp["runs"])]
    if any(sizes for _, sizes in flagged):
        lines.append(f"# {NOT_TO_QUOTE}: a size its run's fidelity verdict flagged, not a "
                     "figure to quote, nor is a ratio to or from it:")
        lines += [f"#   run {h['number']}: " + "; ".join(
            f"{size} B {' '.join(flags)}" for size, flags in sizes)
            for h, sizes in flagged if sizes]
    return "\n".join(lines)


# --- the figure ----------------------------------------------------------------------

def compare_figure(comp: dict) -> Figure:
    """compare.png: busbw by size, a curve per run labelled measured or
    simulated, every flagged size ringed; the link rate when the runs share it."""
    curves, flagged = {}, {}
    for i, h in enumerate(comp["runs"]):
        cells = [(row["size_bytes"], row["runs"][i]) for row in comp["sizes"] if row["runs"][i]]
        curves[h["label"]] = [(size, math.nan if c["busbw_gbps"] is None else c["busbw_gbps"])
                              for size, c in cells]
        marks = {size: c["flags"] for size, c in cells if c["flags"]}
        if marks:
            flagged[h["label"]] = marks
    rates = {h["link_rate_mbit"] for h in comp["runs"]}
    kinds = sorted({h["kind"] for h in comp["runs"]})
    collectives = ", ".join(dict.fromkeys(h["collective"] for h in comp["runs"]))
    return busbw_figure(curves, title=f"{collectives}, {' and '.join(kinds)}: bus bandwidth by "
                                      f"message size, {len(curves)} runs compared",
                        link_gbps=rates.pop() / 8e3 if len(rates) == 1 and None not in rates
                        else None, flagged=flagged or None)


def write_figure(comp: dict, folder) -> Path:
    """compare.png in `folder` (made if need be)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figure = steps_figure(comp, [h["label"] for h in comp["runs"]]) if "steps" in comp \
        else compare_figure(comp)
    return save(figure, folder / FIGURE)


# --- the command ---------------------------------------------------------------------

def parse(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m report.compare",
                                 description="Compare runs of run_topology.py side by side.")
    ap.add_argument("runs", nargs="*", metavar="RUN",
                    help="a results folder or its summary.json; two or more")
    ap.add_argument("--out", default=".", metavar="DIR",
                    help=f"where {FIGURE} goes (default: the current folder)")
    ap.add_argument("--json", action="store_true", help="print the comparison as JSON")
    return ap.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        comp = comparison(load_runs(args.runs))
    except CompareError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    try:
        comp["figure"] = str(write_figure(comp, args.out))
    except (OSError, ValueError) as exc:       # a picture is never worth the comparison
        comp["figure"] = None
        comp["figure_error"] = f"{type(exc).__name__}: {exc}"
    if args.json:
        json.dump(comp, sys.stdout, indent=1)
        print()
        return 0
    print(header_text(comp))
    print(steps_text(comp) if "steps" in comp else table_text(comp))
    print(f"figure   {comp['figure'] or 'none: ' + comp['figure_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
