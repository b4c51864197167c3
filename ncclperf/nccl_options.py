"""nccl-tests' flags (src/common.cu, 2.19), each with its meaning on the lab,
and fabric-lab's own options beside them.

Every nccl-tests flag is either honoured or answered in one sentence:
refused (`NcclFlagError`, exit status 2) where honouring it is impossible,
or accepted with a `# note:` line in the output where it changes nothing
the lab can do. FLAGS lists them all, with what each does here.

fabric-lab's options are run_topology.py's, handed over to it as typed
(its parser checks them): the fabric YAML (positional or --fabric),
--engine, --algorithm (long only: -a is nccl-tests' average mode),
--results, --policy, --datapath, --channels, --piece-bytes, --scale-up,
--probe, --cross, --fail, --flap, --nccl-algo, --nccl-proto, --csv,
--cluster, -v/--verbose; --dry-run is run_topology.py's --check.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from collectives.registry import REDUCING, ROOTED
from toolkit.errors import OneLineParser

# nccl-tests' orders (src/common.cu test_typenames, test_opnames), where the lab has them
TYPES = ("int8", "int32", "half", "float", "bfloat16")
NCCL_ONLY_TYPES = ("uint8", "uint32", "int64", "uint64", "double", "f8e4m3", "f8e5m2")
OPS = ("sum", "prod", "max", "min", "avg")
STEP_BYTES = 1 << 20                # nccl-tests' default -i
PROGRAMS = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather",
            "reduce_scatter_perf": "reducescatter", "broadcast_perf": "broadcast",
            "reduce_perf": "reduce", "alltoall_perf": "alltoall", "sendrecv_perf": "sendrecv"}

# flag: (long name, what nccl-tests means, what it does here)
FLAGS = {
    "-t": ("nthreads", "threads per process", "1 only: the lab's ranks are the fabric's GPUs"),
    "-g": ("ngpus", "GPUs per thread", "1 only: the lab's ranks are the fabric's GPUs"),
    "-b": ("minbytes", "smallest size", "honoured (K, M, G: binary, as nccl-tests)"),
    "-e": ("maxbytes", "largest size", "honoured"),
    "-i": ("stepbytes", "bytes added per size", "honoured when -f is not above 1"),
    "-f": ("stepfactor", "size multiplier", "honoured (a whole number, as nccl-tests reads it)"),
    "-n": ("iters", "timed iterations", "honoured"),
    "-m": ("agg_iters", "collectives aggregated per iteration", "1 only"),
    "-w": ("warmup_iters", "untimed iterations", "honoured, before each size"),
    "-N": ("run_cycles", "times the whole sweep runs", "honoured from 1; 0 (endless) refused"),
    "-p": ("parallel_init", "NCCL set-up by threads", "accepted, changes nothing"),
    "-c": ("check", "check the data", "0: #wrong N/A; 1 and more: every timed iteration checked"),
    "-o": ("op", "reduction", "sum, prod, max, min, avg, all; mulsum refused"),
    "-d": ("datatype", "data type", "int8, int32, half, float, bfloat16, all"),
    "-r": ("root", "root rank", "honoured for broadcast and reduce; all (or -1): every rank"),
    "-z": ("blocking", "blocking mode", "accepted: the lab always waits as -z 3 does"),
    "-y": ("stream_null", "the NULL CUDA stream", "accepted, changes nothing"),
    "-T": ("timeout", "timeout per test", "accepted: the lab times each iteration out itself"),
    "-G": ("cudagraph", "CUDA graph launches", "0 only"),
    "-C": ("report_cputime", "CPU time instead of latency", "0 only"),
    "-S": ("report_timestamps", "a timestamp per row", "0 only"),
    "-J": ("output_file", "JSON output file", "honoured (nccl-tests 2.19's JSON)"),
    "-a": ("average", "time across ranks: rank 0, mean, min, max", "0 to 3 accepted, one time"),
    "-R": ("local_register", "buffer registration", "accepted, changes nothing"),
    "-x": ("cta_policy", "NCCL's CTA policy", "accepted, changes nothing"),
    "-D": ("device_implementation", "device API kernels", "0 only"),
    "-V": ("device_cta_count", "CTAs of device kernels", "accepted, changes nothing"),
    "-M": ("memory", "GPU memory report", "accepted, no report"),
    "-u": ("unalign", "misaligned buffers", "accepted, changes nothing"),
    "-I": ("per_iter_timing", "per-iteration times", "honoured: i_* columns and JSON"),
    "-K": ("per_iter_skip", "iterations left out of -I's statistics", "honoured"),
}
# run_topology.py's options handed over as typed: (name, takes a value)
FORWARDED = (("--fabric", True), ("--engine", True), ("--algorithm", True), ("--results", True),
             ("--policy", True), ("--network", True), ("--datapath", True), ("--channels", True),
             ("--piece-bytes", True), ("--scale-up", True), ("--probe", True), ("--cross", True),
             ("--fail", True), ("--flap", True), ("--nccl-algo", True), ("--nccl-proto", True),
             ("--csv", True), ("--cluster", True), ("--verbose", False), ("--dry-run", False))
# run_topology.py's options that have no place here, and why
REFUSED = {
    "--collective": "the program's name is the collective (all_reduce_perf, all_gather_perf, ...)",
    "--compare": "nccl-tests prints one algorithm; run_topology.py --compare draws several",
    "--json": "-J FILE.json writes nccl-tests' JSON; run_topology.py --json prints its summary",
    "--warmup": "nccl-tests names it -w/--warmup_iters",
    "--cli": "nccl-tests runs its sweep and ends; run_topology.py --cli opens a prompt",
    "--calibrate": "calibration replays its own sweep: run_topology.py --calibrate",
    "--no-traffic": "nccl-tests is the traffic; run_topology.py --no-traffic builds only",
    "--iperf-check": "nccl-tests measures collectives only; run_topology.py --iperf-check",
    "--seconds": "it sets run_topology.py's --iperf-check",
    "--streams": "it sets run_topology.py's --iperf-check",
    "--step": "a training step is not an nccl-tests sweep: run_topology.py --step",
    "--cleanup": "run_topology.py --cleanup removes what killed labs left",
}


class NcclFlagError(ValueError):
    """A flag refused: one sentence."""


class _Parser(OneLineParser):
    error_class = NcclFlagError


@dataclass
class NcclOptions:
    """An nccl-tests command line on the lab: its flags as honoured, the
    notes to print, and what run_topology.py is handed."""
    program: str
    collective: str
    argv: List[str]
    minbytes: Optional[int] = None
    maxbytes: Optional[int] = None
    stepfactor: Optional[int] = None        # None: the fabric's experiment decides
    stepbytes: Optional[int] = None         # additive sizes (-i, or -f 1)
    iters: Optional[int] = None
    warmup: Optional[int] = None
    check: int = 1
    types: Optional[List[str]] = None       # None: the fabric's experiment's
    ops: Optional[List[str]] = None
    roots: Optional[List[int]] = None       # None: the experiment's; [-1]: every rank
    cycles: int = 1
    per_iter: bool = False
    per_iter_skip: int = 0
    json_path: Optional[Path] = None
    dry_run: bool = False
    notes: List[str] = field(default_factory=list)
    forward: List[str] = field(default_factory=list)


def _size(flag: str, text: str) -> int:
    """nccl-tests' parsesize: a number, then K, M or G (binary) if any."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(\S?).*", text)
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if not match or match.group(2).lower() not in units:
        raise NcclFlagError(f"{flag}: expected a size such as 8, 64K, 128M or 1G, got {text!r}")
    return int(float(match.group(1)) * units[match.group(2).lower()])


