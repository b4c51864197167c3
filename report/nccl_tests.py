"""nccl-tests' own output, from a sweep's rows: the text its binaries print
(all_reduce_perf and the others, nccl-tests 2.19) and the JSON its `-J FILE`
writes (format version 3), so that what reads nccl-tests' output reads ours.

The layouts follow nccl-tests' printf formats (src/util.cu): the device
report, the two-line column header with its out-of-place and in-place
groups (three lines with per-iteration columns, `-I 1`), a row per size,
and the footer. A row here is a plain dict:

    {"size": 32768, "count": 8192, "type": "float", "redop": "sum", "root": -1,
     "placements": [OUT_OF_PLACE, IN_PLACE]}

each placement {"time_us", "alg_bw", "bus_bw", "wrong" (None: N/A),
"times_us" (each timed iteration's, for -I 1)}. Nothing here measures;
ncclperf/nccl_sweeps.py makes the rows from run records.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import List, Optional

NCCL_TESTS_VERSION = "2.19.6"      # the nccl-tests whose output this follows
# nccl-tests prints a `#  Rank` line per rank; past RANK_LINES ranks the
# header shows the first RANK_LINES_SHOWN and the last, and counts the rest
# (the JSON's devices still lists every rank)
RANK_LINES, RANK_LINES_SHOWN = 64, 8
JSON_FILE_VERSION = 3
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass
class Config:
    """What the header says about the run (nccl-tests' config)."""
    program: str
    min_bytes: int
    max_bytes: int
    step: int                   # the factor, or the bytes added per size
    step_is_factor: bool
    warmup_iters: int
    iters: int
    check: int                  # -c: 0 prints N/A for #wrong
    per_iter: bool = False      # -I 1
    per_iter_skip: int = 0      # -K
    devices: List[dict] = field(default_factory=list)   # rank, group, pid, hostname, device, device_hex, device_info
    notes: List[str] = field(default_factory=list)      # "# " lines of our own


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals, else fewer, else exponent, in
    `width` characters."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = fmt % (width, value)
        if len(text) <= width:
            return text
    return (("%*.1e" if width >= 7 else "%*.0e") % (width, value))[:width]


def header_lines(config: Config) -> List[str]:
    """The device report: version, the test, its parameters, the ranks."""
    step_kind = "factor" if config.step_is_factor else "bytes"
    lines = ["# nccl-tests version %s nccl-headers=%d nccl-library=%d" % (NCCL_TESTS_VERSION, 0, 0),
             "# Collective test starting: %s" % config.program,
             "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d "
             "iters: %d agg iters: %d validation: %d graph: %d unalign: %d"
             % (1, 1, config.min_bytes, config.max_bytes, config.step, step_kind,
                config.warmup_iters, config.iters, 1, config.check, 0, 0),
             # what the lab always does: every iteration started together and awaited
             "# Blocking Enabled: wait and barrier after each outer iteration (-n); "
             "time excludes barrier "]
    if config.per_iter:
        lines.append("# Per-Iteration Report: each iteration's span on the lab's clock; i_* over "
                     "the timed iterations"
                     + ("; summary skips first %d iterations" % config.per_iter_skip
                        if config.per_iter_skip else "") + " ")
    lines += ["#", "# Using devices"]
    lines += rank_lines(config.devices)
    lines += [f"# {note}" for note in config.notes]
    return lines


def rank_lines(devices: List[dict]) -> List[str]:
    """writeDeviceReport's line per rank; past RANK_LINES ranks, the first
    RANK_LINES_SHOWN, a line counting those left out, and the last."""
    def line(d):
        return ("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s"
                % (d["rank"], d["group"], d["pid"], d["hostname"], d["device"],
                   d["device_hex"], d["device_info"]))
    if len(devices) <= RANK_LINES:
        return [line(d) for d in devices]
    hidden = devices[RANK_LINES_SHOWN:-1]
    return ([line(d) for d in devices[:RANK_LINES_SHOWN]]
            + ["#  ... %d more ranks, Rank %d (%s) to Rank %d (%s): %d ranks in all, a line "
               "each up to %d (the JSON lists every one)"
               % (len(hidden), hidden[0]["rank"], hidden[0]["hostname"], hidden[-1]["rank"],
                  hidden[-1]["hostname"], len(devices), RANK_LINES)]
            + [line(devices[-1])])


def column_header(per_iter: bool) -> List[str]:
    """nccl-tests' writeResultHeader (no timestamps, time not CPU time)."""
    blank = ("", "", "", "", "")
    if per_iter:
        return ["#",
                "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)"
                "                                in-place (+ per-iteration)" % blank,
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  "
                "%6s  %6s  %7s  %7s  %7s  %7s %*s"
                % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                   "i_min", "i_max", "i_p99", "i_cv%", "time", "algbw", "busbw", "#wrong",
                   "i_min", "i_max", "i_p99", "i_cv%", 0, ""),
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  "
                "%6s  %6s  %7s  %7s  %7s  %7s %*s"
                % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                   "(us)", "(us)", "(%)", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)",
                   "(%)", 0, "")]
    return ["#",
            "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
            "          " % blank,
            "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
            % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
               "time", "algbw", "busbw", "#wrong", 0, ""),
            "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
            % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
               "(GB/s)", "", 0, "")]


