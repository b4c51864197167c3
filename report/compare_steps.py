"""Training steps (and replayed traces) compared side by side (`python -m
report.compare`, when every run named is a step): each run's step time
against the first's, its compute and exposed communication, the exposed
communication by process group and kind where a trace's replay gives it,
and the collectives whose time moved most between the runs (matched by
name: the same trace or step on another fabric has the same ones)."""

from __future__ import annotations

from typing import Dict, List

from report.canvas import new_figure

MOVED_SHOWN = 8              # collectives listed, those whose time moved most


def exposed_by_kind(record: dict) -> Dict[str, float]:
    """A trace replay's exposed communication by group and kind, as the
    simulator gives it on the run's fabric; {} for a made-up step."""
    return dict(((record.get("predicted") or {}).get("trace") or {}).get("exposed_by_kind_s")
                or {})


def step_rows(records: List[dict]) -> List[dict]:
    """Per run: its median step's figures and its time over the first run's."""
    first = records[0]["summary"]["step_s"]
    return [{"step_s": r["summary"]["step_s"], "compute_s": r["summary"]["compute_s"],
             "exposed_s": r["summary"]["exposed_s"], "comm_s": r["summary"]["comm_s"],
             "wrong": r.get("wrong"), "ratio": r["summary"]["step_s"] / first if first else None,
             "exposed_by_kind_s": exposed_by_kind(r)} for r in records]


def moved(records: List[dict], shown: int = MOVED_SHOWN) -> List[dict]:
    """The collectives every run has (by name) whose time, from its start to
    its finish, differs most from the first run's: {"name", "collective",
    "bytes", "seconds": per run}, the largest change first."""
    by_name = [{c["name"]: c for c in r["collectives"]} for r in records]
    common = [n for n in by_name[0] if all(n in b for b in by_name[1:])]
    rows = [{"name": n, "collective": by_name[0][n]["collective"],
             "bytes": by_name[0][n]["bytes"],
             "seconds": [b[n]["finish"] - b[n]["start"] for b in by_name]} for n in common]
    rows.sort(key=lambda r: -max(abs(s - r["seconds"][0]) for s in r["seconds"]))
    return [r for r in rows[:shown] if max(abs(s - r["seconds"][0]) for s in r["seconds"]) > 0]


def steps_comparison(records: List[dict], same_work: bool = True) -> dict:
    """The steps' rows, and what moved where they ran the same work."""
    return {"steps": step_rows(records), "moved": moved(records) if same_work else []}


def steps_text(comp: dict) -> str:
    """The steps' table, their exposed communication by kind, what moved."""
    steps = comp["steps"]
    lines = ["#  run  step time    x run 1  compute      exposed      comm         #wrong"]
    for i, s in enumerate(steps):
        wrong = "N/A" if s["wrong"] is None else str(s["wrong"])
        ratio = "" if i == 0 or s["ratio"] is None else f"{s['ratio']:.2f}"
        lines.append(f"   {i + 1:<4} {s['step_s']:9.4f} s  {ratio:>7}  {s['compute_s']:9.4f} s  "
                     f"{s['exposed_s']:9.4f} s  {s['comm_s']:9.4f} s  {wrong:>6}")
    labels = sorted(set().union(*(s["exposed_by_kind_s"] for s in steps)))
    if labels:
        lines.append("#  exposed communication by group and kind (s; the simulator's, on each "
                     "run's fabric)")
        for label in labels:
            lines.append(f"   {label:<40}" + "".join(
                f"  {s['exposed_by_kind_s'].get(label, 0.0):9.4f}" for s in steps))
    if comp["moved"]:
        lines.append("#  collectives that moved most (s from start to finish, per run)")
        for m in comp["moved"]:
            lines.append(f"   {m['name']:<40}" + "".join(f"  {x:9.4f}" for x in m["seconds"]))
    else:
        lines.append("#  no collective's time moved between the runs")
    return "\n".join(lines)


def steps_figure(comp: dict, labels: List[str]):
    """compare.png for steps: per run a bar of compute and exposed
    communication, stacked (the step time)."""
    fig = new_figure(8, 1.5 + 0.5 * len(labels))
    ax = fig.add_subplot()
    steps = comp["steps"]
    y = list(range(len(steps)))
    ax.barh(y, [s["compute_s"] for s in steps], color="#4c72b0", label="compute")
    ax.barh(y, [s["step_s"] - s["compute_s"] for s in steps],
            left=[s["compute_s"] for s in steps], color="#dd8452",
            label="exposed communication")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds a step (the median)")
    ax.set_title(f"{len(steps)} training steps compared", fontsize=9)
    ax.legend(fontsize=7)
    return fig