def _whole(flag: str, text: str, low: int, high: Optional[int] = None, why: str = "") -> int:
    """A whole number (decimal or 0x hex, as strtol reads it) in [low, high]."""
    try:
        value = int(text, 0)
    except ValueError:
        try:
            value = int(text, 10)
        except ValueError:
            raise NcclFlagError(f"{flag}: expected a whole number, got {text!r}") from None
    if value < low or (high is not None and value > high):
        span = f"from {low}" + (f" to {high}" if high is not None else " up")
        raise NcclFlagError(f"{flag} {value}: " + (why or f"expected a number {span}"))
    return value


def build_parser(program: str) -> argparse.ArgumentParser:
    p = _Parser(prog=program, allow_abbrev=False, add_help=True,
                description=f"{program}: nccl-tests' {program} on a fabric-lab fabric "
                            "(docs/nccl-tests.md). Its flags as nccl-tests has them; "
                            "fabric-lab's options beside them.")
    p.add_argument("fabric_file", nargs="?", metavar="FABRIC",
                   help="fabric YAML (default: topologies/default.yaml)")
    for short, (long, meaning, here) in FLAGS.items():
        p.add_argument(short, f"--{long}", dest=long, metavar="V", help=f"{meaning}: {here}")
    g = p.add_argument_group("fabric-lab (run_topology.py's options: docs/running.md)")
    for name, takes in FORWARDED:
        extra = ["-v"] if name == "--verbose" else []
        if takes:
            g.add_argument(*extra, name, action="append", metavar="V")
        else:
            g.add_argument(*extra, name, action="store_true")
    return p


