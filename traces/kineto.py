"""The PyTorch profiler's trace (Kineto JSON, one file per rank, .json or
.json.gz) read into one rank's part of a Trace.

Meta's Holistic Trace Analysis parses the file (hta.common.trace_parser, every
argument kept); this module picks one ProfilerStep#N out of it:

- compute: on a GPU trace the kernels the iteration launched that are not
  NCCL's; on a CPU trace the outermost operators (cpu_op) of the thread that
  ran the ProfilerStep, less the stretches spent issuing or waiting for
  communication (c10d::*, gloo:*, record_param_comms, waits).
- communication: on a GPU trace the NCCL kernels the iteration launched, each
  carrying its record_param_comms arguments (collective, sizes, data type,
  process group and its ranks), timed by the kernel; on a CPU (gloo) trace
  the outermost c10d operators, described by their own arguments (and by a
  record_param_comms inside them where the PyTorch writes one), timed by the
  gloo:* work each handed to gloo (linked by record-function id), which runs
  on the group's worker thread from when gloo starts it until it completes.

What a trace leaves open is settled in traces/placing.py (the process group
of a gloo operation) and checked across ranks in traces/reading.py.
"""

from __future__ import annotations

import ast
import logging
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from traces.c10d_args import describe
from traces.naming import C10D_KINDS, COLLECTIVE_KINDS, NOT_DATA, scalar_type
from traces.placing import Pending, RankRead, settle
from traces.trace_model import Compute, Group, RankTrace, TraceError

HTA_MISSING = ("reading a Kineto trace needs Holistic Trace Analysis, which is not installed: "
               "pip install -e '.[traces]' (or HolisticTraceAnalysis==0.5.0).")
STEP = re.compile(r"^ProfilerStep#(\d+)$")
US = 1e-6


@dataclass
class Event:
    name: str
    cat: str
    ts: float                      # microseconds, the trace's clock
    dur: float
    tid: int
    row: int = 0                   # its row in `columns`
    columns: Dict[str, list] = field(default_factory=dict, repr=False)   # its file's args

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def arg(self, key: str, default=None):
        if key not in ARGS:
            raise KeyError(f"{key}: an argument traces/kineto.py's ARGS does not keep")
        column = self.columns.get(key)
        value = default if column is None else column[self.row]
        if isinstance(value, float) and math.isnan(value):
            return default
        return default if value is None else value


BASIC = ("index", "name", "cat", "ts", "dur", "end", "tid", "pid")
# the arguments this reader reads (HTA's column names), the only ones kept
ARGS = frozenset({
    "correlation", "stream", "record_function_id", "collective_name", "msg_dtype", "dtype",
    "in_msg_nelems", "out_msg_nelems", "in_split_size", "out_split_size", "group_size",
    "process_group_name", "process_group_ranks", "process_group_desc", "rank", "process_rank",
    "input_type", "input_dims", "concrete_inputs"})


def hta_config(base):
    """HTA's ParserConfig (`base`) parsing every argument as it would, typed
    and defaulted alike, then keeping only ARGS: HTA makes a column of each
    argument row by row, and most of a GPU trace's (grid, registers,
    occupancy, ...) are never read here."""
    class Kept(base):
        @classmethod
        def infer_attribute_specs(cls, args, reference_specs=None):
            found = super().infer_attribute_specs(args, reference_specs)
            return {raw: spec for raw, spec in found.items() if spec.name in ARGS}
    return Kept(base.get_minimum_args()).set_parse_all_args(True)


