"""A training step's timeline from the rank agents' replies (programs/
stepper.py's step_done): per rank, a lane of compute and one of
communication, in seconds after the first rank's start. The figure
(report/step_report.py) draws it; the plain step and the hybrid step name
their collectives differently (`kind`, `label`)."""

from __future__ import annotations

from typing import Callable, List


def lanes(replies: List[dict], t0: float, kind: Callable[[int], str],
          label: Callable[[int], str]) -> List[dict]:
    """`kind(id)` and `label(id)` say what each collective is; compute spans
    that took no time (a task that only launches collectives) are left out."""
    events = []
    for r in replies:
        off = r["t0"] - t0
        events += [{"rank": r["rank"], "lane": "compute", "kind": s["kind"],
                    "label": str(s["layer"]), "start": off + s["start"], "end": off + s["end"]}
                   for s in r["compute"] if s["end"] > s["start"]]
        events += [{"rank": r["rank"], "lane": "comm", "kind": kind(c["id"]),
                    "label": label(c["id"]), "launch": off + c["launch"],
                    "start": off + c["start"], "end": off + c["finish"]}
                   for c in r["collectives"]]
    return events