def parse(program: str, argv: List[str]) -> NcclOptions:
    """The options of `argv` for `program`; NcclFlagError for a refused flag."""
    for token in argv:
        name = token.split("=", 1)[0]
        if name in REFUSED:
            raise NcclFlagError(f"{name} has no place in {program}: {REFUSED[name]}")
    ns = build_parser(program).parse_args(argv)
    opts = NcclOptions(program, PROGRAMS[program], [program, *argv])
    _sizes(opts, ns)
    _iterations(opts, ns)
    _data(opts, ns)
    _refused_values(ns)
    _noted(opts, ns)
    _output(opts, ns)
    _forward(opts, ns)
    return opts


def _sizes(opts: NcclOptions, ns) -> None:
    if ns.minbytes is not None:
        opts.minbytes = _size("-b", ns.minbytes)
    if ns.maxbytes is not None:
        opts.maxbytes = _size("-e", ns.maxbytes)
    factor = None if ns.stepfactor is None else _whole("-f", ns.stepfactor, 0)
    if factor is not None and factor > 1:
        opts.stepfactor = factor                # -i is then ignored, as by nccl-tests
    elif factor is not None or ns.stepbytes is not None:
        opts.stepbytes = STEP_BYTES if ns.stepbytes is None else _size("-i", ns.stepbytes)
        if opts.stepbytes < 1:
            raise NcclFlagError("-i: sizes must grow: expected at least 1 byte")


def _iterations(opts: NcclOptions, ns) -> None:
    if ns.iters is not None:
        opts.iters = _whole("-n", ns.iters, 1, 1000)
    if ns.warmup_iters is not None:
        opts.warmup = _whole("-w", ns.warmup_iters, 0, 100)
    if ns.run_cycles is not None:
        opts.cycles = _whole("-N", ns.run_cycles, 1, 1000, "0 runs the sweep for ever, and a "
                             "lab must end to tear down: give a number of cycles")
    if ns.agg_iters is not None:
        _whole("-m", ns.agg_iters, 1, 1, "the rank agents run one collective per iteration; "
               "several in one group (ncclGroupStart/End) are not replayed: use -n instead")
    if ns.per_iter_timing is not None:
        opts.per_iter = bool(_whole("-I", ns.per_iter_timing, 0, 1))
    if ns.per_iter_skip is not None:
        iters = opts.iters or 5
        opts.per_iter_skip = _whole("-K", ns.per_iter_skip, 0, iters - 1,
                                    f"expected 0 to {iters - 1}, fewer than -n's iterations")
        if opts.per_iter_skip and not opts.per_iter:
            raise NcclFlagError("-K leaves iterations out of -I's statistics: add -I 1")


def _data(opts: NcclOptions, ns) -> None:
    if ns.check is not None:
        opts.check = _whole("-c", ns.check, 0)
    if ns.datatype is not None:
        name = ns.datatype
        if name in NCCL_ONLY_TYPES:
            raise NcclFlagError(f"-d {name}: the rank agents compute {', '.join(TYPES)} "
                                "(collectives/datatypes.py), not this one of nccl-tests' types")
        if name != "all" and name not in TYPES:
            raise NcclFlagError(f"-d: expected one of {', '.join(TYPES)} or all, got {name!r}")
        opts.types = list(TYPES) if name == "all" else [name]
        if name == "all":
            opts.notes.append(f"note: -d all runs the lab's types ({', '.join(TYPES)}); "
                              f"nccl-tests' {', '.join(NCCL_ONLY_TYPES)} are not among them")
    if ns.op is not None:
        _op(opts, ns.op)
    if ns.root is not None:
        _root(opts, ns.root)


def _op(opts: NcclOptions, name: str) -> None:
    if name == "mulsum":
        raise NcclFlagError("-o mulsum is NCCL's premultiplied sum (ncclRedOpCreatePreMulSum), "
                            "a scalar per rank applied on its device; the rank agents' checked "
                            "reductions have no such op: use sum, prod, max, min or avg")
    if name != "all" and name not in OPS:
        raise NcclFlagError(f"-o: expected one of {', '.join(OPS)} or all, got {name!r}")
    if opts.collective not in REDUCING + ("sendrecv",):
        opts.notes.append(f"note: -o: {opts.program} reduces nothing, so -o changes nothing "
                          "(nccl-tests ignores it too)")
        return
    opts.ops = list(OPS) if name == "all" else [name]
    if name == "all":
        opts.notes.append("note: -o all runs sum, prod, max, min and avg; not mulsum, which "
                          "the rank agents have not")


def _root(opts: NcclOptions, text: str) -> None:
    every = text == "all" or text.strip() == "-1"
    if opts.collective not in ROOTED:
        opts.notes.append(f"note: -r: {opts.program} has no root, so -r changes nothing "
                          "(nccl-tests ignores it too)")
        return
    opts.roots = [-1] if every else [_whole("-r", text, 0, 4095)]


