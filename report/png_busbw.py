"""busbw.png: bus bandwidth against message size, a curve per algorithm,
labelled measured or simulated, the simulator's beside each measured one,
every flagged size marked (report/busbw_plot.py draws it)."""

from __future__ import annotations

import math
from typing import Dict, Optional

from matplotlib.figure import Figure

from report.busbw_plot import MEASURED, SIMULATED, busbw_figure
from report.figures import FIGURES, RunFigure, kind, network_title
from runs.record import ABSENT, RunRecord
from topologies.fabric import Fabric


@FIGURES.register
class BusbwPng(RunFigure):
    """busbw.png: a curve per algorithm swept."""
    name, order = "busbw.png", 2

    def draw(self, fabric: Fabric, result: RunRecord, compared, label: str) -> Figure:
        return busbw_png(fabric, {result.experiment["algorithm"]: result, **compared})


def busbw_png(fabric: Fabric, records: Dict[str, RunRecord]) -> Figure:
    """busbw.png: a curve per algorithm, labelled measured or simulated, the
    simulator's beside each measured one, every flagged size marked."""
    curves, simulated, flagged = {}, {}, {}
    for alg, record in records.items():
        exp = record.experiment
        name = f"{exp['collective']} ({alg})"
        if len(records) == 1:
            name = f"{fabric.name} {name}"
        label = name + (SIMULATED if kind(record) == "simulated" else MEASURED)
        curves[label] = [(r["size_bytes"], r["busbw_gbps"]) for r in record.runs]
        beside = _simulated_points(record)
        if beside:
            simulated[label] = beside
        marks = {r["size_bytes"]: r["flags"] for r in record.runs if r.get("flags")}
        if marks:
            flagged[label] = marks
    first = next(iter(records.values()))
    how = kind(first) + (", the simulator's dashed beside" if simulated else "")
    return busbw_figure(curves, title=f"{first.experiment['collective']}, {how}: bus bandwidth "
                                      f"by message size ({network_title(fabric)})",
                        link_gbps=first.link_rate_mbit / 8e3, flagged=flagged or None,
                        simulated=simulated or None)


def _simulated_points(result: RunRecord) -> Optional[list]:
    """The simulator's busbw per size beside a measured run (busbw scales as
    1/time), None for a simulated run or when no size was simulated."""
    if result.simulated is not ABSENT:
        return None
    points = [(r["size_bytes"], r["busbw_gbps"] * r["time_s"] / r["simulated_s"]
               if r.get("simulated_s") and r.get("time_s") else math.nan) for r in result.runs]
    return points if any(not math.isnan(b) for _, b in points) else None
