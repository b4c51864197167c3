"""The experiment: which collective to replay, how, over which sizes, and
what to measure alongside. Written in a fabric's ``experiment:`` section,
overridden by command-line flags, and validated once, here, with the same
validators and limits whichever of the two a value comes from: the YAML
against its schema (each mistake a FabricError naming file and key), then
the whole experiment against the fabric it runs on (ranks, servers, probe
endpoints, how many sizes and pieces, how long it would take). A mistake
involving a flag is a ValueError naming the flag, and the file's key or the
default it meets. The names it accepts come from collectives/registry.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, List, Optional

from toolkit.validators import (MAX_FAILURES, OPTIONAL_SECTION, choice, endpoint_pair, failures,
                                integer, normalise, number, optional, size, split_failure, text)
from toolkit.errors import FabricError, shown
from collectives import schedules
from policies import policy
from sim import hybrid_step, trace_step, training_step
from traces.reading import read_once
from sim import nccl
from sim.nccl import endhosts, tuner
from sim.nccl.overrides import OverrideError, enabled
from collectives.datatypes import OPS, TYPE_NAMES, datatype
from collectives.metrics import TYPE_SIZE, bus_factor
from collectives.registry import (ALGORITHM_CHOICES, ALGORITHMS, AUTO, BY_SERVER, COLLECTIVES,
                                  FLAT_RING, REDUCING, ROOTED, SERVER_RINGS,
                                  default_algorithm)
from traffic.engines import ENGINES

SCALE_UP = ("packets", "memory")
MAX_LAB_BYTES = 1 << 30     # a message on a lab: every rank holds its buffers in memory
MAX_SIM_BYTES = 16 << 30    # the simulator's: nccl-tests' peaks sit at 8-16 GiB
_OVERRIDE = re.compile(r"[\^A-Za-z0-9,;: ]{1,200}")   # NCCL_ALGO / NCCL_PROTO (overrides.py)  # how the agents carry NVLink traffic inside a server
SCHEMA = {
    "collective": (optional(choice(*COLLECTIVES)), None),
    "algorithm": (optional(choice(*ALGORITHM_CHOICES)), None),
    "engine": (optional(choice(*ENGINES)), None),
    "minbytes": (optional(size(4, MAX_SIM_BYTES)), None),
    "maxbytes": (optional(size(4, MAX_SIM_BYTES)), None),
    "stepfactor": (optional(number(1, 1024, "x")), None),
    "iters": (optional(integer(1, 1000)), None),
    "warmup": (optional(integer(0, 100)), None),
    "root": (optional(integer(0, 4095)), None),
    "channels": (optional(integer(1, 16)), None),
    "piece_bytes": (optional(size(64, 1 << 26)), None),
    "probe": (optional(endpoint_pair), None),
    "cross": (optional(endpoint_pair), None),
    "scale_up": (optional(choice(*SCALE_UP)), None),
    "fail": (optional(failures), None),
    "datatype": (optional(choice(*TYPE_NAMES)), None),
    "op": (optional(choice(*OPS)), None),
    "nccl_algo": (optional(text(_OVERRIDE, "a list such as ring,tree or ^nvls")), None),
    "nccl_proto": (optional(text(_OVERRIDE, "a list such as simple or ^ll128")), None),
    "step": (training_step.STEP_SCHEMA, OPTIONAL_SECTION),
}
FIELDS = tuple(SCHEMA)          # what the YAML section and the flags may set
FLAGS = {"collective": "-c/--collective", "algorithm": "-a/--algorithm", "engine": "--engine",
         "minbytes": "-b/--minbytes", "maxbytes": "-e/--maxbytes",
         "stepfactor": "-f/--stepfactor", "iters": "-n/--iters", "warmup": "-w/--warmup",
         "root": "--root", "channels": "--channels", "piece_bytes": "--piece-bytes",
         "probe": "--probe", "cross": "--cross", "scale_up": "--scale-up", "fail": "--fail",
         "datatype": "-d/--datatype", "op": "-o/--op", "nccl_algo": "--nccl-algo",
         "nccl_proto": "--nccl-proto", "step": "--step"}
MAX_SIZES = 64          # sizes in one sweep (nccl-tests' -b 4 -e 1G -f 2 makes 29)
MAX_PIECES = 16384      # pieces the largest message is cut into (1G in 64K pieces)
MAX_HOURS = 24          # the least time a sweep can take on the fabric's fastest link
MAX_STEP_BYTES = 1 << 30    # a step's buffers on each rank: as a sweep's largest message

Namer = Callable[[str], str]


class ExperimentError(ValueError):
    """An impossible experiment, in one sentence (str). `key` is the field at
    fault (None: the experiment as a whole) and `detail` what is wrong with
    it, for a message that names the field its own way (a file's key)."""

    def __init__(self, key: Optional[str], detail: str, sentence: str):
        self.key, self.detail = key, detail
        super().__init__(sentence)


def size_text(n: int) -> str:
    """Bytes as the flags take them: 4M, 64K, 1G, or the number."""
    for unit, power in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << power and n % (1 << power) == 0:
            return f"{n >> power}{unit}"
    return str(n)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _plain(key: str) -> str:
    return key


@dataclass
class Experiment:
    collective: str = "allreduce"
    algorithm: str = AUTO             # per size, NCCL's choice (sim/nccl/endhosts.py)
    engine: str = "agents"
    minbytes: int = 32 * 1024
    maxbytes: int = 2 * 1024 * 1024
    stepfactor: float = 4
    iters: int = 5
    warmup: int = 1
    root: int = 0
    channels: int = 1
    piece_bytes: int = 64 * 1024
    probe: List[str] = field(default_factory=list)     # [src, dst]; default first and last rank
    ranks: List[str] = field(default_factory=list)     # endpoints in rank order; default all
    idle_seconds: float = 1.5                          # idle-latency measurement first
    cross: List[str] = field(default_factory=list)     # [src, dst]: iperf3 cross traffic
    scale_up: str = "packets"                          # NVLink: packets on its links, or memory
    fail: List[str] = field(default_factory=list)      # LINK@SECONDS[+DURATION] during the sweep
    datatype: str = "float"                            # nccl-tests' -d (collectives/datatypes.py)
    op: str = "sum"                                    # nccl-tests' -o
    nccl_algo: Optional[str] = None                    # auto's NCCL_ALGO (sim/nccl/overrides.py)
    nccl_proto: Optional[str] = None                   # auto's NCCL_PROTO
    step: Optional[dict] = None                        # a training step (sim/training_step.py)


def step_plan(exp: Experiment) -> "training_step.Plan":
    """The training step's plan (the step must be set and checked)."""
    return training_step.plan_step(exp.step, exp.datatype)


def job_of(exp: Experiment, count: int, policy: str, local: int = 1):
    """What the engines replay for a size of `count` float32-sized units."""
    from traffic.engines import Job
    return Job(exp.collective, exp.algorithm, count, exp.root, piece_bytes_for(exp, policy),
               exp.channels, local, exp.scale_up, datatype(exp.datatype).name, exp.op)


def piece_bytes_for(exp: Experiment, policy_name: str) -> int:
    """The piece size the engines cut messages into under a routing
    policy (spray cuts them small), never more than MAX_PIECES per message."""
    fewest = -(-exp.maxbytes // MAX_PIECES)
    return policy(policy_name).piece_bytes(exp.piece_bytes,
                                           -(-fewest // TYPE_SIZE) * TYPE_SIZE)


def check_for_ranks(exp: Experiment, n_ranks: int, local: int = 1, names: Namer = _plain) -> None:
    """Raise ExperimentError (a ValueError) with one sentence for an
    impossible experiment; `names` says how the sentence names a field."""
    def fail(key, detail, sentence=None):
        raise ExperimentError(key, detail, sentence or (f"{names(key)}: {detail}" if key
                                                        else detail))
    for key, (validate, _default) in SCHEMA.items():
        value = getattr(exp, key)
        if isinstance(validate, dict):
            continue                                # the step: checked below
        if (key not in ("probe", "cross", "fail") or value) and validate(
                value, lambda message, key=key: fail(key, message)) != value:
            fail(key, f"expected it as a number, got {shown(value)}")      # "64K": parse it
    if exp.op != "sum" and exp.collective not in REDUCING:
        fail("op", f"{exp.collective} reduces nothing; only {', '.join(REDUCING[:-1])} and {REDUCING[-1]} take "
             f"an op other than sum")
    if exp.algorithm not in ALGORITHMS[exp.collective] + (AUTO,):
        fail("algorithm", f"{shown(exp.algorithm)} is not an algorithm of "
             f"{exp.collective}; expected one of "
             f"{', '.join(ALGORITHMS[exp.collective] + (AUTO,))}")
    if not _whole(n_ranks) or n_ranks < 2:
        fail(None, f"a collective needs at least 2 ranks (servers), got {shown(n_ranks)}")
    if not _whole(local) or local < 1:
        fail(None, f"GPUs per server must be a whole number of at least 1, got {shown(local)}")
    for key in ("probe", "cross"):
        pair = getattr(exp, key)
        if len(set(pair)) == 1:
            fail(key, f"{shown(','.join(pair))} names one server twice; expected two "
                 "different servers")
    limit = ENGINES[exp.engine].max_ranks
    if limit and n_ranks > limit:
        fail("engine", f"{exp.engine} numbers queue pairs for at most {limit} ranks, "
             f"and this experiment has {n_ranks}")
    _check_sizes(exp, fail, names)
    _check_ranks(exp, n_ranks, local, fail)
    _check_scale_up(exp, local, fail)
    _check_overrides(exp, fail)
    if exp.step is not None:
        _check_step(exp, fail)
        _check_parallel(exp, n_ranks, local, fail)


def _check_step(exp: Experiment, fail) -> None:
    """A step runs on the agents (or the simulator), its collectives set
    by its mode; what a sweep adds around it is refused by name."""
    if not ENGINES[exp.engine].runs_steps:
        fail("engine", f"a training step runs on the rank agents or the simulator; the "
             f"{exp.engine} engine replays collectives one at a time")
    if exp.collective != "allreduce":
        fail("collective", "a training step's collectives come from step.mode "
             "(allreduce, or sharded: allgather and reducescatter)")
    for key in ("cross", "fail"):
        if getattr(exp, key):
            fail(key, "is for size sweeps; a training step runs without it")
    if exp.step.get("trace"):         # the job as recorded: its own compute and collectives
        if exp.step.get("parallel"):
            fail("step.trace", "replays the job as it was recorded, and a hybrid layout "
                 "(step.parallel, --parallel) makes one up: give one of them")
        return None
    try:
        plan = step_plan(exp)
    except training_step.StepError as exc:
        fail(f"step.{exc.key}" if exc.key else "step", exc.detail)
    _check_sharded(exp, plan, fail)
    held = plan.gradient_bytes * (2 if plan.mode == "sharded" else 1)
    if held > MAX_STEP_BYTES:        # each rank keeps every bucket's buffers at once
        what = "gradients and parameters" if plan.mode == "sharded" else "gradients"
        fail("step", f"{held:,} bytes of {what} would be held by every rank; at most {size_text(MAX_STEP_BYTES)}: fewer "
             "parameters or a smaller type")
    largest = max(b.bytes for b in plan.buckets)
    if -(-largest // exp.piece_bytes) > MAX_PIECES:
        fail("piece_bytes", f"{size_text(exp.piece_bytes)} cuts the largest bucket "
             f"({largest:,} bytes) into {-(-largest // exp.piece_bytes):,} pieces; at "
             f"most {MAX_PIECES:,}: raise it")
    return plan


def _check_parallel(exp: Experiment, n_ranks: int, local: int, fail) -> None:
    """A hybrid layout (step.parallel) these ranks and layers can run."""
    par = exp.step.get("parallel")
    if par is None:
        return
    layers = exp.step["layers"]
    layers = training_step.DEFAULTS["layers"] if layers is None else layers
    if not isinstance(layers, int):
        fail("step.layers", "a hybrid layout splits a layer count over its stages, not a "
             "list of layers")
    if exp.step["mode"] != "allreduce":
        fail("step.mode", "a hybrid layout reduces its gradients by AllReduce over DP; "
             "sharded is for pure data parallelism")
    try:
        hybrid_step.check(par, n_ranks, local, layers)
    except hybrid_step.HybridError as exc:
        fail("step.parallel", str(exc))


def _check_step_duration(exp: Experiment, plan, fastest_mbit: float) -> None:
    steps = exp.iters + exp.warmup
    hours = steps * (plan.compute_s + plan.gradient_bytes * 8 / (fastest_mbit * 1e6)) / 3600
    if hours > MAX_HOURS:
        raise ExperimentError("step", f"{steps} steps would take at least {hours:,.0f} "
                              f"hours ({plan.compute_s:,.1f} s of compute and "
                              f"{plan.gradient_bytes:,} bytes of gradients each at "
                              f"{fastest_mbit:g} Mbit/s); at most {MAX_HOURS}: a smaller "
                              "model, less compute or fewer iterations",
                              f"the training step: {steps} steps would take at least "
                              f"{hours:,.0f} hours; at most {MAX_HOURS}")


def _check_sharded(exp: Experiment, plan, fail) -> None:
    if plan.mode == "sharded" and exp.algorithm not in (FLAT_RING, AUTO):
        fail("algorithm", f"sharded steps run ring AllGather and ReduceScatter; "
             f"{exp.algorithm} is an AllReduce algorithm (use mode allreduce)")


def _check_overrides(exp: Experiment, fail) -> None:
    """NCCL_ALGO / NCCL_PROTO narrow auto's choice, as NCCL's would."""
    for key, value in (("nccl_algo", exp.nccl_algo), ("nccl_proto", exp.nccl_proto)):
        if value and exp.algorithm != AUTO:
            fail(key, f"narrows -a auto's choice; -a {exp.algorithm} names the algorithm "
                 "itself")
    try:
        enabled(exp.nccl_algo, exp.nccl_proto)
    except OverrideError as exc:
        key = "nccl_algo" if str(exc).startswith("NCCL_ALGO") else "nccl_proto"
        fail(key, str(exc).split(": ", 1)[1])


def _check_scale_up(exp: Experiment, local: int, fail) -> None:
    if exp.scale_up != "memory":
        return
    if local == 1:
        fail("scale_up", "memory hands NVLink transfers over inside each server's agent "
             "process: it needs servers of several GPUs (server.gpus above 1)")
    if not ENGINES[exp.engine].scale_up_in_memory:
        fail("scale_up", f"memory is how the rank agents carry NVLink traffic; the "
             f"{exp.engine} engine sends it as packets (use packets, or --engine agents)")


def sweep_sizes(exp: Experiment, limit: int = MAX_SIZES) -> List[int]:
    """The sweep's sizes (nccl-tests' -b/-e/-f), at most `limit` + 1 of them."""
    out, size_ = [], exp.minbytes
    while size_ <= exp.maxbytes and len(out) <= limit:
        out.append(int(size_))
        if exp.stepfactor <= 1:
            break
        size_ *= exp.stepfactor
    return out


def _check_sizes(exp: Experiment, fail, names: Namer) -> None:
    lo, hi, factor = exp.minbytes, exp.maxbytes, exp.stepfactor
    if lo > hi:
        fail("minbytes", f"{size_text(lo)} is larger than {names('maxbytes')} "
             f"({size_text(hi)})", f"{names('minbytes')} {size_text(lo)} is larger than "
             f"{names('maxbytes')} {size_text(hi)}")
    if factor <= 1 and hi > lo:
        fail("stepfactor", f"{shown(factor)} never reaches {names('maxbytes')} from "
             f"{names('minbytes')}; expected a factor above 1")
    if len(sweep_sizes(exp)) > MAX_SIZES:
        total = int(math.log(hi / lo) / math.log(factor)) + 1
        fail("stepfactor", f"{shown(factor)} would run {total:,} sizes from {size_text(lo)} to "
             f"{size_text(hi)}; at most {MAX_SIZES}: raise the step factor")
    if ENGINES[exp.engine].needs_lab and hi > MAX_LAB_BYTES:
        fail("maxbytes", f"{size_text(hi)} is more than a lab's {size_text(MAX_LAB_BYTES)} "
             f"(every rank holds its buffers in memory); --engine sim takes up to "
             f"{size_text(MAX_SIM_BYTES)}")
    pieces = -(-hi // exp.piece_bytes)
    if pieces > MAX_PIECES and ENGINES[exp.engine].needs_lab:
        fail("piece_bytes", f"{size_text(exp.piece_bytes)} cuts the largest message "
             f"({size_text(hi)}) into {pieces:,} pieces; at most {MAX_PIECES:,}: raise it "
             f"or lower {names('maxbytes')}")


def _check_ranks(exp: Experiment, n_ranks: int, local: int, fail) -> None:
    if exp.algorithm == SERVER_RINGS and local == 1:
        fail("algorithm", f"{SERVER_RINGS} needs servers with several GPUs (server.gpus), "
             f"ranks in whole servers; with one GPU per server it is the {FLAT_RING}")
    if exp.algorithm == SERVER_RINGS and n_ranks % local:
        fail("algorithm", f"{SERVER_RINGS} needs whole servers: {n_ranks} ranks are not a "
             f"multiple of {local} GPUs per server")
    if not 0 <= exp.root < n_ranks:
        fail("root", f"{exp.root} is not a rank: there are {n_ranks} ranks, 0 to "
             f"{n_ranks - 1}")
    algorithm = default_algorithm(exp.collective) if exp.algorithm == AUTO \
        else exp.algorithm         # auto's candidates hold whole servers by themselves
    try:                        # what the schedules hold a caller to, before any is built
        schedules.check_params(exp.collective, algorithm, n_ranks,
                       schedules.round_count(exp.collective, n_ranks, exp.minbytes // TYPE_SIZE),
                       exp.root, exp.piece_bytes // TYPE_SIZE, local)
    except ValueError as exc:
        fail(None, str(exc))


def experiment_from(fabric, flags: Optional[dict] = None,
                    compare: Iterable[str] = ()) -> Optional[Experiment]:
    """The fabric's experiment section, checked, then overridden by `flags`
    (field -> value; None means not given) and checked again, with the
    algorithms of `compare`. A mistake in the YAML alone is a FabricError
    naming file and key; one with a flag in it a ValueError naming the flag.
    None for a fabric with one endpoint: nothing to replay."""
    values = experiment_section(fabric)
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    compare = list(compare)
    if len(fabric.endpoints) < 2:
        return _one_server(fabric, values, given, compare)
    if "collective" in values and "algorithm" not in values:
        values["algorithm"] = AUTO
    try:
        check_experiment(fabric, Experiment(**values), _namer((), values))
    except ExperimentError as exc:
        raise FabricError(fabric.source, f"experiment.{exc.key}" if exc.key else "experiment",
                          exc.detail) from None
    typed = set(given)              # what the user typed, not what follows from it
    if "step" in given:             # the step flags, over the file's step section
        typed |= {f"step.{k}" for k in given["step"]}
        given["step"] = normalise({**values.get("step", {}), **given["step"]}, training_step.STEP_SCHEMA,
                                  "--step", "the flags")
    names = _namer(typed, values)
    if "collective" in given and "algorithm" not in given:
        given["algorithm"] = AUTO
    exp = Experiment(**{**values, **given})
    sweep_only = [k for k in ("minbytes", "maxbytes", "stepfactor", "probe") if k in typed]
    if exp.step is not None and sweep_only:
        why = ("a training step runs no latency probe" if sweep_only[0] == "probe" else
               "a training step's sizes are its buckets'")
        raise ValueError(f"{FLAGS[sweep_only[0]]} is for size sweeps: {why}; leave it out")
    check_experiment(fabric, exp, names, compare)
    if "root" in typed and exp.collective not in ROOTED:
        raise ValueError(f"--root: {exp.collective} has no root; only "
                         f"{' and '.join(ROOTED)} have one")
    return exp


def _check_overrides_leave(fabric, exp: Experiment, names: Namer) -> None:
    """NCCL_ALGO / NCCL_PROTO that leave auto nothing to run are refused:
    where NCCL's model prices the run (--engine sim on named servers), no
    pair NCCL would run on these servers; else no algorithm the end hosts
    replay (NVLS and CollNet reduce in a switch)."""
    if exp.algorithm != AUTO or not (exp.nccl_algo or exp.nccl_proto):
        return
    local = fabric.gpus_per_server
    if (not ENGINES[exp.engine].needs_lab and fabric.server_model is not None
            and exp.collective in tuner.COLLECTIVES and exp.step is None):
        try:
            domain = fabric.nvlink_domain
            nccl.predict(nccl.cluster(fabric.server_model, max(1, len(fabric.endpoints) // domain),
                                      domain), exp.collective, exp.minbytes, exp.nccl_algo,
                         exp.nccl_proto)
        except ValueError:
            why = (f"NCCL would run none of what NCCL_ALGO={exp.nccl_algo or '(all)'} and "
                   f"NCCL_PROTO={exp.nccl_proto or '(all)'} leave for {exp.collective} on "
                   f"these {fabric.server_model.name} servers")
            raise ExperimentError("nccl_algo", why, f"{names('nccl_algo')}: {why}") from None
        return
    if exp.nccl_algo and not endhosts.candidates(exp.collective, local, max(1, len(fabric.endpoints) // local),
                               exp.nccl_algo):
        why = (f"{exp.nccl_algo} leaves no algorithm the end hosts can replay for "
               f"{exp.collective} (ring or tree); NVLS and CollNet reduce in a switch: "
               "--engine sim on named servers (server.model) prices them")
        raise ExperimentError("nccl_algo", why, f"{names('nccl_algo')}: {why}")


def check_experiment(fabric, exp: Experiment, names: Namer, compare: List[str] = ()) -> None:
    """`exp` and the algorithms to compare on `fabric`, before anything is
    built: ExperimentError naming each field as `names` does."""
    n, local = len(fabric.endpoints), fabric.gpus_per_server
    check_for_ranks(exp, n, local, names)
    _check_overrides_leave(fabric, exp, names)
    _check_flag_endpoints(fabric, exp, names)
    _check_failures(fabric, exp, names)
    for i, algorithm in enumerate(compare):
        why = (f"{shown(algorithm)} is not an algorithm of {exp.collective}; expected one of "
               f"{', '.join(ALGORITHMS[exp.collective])}"
               if algorithm not in ALGORITHMS[exp.collective] + (AUTO,) else
               f"{algorithm} is already the run's algorithm ({names('algorithm')})"
               if algorithm == exp.algorithm else
               f"{algorithm} is named twice" if algorithm in compare[:i] else None)
        if why:
            raise ExperimentError("algorithm", why, f"--compare: {why}")
        check_for_ranks(
            replace(exp, algorithm=algorithm), n, local, lambda key: "--compare" if key == "algorithm" else names(key))
    _check_duration(fabric, exp, 1 + len(compare))


def _check_failures(fabric, exp: Experiment, names: Namer) -> None:
    """Each failure names a link between two switches of this fabric."""
    if len(exp.fail) > MAX_FAILURES:
        detail = f"{len(exp.fail)} failures; at most {MAX_FAILURES}"
        raise ExperimentError("fail", detail, f"{names('fail')}: {detail}")
    if exp.fail and not ENGINES[exp.engine].needs_lab:
        detail = "the simulator has no links to take down; failures need a lab"
        raise ExperimentError("fail", detail, f"{names('fail')}: {detail}")
    switches = {s.name for s in fabric.network_switches}
    for item in exp.fail:
        link = split_failure(item)[0]
        if link == "random":
            if not any({l.a, l.b} <= switches for l in fabric.links):
                detail = f"{shown(item)}: this fabric has no link between two switches"
                raise ExperimentError("fail", detail, f"{names('fail')} {detail}")
            continue
        a, b = link.split("-")
        why = (f"there is no {shown(x)} in this fabric" if (x := next(
            (n for n in (a, b) if n not in switches and not _endpoint(fabric, n)), None))
            else f"{a} and {b} are not linked" if not any({l.a, l.b} == {a, b}
                                                          for l in fabric.links)
            else f"{link} is a server's own link: without it the collective cannot finish; "
                 "name a link between two switches" if not {a, b} <= switches else None)
        if why:
            detail = f"{shown(item)}: {why}"
            raise ExperimentError("fail", detail, f"{names('fail')} {detail}")
    _check_overlaps(exp, names)


def _check_overlaps(exp: Experiment, names: Namer) -> None:
    """A link cannot fail again while it is still down."""
    spans: dict = {}
    for item in exp.fail:
        link, start, duration, _kind = split_failure(item)
        end = start + duration if duration is not None else math.inf
        key = frozenset(link.split("-"))
        for other, (s0, e0) in spans.get(key, []):
            if link != "random" and start < e0 and s0 < end:
                detail = f"{shown(item)}: {link} is still down then ({shown(other)})"
                raise ExperimentError("fail", detail, f"{names('fail')} {detail}")
        spans.setdefault(key, []).append((item, (start, end)))


def _endpoint(fabric, name: str) -> bool:
    return any(h.name == name for h in fabric.endpoints) or any(
        s.name == name for s in fabric.switches)


def _check_duration(fabric, exp: Experiment, runs: int) -> None:
    """Refuse a sweep that cannot finish within MAX_HOURS: every iteration
    moves at least half the message through some link, at best the fabric's
    fastest."""
    fastest = fabric.fastest_rate_mbit
    if exp.step is not None:
        if not exp.step.get("trace"):     # a trace's time is its own (runs/trace_replay.py)
            _check_step_duration(exp, step_plan(exp), fastest)
        return
    sizes = sweep_sizes(exp)
    seconds = runs * (exp.iters + exp.warmup) * sum(sizes) / 2 * 8 / (fastest * 1e6)
    if seconds > MAX_HOURS * 3600:
        took = f"{seconds / 3600:,.0f} hours" if seconds < 3 * 86400 else \
            f"{seconds / 86400:,.0f} days"
        detail = (f"the sweep would take at least {took} at {fastest:g} Mbit/s ({len(sizes)} "
                  f"sizes up to {size_text(exp.maxbytes)}, {exp.iters + exp.warmup:,} iterations "
                  f"each{f', {runs} algorithms' if runs > 1 else ''}); at most {MAX_HOURS} "
                  "hours: fewer iterations, smaller sizes or faster links")
        raise ExperimentError(None, detail, detail)


# What a lab run costs besides its collectives' bytes (measured on this 2-core host with
# all_reduce_perf on the default fabric, docs/nccl-tests.md "How long a run takes"):
LAB_SECONDS = 5.0       # start, build, reach, figures, tear down: once a run
SIZE_SECONDS = 0.8      # each size of each sweep: the agents' set-up, the monitor's window,
                        # the simulator beside it


def expected_seconds(fabric, exp: Experiment, runs: int = 1,
                     plan: Optional[List[Experiment]] = None) -> Optional[float]:
    """About how long a lab run takes (`expected`'s seconds); None for the
    simulator, whose time is the host's computing, not the links'."""
    parts = expected(fabric, exp, runs, plan)
    return None if parts is None else parts["seconds"]


def expected(fabric, exp: Experiment, runs: int = 1,
             plan: Optional[List[Experiment]] = None) -> Optional[dict]:
    """About how long a lab run takes, from the sweeps it makes (`plan`:
    each sweep's experiment, by default `exp` `runs` times): each
    iteration of each size moving nccl-tests' bus bytes at the NIC rate
    (what busbw/link 1 means; all of a server's NICs at once for the
    algorithms laid out by server), a step's compute and its gradients
    likewise; plus LAB_SECONDS once, each sweep's idle-latency probe and
    SIZE_SECONDS a size. {"seconds", "wire_s", "sweeps", "sizes"}; None
    for the simulator."""
    if exp is None or not ENGINES[exp.engine].needs_lab:
        return None
    plan = plan if plan is not None else [exp] * runs
    wire = sum(_wire_seconds(fabric, e) for e in plan)
    sizes = sum(0 if e.step is not None else len(sweep_sizes(e)) for e in plan)
    seconds = LAB_SECONDS + wire + sum(e.idle_seconds for e in plan) + SIZE_SECONDS * sizes
    return {"seconds": seconds, "wire_s": wire, "sweeps": len(plan), "sizes": sizes}


def _wire_seconds(fabric, exp: Experiment) -> float:
    """One sweep's (or a step's) iterations at the NIC rate."""
    nic_bps = fabric.nic_rate_mbit * 1e6
    n = len(exp.ranks or fabric.endpoints)
    if exp.algorithm in BY_SERVER + (AUTO,) and fabric.gpus_per_server > 1:
        nic_bps *= fabric.nics_per_server    # laid out by server: every NIC at once
    if exp.step is not None and exp.step.get("trace"):
        spec = exp.step["trace"]
        p = trace_step.program_of(read_once(spec["path"], spec.get("iteration")),
                                  spec["replicas"], datatype(exp.datatype).size)
        return (exp.iters + exp.warmup) * trace_step.nic_seconds(p, nic_bps)
    if exp.step is not None:
        plan = step_plan(exp)
        wire = bus_factor("allreduce", n) * plan.gradient_bytes * 8 / nic_bps
        return (exp.iters + exp.warmup) * (plan.compute_s + wire)
    per_pass = sum(bus_factor(exp.collective, n) * s * 8 / nic_bps for s in sweep_sizes(exp))
    return (exp.iters + exp.warmup) * per_pass


def _namer(flags, section) -> Namer:
    """A field as a message names it: the flag the user typed, else the key
    of the file's experiment section, else the default."""
    def name(key: str) -> str:
        if key in flags:
            return FLAGS[key] if key in FLAGS else training_step.STEP_FLAGS.get(key[5:], "--step")
        if key.partition(".")[0] in section:
            return f"experiment.{key}"
        return f"the default {key}"
    return name


def _one_server(fabric, values: dict, given: dict, compare: List[str]) -> None:
    if values:
        raise FabricError(fabric.source, "experiment", "a collective needs at least 2 "
                          "servers, and this fabric has one")
    if given or compare:
        flag = FLAGS[next(iter(given))] if given else "--compare"
        raise ValueError(f"{flag}: this fabric has one server, so no collective runs")
    return None


def experiment_section(fabric) -> dict:
    """The keys the fabric's experiment section sets, each checked against
    the schema and its endpoints against the fabric: what a fabric file must
    get right even where no experiment runs (the planner reads such files)."""
    section = normalise(fabric.experiment_section, SCHEMA, "experiment", fabric.source)
    values = {k: v for k, v in section.items() if v is not None}
    _check_endpoints(fabric, values)
    return values


def _check_endpoints(fabric, values: dict) -> None:
    names = {h.name for h in fabric.endpoints}
    for key in ("probe", "cross"):
        missing = [p for p in values.get(key, ()) if p not in names]
        if missing:
            raise FabricError(fabric.source, f"experiment.{key}", (
                f"expected servers of this fabric, but there is no {shown(missing[0])} "
                f"(servers are {fabric.endpoints[0].name}..{fabric.endpoints[-1].name})"))


def _check_flag_endpoints(fabric, exp: Experiment, names: Namer) -> None:
    servers = {h.name for h in fabric.endpoints}
    for key in ("probe", "cross"):
        pair = getattr(exp, key)
        missing = [p for p in pair if p not in servers]
        if missing:
            detail = (f"{shown(','.join(pair))}: no server {shown(missing[0])} in this fabric "
                      f"(servers are {fabric.endpoints[0].name}..{fabric.endpoints[-1].name})")
            raise ExperimentError(key, detail, f"{names(key)} {detail}")