def _refused_values(ns) -> None:
    """Flags the lab can only take at the value that asks for nothing."""
    only = (("-t", ns.nthreads, 1, "nccl-tests' threads each drive GPUs; the lab's ranks are "
             "the fabric's GPUs (every server of its YAML, server.gpus each), one agent process "
             "per server: choose the fabric instead"),
            ("-g", ns.ngpus, 1, "the lab's ranks are the fabric's GPUs (every server of its "
             "YAML, server.gpus each): choose the fabric instead"),
            ("-G", ns.cudagraph, 0, "there are no CUDA graphs: the ranks are processes moving "
             "data over sockets"),
            ("-C", ns.report_cputime, 0, "nccl-tests' CPU time is the host's time to launch "
             "collectives without waiting for the GPU; the lab's ranks do the whole collective "
             "on the CPU, so it would be the time column again"),
            ("-S", ns.report_timestamps, 0, "a row is printed as its in-place size ends, "
             "after the whole out-of-place sweep, so a timestamp per row would mislead"),
            ("-D", ns.device_implementation, 0, "there are no device API kernels to run: "
             "the ranks are host processes"))
    for flag, text, value, why in only:
        if text is not None:
            _whole(flag, text, value, value, why)


def _noted(opts: NcclOptions, ns) -> None:
    """Flags accepted that change nothing the lab can do: a note each."""
    notes = (("-p", ns.parallel_init, (0, 1), 0, "the rank agents connect in parallel anyway"),
             ("-z", ns.blocking, (0, 3), 3, "every iteration here starts on all ranks together "
              "and is awaited on all (as -z 3: time excludes the barrier)"),
             ("-y", ns.stream_null, (0, 1), 0, "there are no CUDA streams"),
             ("-T", ns.timeout, (0, None), 0, "the lab times each iteration out itself (60 s "
              "plus 20 times its predicted time) and tears down"),
             ("-a", ns.average, (0, 3), 1, "the lab times each iteration once, from the first "
              "rank's start to the last rank's end, so every mode reports that time"),
             ("-R", ns.local_register, (0, 2), 0, "there is no GPU memory to register"),
             ("-x", ns.cta_policy, (0, 2), None, "there are no CTAs"),
             ("-V", ns.device_cta_count, (1, 127), None, "there are no device kernels"),
             ("-M", ns.memory, (0, 1), 0, "there is no GPU memory: the buffers are the agents' "
              "host memory"),
             ("-u", ns.unalign, (0, None), 0, "the agents' buffers are host arrays; misaligning "
              "them changes nothing the fabric sees"))
    for flag, text, (low, high), quiet, why in notes:
        if text is None:
            continue
        value = _whole(flag, text, low, high)
        if value != quiet:
            opts.notes.append(f"note: {flag} {value} changes nothing here: {why}")


def _output(opts: NcclOptions, ns) -> None:
    if ns.output_file is None:
        return
    path = Path(ns.output_file)
    if path.suffix.lower() != ".json" or path.name.startswith("."):
        raise NcclFlagError(f"-J {ns.output_file}: nccl-tests infers the format from the "
                            "suffix and writes only JSON: name a file ending in .json")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise NcclFlagError(f"-J {ns.output_file}: {folder} is not a folder this process can "
                            "write in")
    opts.json_path = path


def _forward(opts: NcclOptions, ns) -> None:
    """run_topology.py's command line: the fabric, fabric-lab's options as
    typed, and the nccl-tests flags it takes itself."""
    fabrics = [f for f in [ns.fabric_file, *(ns.fabric or [])] if f]
    if len(fabrics) > 1:
        raise NcclFlagError("name one fabric: as FABRIC or --fabric, once")
    out = fabrics + ["-c", opts.collective]
    for name, takes in FORWARDED[1:]:
        value = getattr(ns, name[2:].replace("-", "_"))
        if name == "--dry-run":
            opts.dry_run = bool(value)
            out += ["--check"] if value else []
        elif takes:
            out += [item for v in (value or []) for item in (name, v)]
        elif value:
            out.append(name)
    sizes = (("-b", opts.minbytes), ("-e", opts.maxbytes), ("-n", opts.iters),
             ("-w", opts.warmup))
    out += [item for flag, v in sizes if v is not None for item in (flag, str(v))]
    if opts.stepfactor is not None:
        out += ["-f", str(opts.stepfactor)]
    elif opts.stepbytes is not None:     # checked per size by the sweeps: one size at a time
        out += ["-f", "2"]
    if opts.types and len(opts.types) == 1:
        out += ["-d", opts.types[0]]
    if opts.ops and len(opts.ops) == 1 and opts.collective in REDUCING:
        out += ["-o", opts.ops[0]]
    if opts.roots and opts.roots != [-1]:
        out += ["--root", str(opts.roots[0])]
    opts.forward = out
