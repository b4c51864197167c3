"""A reader of nccl-tests' text output, written from nccl-tests' own printf
formats (src/util.cu, 2.19.6) and not from ours: every format below is the
string nccl-tests prints with. A row is cut into its fixed-width fields as
the formats lay them out; each field must be right-aligned in its width,
with exactly the separators the format has.
"""

from __future__ import annotations

import re

# writeBenchmarkLinePreamble, writeBenchmarkLineBody, writePerIterReport
PREAMBLE = "%12li  %12li  %8s  %6s  %6s"
BODY = "  %7s  %6s  %6s  %6g"
BODY_NA = "  %7s  %6s  %6s    N/A"
PER_ITER = "  %7s  %7s  %7s  %7s"
# writeResultHeader (timestamps off: tsPad 0, tsLbl "")
HEADER_GROUPS = "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
HEADER_NAMES = "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
PER_ITER_GROUPS = ("# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)"
                   "                                in-place (+ per-iteration)")
PER_ITER_NAMES = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s"
                  "  %6s  %6s  %7s  %7s  %7s  %7s %*s")
# writeDeviceReport, as parseRankInfo's sscanf reads it back
CONFIG = re.compile(r"# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)"
                    r"\((factor|bytes)\) warmup iters: (\d+) iters: (\d+) agg iters: (\d+) "
                    r"validation: (\d+) graph: (\d+) unalign: (\d+)$")
RANK = re.compile(r"#  Rank +(-?\d+) Group +(-?\d+) Pid +(\d+) on +(\S+) device +(\d+) "
                  r"\[([^\]]+)\] (.*)$")
# writeResultFooter
OUT_OF_BOUNDS = re.compile(r"# Out of bounds values : (\d+) (OK|FAILED)$")
AVG_BW = re.compile(r"# Avg bus bandwidth    : (\S+) (|OK|FAILED)$")


def widths(fmt: str):
    """The format as ("literal", text) and ("field", width, conversion) parts."""
    parts = []
    for literal, width, conv in re.findall(r"([^%]+)|%(\d*)l?([a-z])", fmt):
        parts.append(("literal", literal) if literal else ("field", int(width or 0), conv))
    return parts


def cut(line: str, fmt: str):
    """The fields of `line` laid out by `fmt` (each right-aligned, filling its
    width: no value here is wider), and the rest of the line; ValueError if
    the line does not follow the format."""
    values, pos = [], 0
    for part in widths(fmt):
        if part[0] == "literal":
            if line[pos:pos + len(part[1])] != part[1]:
                raise ValueError(f"expected {part[1]!r} at {pos} of {line!r}")
            pos += len(part[1])
            continue
        text = line[pos:pos + part[1]]
        if len(text) != part[1] or not text.strip() or text != text.strip().rjust(part[1]):
            raise ValueError(f"field of width {part[1]} at {pos} of {line!r}: {text!r}")
        values.append(text.strip())
        pos += part[1]
    return values, line[pos:]


def placement(rest: str, per_iter: bool):
    """One of the row's two placements: time, algbw, busbw, #wrong (None for
    N/A) and, with per-iteration columns, i_min, i_max, i_p99, i_cv%."""
    try:
        values, rest = cut(rest, BODY_NA)
        values.append(None)
    except ValueError:
        values, rest = cut(rest, BODY)
    out = {"time": float(values[0]), "algbw": float(values[1]), "busbw": float(values[2]),
           "wrong": None if values[3] is None else float(values[3])}
    if per_iter:
        extra, rest = cut(rest, PER_ITER)
        out.update(zip(("i_min", "i_max", "i_p99", "i_cv"), map(float, extra)))
    return out, rest


def parse(text: str) -> dict:
    """nccl-tests' output: its config, ranks, column header, rows and footer."""
    out = {"config": None, "ranks": [], "rows": [], "comments": [], "header": [],
           "out_of_bounds": None, "avg_bw": None}
    lines = text.split("\n")
    per_iter = any(line.startswith("# Per-Iteration Report") for line in lines)
    for line in lines:
        if (m := CONFIG.match(line)):
            out["config"] = m.groups()
        elif (m := RANK.match(line)):
            out["ranks"].append(m.groups())
        elif (m := OUT_OF_BOUNDS.match(line)):
            out["out_of_bounds"] = (int(m.group(1)), m.group(2))
        elif (m := AVG_BW.match(line)):
            out["avg_bw"] = float(m.group(1))
        elif line.startswith("#"):
            out["comments"].append(line)
        elif line:
            out["rows"].append(_row(line, per_iter))
    return out


def _row(line: str, per_iter: bool) -> dict:
    values, rest = cut(line, PREAMBLE)
    row = {"size": int(values[0]), "count": int(values[1]), "type": values[2],
           "redop": values[3], "root": int(values[4]), "placements": []}
    for _ in range(2):
        place, rest = placement(rest, per_iter)
        row["placements"].append(place)
    if rest:
        raise ValueError(f"left over after the in-place columns: {rest!r}")
    return row


def column_header(per_iter: bool = False):
    """The column header nccl-tests prints (time, not CPU time; no timestamps)."""
    blank = ("",) * 5
    if per_iter:
        return ["#", PER_ITER_GROUPS % blank,
                PER_ITER_NAMES % ("size", "count", "type", "redop", "root", "time", "algbw",
                                  "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", "time",
                                  "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
                                  "i_cv%", 0, ""),
                PER_ITER_NAMES % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)",
                                  "", "(us)", "(us)", "(us)", "(%)", "(us)", "(GB/s)",
                                  "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", 0, "")]
    return ["#", HEADER_GROUPS % blank,
            HEADER_NAMES % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                            "#wrong", "time", "algbw", "busbw", "#wrong", 0, ""),
            HEADER_NAMES % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                            "(us)", "(GB/s)", "(GB/s)", "", 0, "")]
