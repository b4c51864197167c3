"""A link failing for FAIL_FOR seconds, FAIL_AT seconds in, on a live lab:
idle (the probe flows alone) or under a ring AllReduce, and what the runs
of one case add up to (the failover and policies benchmarks' cases)."""

import statistics
import time
from pathlib import Path

from collectives.registry import FLAT_RING
from runs.experiment import Experiment
from runs.measured import run_experiment
from traffic.measure import failures

FAIL_AT, FAIL_FOR = 2.0, 1.0


def idle_case(lab, link: str, kind: str = "down") -> dict:
    run = failures.Failures(lab, failures.parse(
        lab.fabric, [f"{link}@{FAIL_AT}+{FAIL_FOR}:{kind}"])).start()
    time.sleep(FAIL_AT + FAIL_FOR + 1.0)
    return run.stop([])[0]


def loaded_case(lab, link: str, workdir: Path, kind: str = "down") -> dict:
    exp = Experiment(algorithm=FLAT_RING, minbytes=1 << 20, maxbytes=1 << 20, iters=10, warmup=1, idle_seconds=0.5,
                     fail=[f"{link}@{FAIL_AT}+{FAIL_FOR}:{kind}"])
    result = run_experiment(lab, exp, workdir)
    event = result.failures[0]
    event["wrong"] = result.runs[0]["wrong"]
    return event


def summary(events: list) -> dict:
    probes = [e["probe"] for e in events if e.get("probe")]
    stops = [p["stopped_ms"] for p in probes]
    slow = [e["collective"]["slowdown"] for e in events
            if e.get("collective") and e["collective"].get("slowdown")]
    return {"stopped_ms": stops, "median_ms": statistics.median(stops) if stops else None,
            "path_stopped_ms": [p.get("path_stopped_ms") for p in probes],
            "flows_hit": [p["flows_hit"] for p in probes],
            "lost": [p["lost_packets"] for p in probes], "slowdown": slow,
            "wrong": [e["wrong"] for e in events if "wrong" in e]}