def load(path: Path) -> Tuple[dict, List[Event]]:
    """The file's metadata (distributedInfo, ...) and its events, via HTA."""
    try:
        from hta.common.trace_parser import parse_trace_dataframe
        from hta.configs.parser_config import ParserConfig
    except ImportError:
        raise TraceError(HTA_MISSING) from None
    config = hta_config(ParserConfig)
    hta_log = logging.getLogger("hta")
    level, hta_log.level = hta_log.level, logging.CRITICAL   # its notes on every file
    try:
        with warnings.catch_warnings():      # HTA's own use of pandas' deprecated calls
            warnings.simplefilter("ignore")
            meta, frame, symbols = parse_trace_dataframe(str(path), config)
    except Exception as e:       # HTA raises whatever json/gzip/pandas raise on a bad file
        raise TraceError(f"{path.name}: not a complete Kineto trace JSON "
                         f"({type(e).__name__}: {str(e)[:120]}).") from None
    finally:
        hta_log.setLevel(level)
    if frame is None or frame.empty or "name" not in frame:
        raise TraceError(f"{path.name}: a Kineto trace with no events.")
    names = symbols.sym_table
    columns = {c: frame[c].tolist() for c in frame.columns if c not in BASIC}
    events = [Event(names[name], names[cat], float(ts), float(dur), int(tid), i, columns)
              for i, (name, cat, ts, dur, tid) in enumerate(zip(*(
                  frame[c].tolist() for c in ("name", "cat", "ts", "dur", "tid"))))]
    events.sort(key=lambda e: (e.ts, -e.dur))
    return meta or {}, events


def steps(events: Sequence[Event]) -> Dict[int, Event]:
    """The ProfilerStep#N spans of the trace, by N."""
    found = {}
    for e in events:
        m = STEP.match(e.name)
        if m and e.cat in ("user_annotation", "cpu_op"):
            found[int(m.group(1))] = e
    return found


def identity(path: Path, meta: dict) -> Tuple[int, int]:
    """(rank, world) from distributedInfo, else the rank from the file name."""
    info = meta.get("distributedInfo") or {}
    rank, world = info.get("rank"), info.get("world_size")
    if rank is None:
        m = re.search(r"rank[-_]?(\d+)", path.name)
        if not m:
            raise TraceError(f"{path.name}: no distributedInfo and no rank in the file's name.")
        rank = int(m.group(1))
    return int(rank), int(world) if world is not None else 0


def own_groups(meta: dict) -> Dict[str, Group]:
    """The process groups distributedInfo.pg_config lists (the rank's own)."""
    info = meta.get("distributedInfo") or {}
    world = int(info.get("world_size") or 0)
    groups = {}
    for pg in info.get("pg_config") or []:
        ranks = tuple(int(r) for r in pg.get("ranks") or ())
        if not ranks and int(pg.get("pg_size") or 0) == world > 0:
            ranks = tuple(range(world))
        if ranks:
            name = str(pg["pg_name"])
            groups[name] = Group(name, ranks, str(pg.get("pg_desc", "")))
    return groups


def read_rank(path: Path, iteration: Optional[int] = None,
              described: Optional[Dict[int, dict]] = None) -> RankRead:
    """One rank's file. `described`: per record-function id, what the rank's
    execution trace says of a c10d operator (traces/execution.py)."""
    meta, events = load(path)
    rank, world = identity(path, meta)
    found = steps(events)
    if not found:
        raise TraceError(f"{path.name}: no ProfilerStep#N iteration in the trace.")
    n = max(found) if iteration is None else iteration
    if n not in found:
        raise TraceError(f"{path.name}: iteration ProfilerStep#{n} is not in the trace "
                         f"(it has {', '.join(f'#{k}' for k in sorted(found))}).")
    step = found[n]
    groups = own_groups(meta)
    gpu = any(e.cat == "kernel" for e in events)
    window = Window(step, events, gpu)
    pending = gpu_comms(path, window, groups) if gpu else cpu_comms(path, window, groups,
                                                                          described)
    compute = gpu_compute(window) if gpu else cpu_compute(window)
    trace = RankTrace(rank, str(path), step.dur * US, compute=compute)
    read = RankRead(rank, world, path.name, groups, trace, pending, sorted(found),
                    f"ProfilerStep#{n}")
    settle(read)
    return read


