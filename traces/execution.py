"""PyTorch's execution trace (the Chakra "host" trace ASTRA-sim consumes:
JSON with "schema", "pid" and "nodes") read, linked with the same rank's
Kineto trace, into one rank's part of a Trace.

An execution trace records every operator with its inputs (tensor types and
shapes, scalar values) and its order, but no durations. Its c10d operators
say what each communication moved, tensor lists' element types included
(which Kineto does not write); the rank's Kineto trace, linked by
record-function id (the node's rf_id attribute is the Kineto event's "Record
function id", as Chakra's trace linker links them), says when it ran and
gives the compute. MLCommons Chakra and PARAM's et_replay, which read these files,
are not on PyPI (the PyPI name "chakra" is an unrelated package); this reader
needs neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

from traces.c10d_args import POSITIONS, describe
from traces.kineto import STEP, read_rank as read_kineto_rank
from traces.placing import RankRead
from traces.trace_model import TraceError


def attribute(node: dict, name: str, default=None):
    for a in node.get("attrs", ()):
        if a.get("name") == name:
            return a.get("value", default)
    return default


def communication(nodes, source: str) -> Dict[int, dict]:
    """Per rf_id, what each c10d operator node says of its operation."""
    found = {}
    for node in nodes:
        name = str(node.get("name", ""))
        if not name.startswith("c10d::") or name[6:].rstrip("_") not in POSITIONS:
            continue
        rf = attribute(node, "rf_id")
        inputs = node.get("inputs") or {}
        if rf is None:
            raise TraceError(f"{source}: {name} (node {node.get('id')}) has no rf_id to link it "
                             "with the Kineto trace.")
        found[int(rf)] = describe(name, [str(t) for t in inputs.get("types", [])],
                                  inputs.get("shapes", []), inputs.get("values", []))
        found[int(rf)].update(node=node.get("id"), used=False)
    return found


def iteration_ids(nodes, n: int, source: str) -> range:
    """The rf_ids of ProfilerStep#n's operators: from the step's own up to the
    next step's (record-function ids rise in the order operators start)."""
    steps = sorted((int(m.group(1)), int(attribute(x, "rf_id", -1)))
                   for x in nodes if (m := STEP.match(str(x.get("name", "")))))
    ids = dict(steps)
    if n not in ids:
        raise TraceError(f"{source}: iteration ProfilerStep#{n} is not in the execution trace.")
    later = [rf for k, rf in steps if k > n]
    return range(ids[n], later[0] if later else 1 << 62)


def read_rank(et: dict, et_path: Path, kineto_path: Optional[Path],
              iteration: Optional[int] = None) -> RankRead:
    """One rank from its execution trace `et` (the parsed JSON) and Kineto partner."""
    if kineto_path is None:
        raise TraceError(f"{et_path.name}: an execution trace has no durations, and no Kineto "
                         "trace of the same process (pid) is beside it to give them.")
    nodes = et.get("nodes") or []
    described = communication(nodes, et_path.name)
    read = read_kineto_rank(kineto_path, iteration, described)
    n = int(read.iteration.split("#")[1])
    window = iteration_ids(nodes, n, et_path.name)
    unlinked = sorted(rf for rf, facts in described.items() if rf in window and not facts["used"])
    if unlinked:
        node = described[unlinked[0]]["node"]
        raise TraceError(f"{et_path.name}: node {node} (rf_id {unlinked[0]}), one of "
                         f"{len(unlinked)} communication nodes of ProfilerStep#{n}, has no "
                         f"partner event in {kineto_path.name}.")
    read.source = f"{et_path.name} + {kineto_path.name}"
    return read