def iteration_stats(times_us: List[float], skip: int = 0) -> dict:
    """nccl-tests' computeIterStats over the iterations after `skip`:
    min, max, p50, p95, p99 (nearest rank), mean, population stdev, CV %."""
    ordered = sorted(times_us[skip:])
    n = len(ordered)

    def percentile(p):
        return ordered[min(n - 1, (n * p + 99) // 100 - 1)]
    avg = sum(ordered) / n
    stdev = math.sqrt(sum((t - avg) ** 2 for t in ordered) / n)
    return {"min_us": ordered[0], "max_us": ordered[-1], "avg_us": avg,
            "p50_us": ordered[n // 2], "p95_us": percentile(95), "p99_us": percentile(99),
            "stdev_us": stdev, "cv_pct": stdev / avg * 100 if avg > 0 else 0.0}


def row_line(row: dict, per_iter: bool = False, skip: int = 0) -> str:
    """One size: writeBenchmarkLinePreamble, then writeBenchmarkLineBody (and
    writePerIterReport) for out-of-place and in-place."""
    text = "%12li  %12li  %8s  %6s  %6s" % (row["size"], row["count"], row["type"],
                                            row["redop"], "%6i" % row["root"])
    for place in row["placements"]:
        times = (float_str(place["time_us"], 7), float_str(place["alg_bw"], 6),
                 float_str(place["bus_bw"], 6))
        if place["wrong"] is None:
            text += "  %7s  %6s  %6s    N/A" % times
        else:
            text += "  %7s  %6s  %6s  %6g" % (*times, float(place["wrong"]))
        if per_iter:
            stats = iteration_stats(place["times_us"], skip)
            text += "  %7s  %7s  %7s  %7s" % (
                float_str(stats["min_us"], 7), float_str(stats["max_us"], 7),
                float_str(stats["p99_us"], 7), float_str(stats["cv_pct"], 7))
    return text


def link_lines(rows: List[dict], rate_mbit: float) -> List[str]:
    """fabric-lab's `#` lines after a table's rows: each size's busbw over
    the NIC link's rate, out-of-place and in-place, which the GB/s columns'
    two decimals print as 0.00 at a lab's rates (20 Mbit/s is 0.0025 GB/s)."""
    lines = ["# busbw/link: busbw over the NIC link's %g Mbit/s (%.6f GB/s)"
             % (rate_mbit, rate_mbit / 8e3),
             "# %10s  %12s  %8s" % ("size", "out-of-place", "in-place")]
    for row in rows:
        lines.append("# %10d  %12s  %8s" % (row["size"], *(
            "%.2f" % (p["bus_bw"] / (rate_mbit / 8e3)) for p in row["placements"])))
    return lines


def average_bus_bandwidth(rows: List[dict]) -> float:
    """The mean busbw over every placement of every row, as nccl-tests'."""
    values = [p["bus_bw"] for row in rows for p in row["placements"]]
    return sum(values) / len(values) if values else 0.0


def footer_lines(rows: List[dict], program: str, min_bw: Optional[float] = None) -> List[str]:
    """writeResultFooter, finalizeFooter and writeErrors (no error)."""
    errors = sum(int(p["wrong"] or 0) for row in rows for p in row["placements"])
    bw = average_bus_bandwidth(rows)
    verdict = "" if min_bw is None else ("FAILED" if bw < min_bw * 0.9 else "OK")
    return ["# %-20s : %d %s" % ("Out of bounds values", errors, "FAILED" if errors else "OK"),
            "# %-20s : %g %s" % ("Avg bus bandwidth", bw, verdict),
            "#",
            "# Collective test concluded: %s" % program,
            "#",
            ""]


def json_document(config: Config, rows: List[dict], argv: List[str], env: List[str],
                  started: float, min_bw: Optional[float] = None) -> dict:
    """What nccl-tests 2.19 writes with -J FILE.json (JSON_FILE_VERSION 3),
    key by key in its order; its booleans are the strings "true"/"false",
    as it writes them."""
    def flag(value):
        return "true" if value else "false"
    step_key = "step_factor" if config.step_is_factor else "step_bytes"
    errors = sum(int(p["wrong"] or 0) for row in rows for p in row["placements"])
    bw = average_bus_bandwidth(rows)
    return {
        "version": JSON_FILE_VERSION,
        "start_time": time.strftime(TIME_FORMAT, time.localtime(started)),
        "args": list(argv), "env": list(env), "nccl_version": 0,
        "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": config.min_bytes,
                   "maximum_bytes": config.max_bytes, step_key: config.step,
                   "warmup_iters": config.warmup_iters, "iterations": config.iters,
                   "aggregated_iterations": 1, "validation": config.check, "graph": 0,
                   "blocking_collectives": flag(True), "per_iter_timing": flag(config.per_iter),
                   "per_iter_skip": config.per_iter_skip, "parallel_init": flag(False),
                   "devices": [dict(d) for d in config.devices]},
        "results": [_json_row(row, config) for row in rows],
        "out_of_bounds": {"count": errors, "okay": flag(errors == 0)},
        "average_bus_bandwidth": {"bandwidth": _number(bw), "okay": "unchecked" if min_bw is None
                                  else flag(bw >= min_bw * 0.9)},
        "errors": [],
        "end_time": time.strftime(TIME_FORMAT),
    }


def _number(value: float):
    return "nan" if value != value else value          # as jsonDouble writes a NaN


def _json_row(row: dict, config: Config) -> dict:
    out = {"size": row["size"], "count": row["count"], "type": row["type"],
           "redop": row["redop"], "root": "%6i" % row["root"]}
    for key, place in zip(("out_of_place", "in_place"), row["placements"]):
        out[key] = {"time": _number(place["time_us"]), "alg_bw": _number(place["alg_bw"]),
                    "bus_bw": _number(place["bus_bw"]),
                    "nwrong": None if place["wrong"] is None else float(place["wrong"])}
        if config.per_iter:
            stats = iteration_stats(place["times_us"], config.per_iter_skip)
            out[f"{key}_per_iter"] = {"skipped_iterations": config.per_iter_skip,
                                      **{k: _number(v) for k, v in stats.items()},
                                      "times_us": [_number(t) for t in place["times_us"]]}
    out["actual_iterations"] = config.iters
    out["experiment_name"] = ""
    return out