class Window:
    """The iteration's events: the CPU ones inside the step's span, and on a
    GPU trace the device work its CPU launches started (by correlation)."""

    def __init__(self, step: Event, events: Sequence[Event], gpu: bool):
        self.step, self.t0, self.thread = step, step.ts, step.tid
        self.cpu = [e for e in events if step.ts <= e.ts < step.end and e is not step
                    and e.cat not in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")]
        self.launches: Dict[int, Event] = {}
        self.device: List[Event] = []
        if gpu:
            self.launches = {int(e.arg("correlation")): e for e in self.cpu
                             if e.cat in ("cuda_runtime", "cuda_driver")
                             and e.arg("correlation", -1) != -1}
            self.device = [e for e in events if e.cat == "kernel"
                           and e.arg("correlation", -1) in self.launches]

    def rel(self, ts: float) -> float:
        return (ts - self.t0) * US


def nccl_kernel(e: Event) -> bool:
    return "nccl" in e.name.lower()


def gpu_compute(w: Window) -> List[Compute]:
    return [Compute(w.rel(e.ts), e.dur * US, e.name, f"stream {e.arg('stream', '?')}")
            for e in w.device if not nccl_kernel(e)]


def gpu_comms(path: Path, w: Window, groups: Dict[str, Group]) -> List[Pending]:
    """The NCCL kernels the iteration launched, with the record_param_comms
    arguments the profiler copies onto each."""
    pending = []
    for e in w.device:
        if not nccl_kernel(e):
            continue
        name = str(e.arg("collective_name", ""))
        if not name:
            raise TraceError(f"{path.name}: {e.name[:60]} at {w.rel(e.ts) * 1e3:.3f} ms: "
                             "an NCCL kernel without record_param_comms arguments "
                             "(profile with record_shapes=True).")
        if name in NOT_DATA or name not in COLLECTIVE_KINDS:
            continue
        launch = w.launches[int(e.arg("correlation"))]
        pending.append(from_param_comms(path, w, e, name, groups,
                                        start=e.ts, dur=e.dur, issued=launch.ts))
    return pending


def from_param_comms(path: Path, w: Window, e: Event, name: str, groups: Dict[str, Group],
                     start: float, dur: float, issued: float) -> Pending:
    """An operation as record_param_comms describes it (on a kernel or CPU op)."""
    where = f"{path.name}: {e.name[:60]} at {w.rel(start) * 1e3:.3f} ms"
    kind = COLLECTIVE_KINDS[name]
    typed = scalar_type(str(e.arg("msg_dtype", e.arg("dtype", ""))))
    if typed is None:
        raise TraceError(f"{where}: data type {e.arg('msg_dtype')!r} is not one the reader knows.")
    dtype, size = typed
    n_in, n_out = int(e.arg("in_msg_nelems", 0)), int(e.arg("out_msg_nelems", 0))
    group = str(e.arg("process_group_name", ""))
    ranks = number_list(e.arg("process_group_ranks", "[]"))
    if group and ranks and group not in groups:
        groups[group] = Group(group, tuple(ranks), str(e.arg("process_group_desc", "")))
    peer_place = int(e.arg("rank", e.arg("process_rank", -1))) if kind in ("send", "recv") else -1
    return Pending(start=w.rel(start), dur=dur * US, kind=kind,
                   elems=n_out if kind == "allgather" else n_in, size=size, dtype=dtype,
                   group=group, where=where, name=e.name,
                   in_splits=tuple(number_list(e.arg("in_split_size", "[]"))),
                   out_splits=tuple(number_list(e.arg("out_split_size", "[]"))),
                   peer_place=peer_place, issued=w.rel(issued),
                   group_size=int(e.arg("group_size", 0)))


def number_list(text) -> List[int]:
    if isinstance(text, (list, tuple)):
        return [int(x) for x in text]
    text = str(text).strip()
    if not text or text in ("[]", "None"):
        return []
    return [int(x) for x in ast.literal_eval(text)]


# --- CPU (gloo) traces ----------------------------------------------------------

COMM_PREFIXES = ("c10d::", "gloo:", "nccl:", "record_param_comms", "_c10d_functional::")


def is_comm(e: Event) -> bool:
    return e.name.startswith(COMM_PREFIXES) or "wait" in e.name.lower()


def outermost(events: Sequence[Event]) -> List[Event]:
    """The events not inside another of `events` (sorted by start)."""
    top, end = [], -math.inf
    for e in events:
        if e.ts >= end:
            top.append(e)
            end = e.end
    return top


def cpu_compute(w: Window) -> List[Compute]:
    """The training thread's outermost operators, less the communication and
    waiting inside them, one span per piece left."""
    mine = [e for e in w.cpu if e.tid == w.thread and e.cat == "cpu_op"]
    comm = outermost([e for e in mine if is_comm(e)])
    spans = []
    for op in outermost(mine):
        if is_comm(op):
            continue
        start = op.ts
        for c in comm:
            if c.ts >= op.end or c.end <= start:
                continue
            if c.ts > start:
                spans.append(Compute(w.rel(start), (c.ts - start) * US, op.name,
                                     f"thread {w.thread}"))
            start = max(start, c.end)
        if op.end > start:
            spans.append(Compute(w.rel(start), (op.end - start) * US, op.name,
                                 f"thread {w.thread}"))
    return spans


def c10d_kind(e: Event) -> Optional[str]:
    if not e.name.startswith("c10d::"):
        return None
    return C10D_KINDS.get(e.name[len("c10d::"):].rstrip("_"))


def gloo_work(w: Window, ops: List[Event]) -> Dict[int, Event]:
    """Each c10d operator's gloo:* work, by the operator's index in `ops`: the
    work's record function is opened while the operator runs, so its id is the
    first gloo:* id after the operator's and before the next operator's."""
    works = sorted((e for e in w.cpu if e.name.startswith("gloo:") and e.arg(
        "record_function_id", -1) != -1), key=lambda e: int(e.arg("record_function_id")))
    ids = [int(op.arg("record_function_id", -1)) for op in ops]
    linked, k = {}, 0
    for i, rf in enumerate(ids):
        if rf < 0:
            continue
        upper = next((x for x in ids[i + 1:] if x >= 0), math.inf)
        while k < len(works) and int(works[k].arg("record_function_id")) <= rf:
            k += 1
        if k < len(works) and int(works[k].arg("record_function_id")) < upper:
            linked[i] = works[k]
            k += 1
    return linked


def cpu_comms(path: Path, w: Window, groups: Dict[str, Group],
              described: Optional[Dict[int, dict]]) -> List[Pending]:
    """The outermost c10d operators of the training thread, timed by their gloo work."""
    ops = [e for e in outermost([e for e in w.cpu if e.tid == w.thread and e.cat == "cpu_op"
                                 and e.name.startswith("c10d::")]) if c10d_kind(e)]
    inner = [e for e in w.cpu if e.name == "record_param_comms"]
    works = gloo_work(w, ops)
    pending = []
    for i, op in enumerate(ops):
        work = works.get(i)
        start, dur = (work.ts, work.dur) if work else (op.ts, op.dur)
        thread = work.tid if work and work.tid != w.thread else -1
        param = next((r for r in inner if op.ts <= r.ts < op.end and r.tid == op.tid), None)
        facts = (described or {}).get(int(op.arg("record_function_id", -1)))
        if facts is not None:
            facts["used"] = True          # the execution trace's node has its partner
        if param is not None and str(param.arg("collective_name", "")) in COLLECTIVE_KINDS:
            p = from_param_comms(path, w, param, str(param.arg("collective_name")), groups,
                                 start=start, dur=dur, issued=op.ts)
        else:
            p = from_c10d(path, w, op, facts, start, dur)
        p.thread = thread
        pending.append(p)
    return pending


def from_c10d(path: Path, w: Window, op: Event, facts: Optional[dict],
              start: float, dur: float) -> Pending:
    """An operation as its c10d operator's arguments describe it; `facts`
    (from the execution trace) fill in the tensors' types and shapes."""
    where = f"{path.name}: {op.name} at {w.rel(op.ts) * 1e3:.3f} ms"
    facts = facts or describe(op.name, [str(t) for t in op.arg("input_type", [])],
                              op.arg("input_dims", []), list(op.arg("concrete_inputs", [])))
    if facts.get("dtype") is None:
        raise TraceError(f"{where}: the profiler did not record its tensors' data type "
                         f"({facts.get('why', 'a tensor list')}); read it with the rank's "
                         "execution trace beside it (traces/execution.py).")
    return Pending(start=w.rel(start), dur=dur * US, kind=c10d_kind(op), elems=facts["elems"],
                   size=facts["size"], dtype=facts["dtype"], group="", where=where,
                   name=op.name, in_splits=facts.get("in_splits", ()),
                   out_splits=facts.get("out_splits", ()), peer_place=facts.get("peer", -1),
                   root=facts.get("root", 0), issued=w.rel(op.ts),
                   group_size=facts.get("group_size", 0))
