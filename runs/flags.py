"""The command line of run_topology.py: its flags, each value checked with
the validators and limits of a fabric's ``experiment:`` section (a flag and
a YAML key accept exactly the same values), the combinations of flags it
refuses, and a parser whose every mistake is one line, ``error: ...``,
raised as FlagError for the caller to print with exit status 2.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import List, Optional

from toolkit.errors import OneLineParser
from networks import NETWORKS, all_networks
from policies import POLICIES, all_policies, policy
from toolkit.validators import choice, integer, machines
from toolkit.errors import shown
from collectives import registry
from runs.provenance import version_text
from collectives.datatypes import OPS, TYPE_NAMES
from runs.experiment import FLAGS, SCHEMA
from traffic.engines import ENGINES
from sim.training_step import MODES, STEP_FLAGS, STEP_SCHEMA

DATAPATHS = ("auto", "kernel", "user")
SECONDS = (1, 600)          # --seconds: the iperf3 check, up to ten minutes
INCAST = (1, 256)           # --incast: senders into one server
INCAST_SECONDS = 10         # --incast's default length: TCP's sawtooth a few times over
STREAMS = (1, 128)          # --streams: iperf3's own limit on -P
COLLECTIVE_FLAGS = tuple(FLAGS) + ("compare",)
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")


class FlagError(ValueError):
    """A bad flag or combination of flags: one sentence naming the flag."""


class _Parser(OneLineParser):
    """Bad flags raise FlagError (one line, status 2) instead of argparse's
    usage-and-exit."""

    error_class = FlagError


class _Version(argparse.Action):
    """--version: the project's version and commit (runs/provenance.py),
    found only when asked for."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **{k: v for k, v in kwargs.items()
                                                           if k == "help"})

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text("run_topology.py"))
        parser.exit()


def _kept_name(text: str) -> str:
    from lab.kept.kept import check_name
    try:
        return check_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _checked(validate, parse=str, what=None):
    """An argparse type: `parse` the text, then `validate` it as the YAML's
    schema does; its message (or `what`) becomes argparse's, shortened."""
    def convert(text):
        value = parse(text)

        def fail(message):
            if what:
                message = f"{what}, got {shown(text)}"
            elif isinstance(value, str) and repr(value) in message:
                message = message.replace(repr(value), shown(value))
            raise argparse.ArgumentTypeError(message)
        return validate(value, fail)
    return convert


def _layout(text: str):
    """--parallel tp=4,pp=2,dp=2,micro_batches=4,activation=16K: a mapping
    (whole numbers as numbers) for experiment.step.parallel's check."""
    out = {}
    for item in text.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            return text                    # the check names what was expected
        out[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
    return out


def _trace(text: str):
    """--trace PATH,replicas=4,...: the mapping experiment.step.trace takes."""
    path, *items = text.split(",")
    out = {"path": path}
    for item in items:
        key, _, value = item.strip().partition("=")
        out[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
    return out


def _flap(text: str) -> list:
    """--flap LINK@S+D: the failure LINK@S+D:flap."""
    if ":" in text or "+" not in text:
        raise argparse.ArgumentTypeError(
            f"--flap takes LINK@SECONDS+DURATION such as leaf1-spine1@2+3, got {shown(text)}")
    return [text + ":flap"]


def _field(key, parse=str):
    return _checked(SCHEMA[key][0], parse)


def _whole(text):
    """An int where the text is one (at most 18 digits), else the text, for
    the validator to refuse by name."""
    return int(text) if _INTEGER.fullmatch(text.strip()) else text


def _real(text):
    try:
        return float(text) if len(text) <= 40 else text
    except ValueError:
        return text


def _pair(key):
    return _checked(SCHEMA[key][0], lambda text: text.split(","),
                    "expected two servers as SRC,DST such as h1,h4")


def _algorithms(text) -> List[str]:
    names = [a.strip() for a in text.split(",")]
    unknown = [a for a in names if a not in registry.ALGORITHM_CHOICES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"expected algorithms separated by commas, each one of "
            f"{', '.join(registry.ALGORITHM_CHOICES)}, got {shown(unknown[0] or text)}")
    return names


def parse_args(argv, doc: str, results: Path) -> argparse.Namespace:
    """The flags of `argv`; a flag not given is None (False for a switch),
    and then --datapath, --seconds, --streams and --results take their
    defaults. FlagError for a bad value or a contradictory combination."""
    doc = doc or "run_topology.py\n\n"          # python -OO strips docstrings
    p = _Parser(prog="run_topology.py", description=doc.split("\n\n")[0],
                epilog=doc.split("\n\n", 1)[1],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fabric", nargs="?", type=Path,
                   help="fabric YAML (default: the embedded topologies/default.yaml)")
    p.add_argument("--check", action="store_true",
                   help="validate the YAML, the experiment and every other flag as a run "
                        "would, and print what would be built; build nothing")
    p.add_argument("--policy", choices=POLICIES, type=_checked(choice(*POLICIES)),
                   help="override routing.policy: " + "; ".join(
                       p.summary for p in all_policies().values()) + " (docs/routing.md)")
    p.add_argument("--network", choices=NETWORKS, type=_checked(choice(*NETWORKS)),
                   help="override the fabric's network technology (network.technology, its "
                        "options back to the technology's, routing its own unless --policy): "
                        + "; ".join(t.summary for t in all_networks().values())
                        + " (docs/networks.md)")
    p.add_argument("--datapath", choices=DATAPATHS, type=_checked(choice(*DATAPATHS)),
                   help="Open vSwitch datapath: the kernel module when present (auto, the "
                        "default), else the userspace one")
    _collective_flags(p.add_argument_group(
        "collectives (override the YAML's experiment section)"))
    _step_flags(p.add_argument_group(
        "a training step (override experiment.step; docs/training.md)"))
    _run_flags(p)
    args = p.parse_args(argv)
    typed = {k: getattr(args, f"step_{k}") for k in STEP_FLAGS}
    typed = {k: v for k, v in typed.items() if v is not None}
    args.step = typed if (args.step or typed) else None
    problem = refusal(args)
    if problem:
        raise FlagError(problem)
    args.datapath = args.datapath or "auto"
    args.seconds = args.seconds or (INCAST_SECONDS if args.incast else 3)
    args.streams = args.streams or 4
    args.results = results if args.results is None else args.results
    args.compare = args.compare or []
    if args.fail:                       # each --fail gave a list of one
        args.fail = [item for given in args.fail for item in given]
    return args


def _algorithm_help() -> str:
    """-a's help, from the registry: each collective's algorithms, those laid
    out by the GPUs of each server marked, and auto (the default)."""
    def names(algorithms):
        return ", ".join(a + ("*" if a in registry.BY_SERVER else "") for a in algorithms)
    parts = [f"{c}: {names(a)}" for c, a in registry.ALGORITHMS.items()]
    return ("; ".join(parts) + " (* laid out by the GPUs of each server when the ranks are "
            "whole servers: running.md); or auto (the default): per size, what NCCL would run "
            "(Ring, Tree, or PAT on one-GPU servers) as the lab's schedules priced by its own "
            "costs, or with --engine sim on a server.model, NCCL's model itself")


def _nccl_flags(g) -> None:
    """NCCL_ALGO / NCCL_PROTO for -a auto."""
    g.add_argument("--nccl-algo", metavar="LIST", type=_field("nccl_algo"),
                   help="with -a auto, the algorithms NCCL may choose, as NCCL_ALGO takes them "
                        "(ring,tree; ^nvls; allreduce:tree)")
    g.add_argument("--nccl-proto", metavar="LIST", type=_field("nccl_proto"),
                   help="with -a auto on named servers (server.model) and --engine sim, the "
                        "protocols, as NCCL_PROTO takes them (simple; ^ll128)")


def _collective_flags(g) -> None:
    g.add_argument("-c", "--collective", choices=registry.COLLECTIVES, type=_field("collective"),
                   help="the NCCL collective to replay (default allreduce)")
    g.add_argument("-a", "--algorithm", choices=registry.ALGORITHM_CHOICES,
                   type=_field("algorithm"),
                   help=_algorithm_help())
    g.add_argument("--compare", metavar="ALG[,ALG]", type=_algorithms,
                   help="then replay these algorithms of the same collective in the same lab, "
                        "each with its tables; busbw.png draws every one")
    g.add_argument("--engine", choices=ENGINES.names(), type=_field("engine"),
                   help="; ".join(f"{name}: {engine.help}" for name, engine in ENGINES.items()))
    g.add_argument("-b", "--minbytes", type=_field("minbytes"),
                   help="smallest size, 4 to 1G (default 32K)")
    g.add_argument("-e", "--maxbytes", type=_field("maxbytes"),
                   help="largest size, 4 to 1G (default 2M)")
    g.add_argument("-f", "--stepfactor", type=_field("stepfactor", _real),
                   help="size multiplier, above 1 (default 4); at most 64 sizes")
    g.add_argument("-n", "--iters", type=_field("iters", _whole),
                   help="timed iterations per size, 1 to 1000 (default 5)")
    g.add_argument("-w", "--warmup", type=_field("warmup", _whole),
                   help="untimed iterations first, 0 to 100 (default 1)")
    g.add_argument("--root", type=_field("root", _whole),
                   help="root rank of Broadcast and Reduce (default 0)")
    g.add_argument("-d", "--datatype", choices=TYPE_NAMES, type=_field("datatype"),
                   help="data type, as nccl-tests' -d: float (float32, default), half "
                        "(float16), bfloat16, int8 or int32")
    g.add_argument("-o", "--op", choices=OPS, type=_field("op"),
                   help="reduction of allreduce, reducescatter and reduce, as nccl-tests' -o: "
                        "sum (default), prod, min, max or avg")
    g.add_argument("--channels", type=_field("channels", _whole),
                   help="TCP connections (NCCL channels, RoCE QPs) per peer, 1 to 16: the "
                        "flow entropy ECMP spreads (default 1)")
    g.add_argument("--scale-up", choices=("packets", "memory"), type=_field("scale_up"),
                   help="how the rank agents carry traffic between GPUs of one server: "
                        "packets over its NVLink-class links and switch (default), or memory: "
                        "handed over inside the server's agent process, paced at the NVLink "
                        "rate, as NCCL copies peer to peer (cheaper for the host: more GPUs "
                        "or higher rates)")
    g.add_argument("--piece-bytes", type=_field("piece_bytes"),
                   help="messages are cut into pieces of this size, 64 to 64M, and forwarded "
                        "piece by piece (default 64K)")
    g.add_argument("--probe", type=_pair("probe"), metavar="SRC,DST",
                   help="servers between which latency is probed (default first and last rank)")
    g.add_argument("--cross", type=_pair("cross"), metavar="SRC,DST",
                   help="run an iperf3 TCP flow between two servers during the whole sweep "
                        "(background traffic the collective must share the fabric with)")
    _nccl_flags(g)
    _failure_flags(g)
    _other_traffic_flags(g)


def _other_traffic_flags(g) -> None:
    """Instead of the sweep or after it: nothing, the iperf3 check, an incast."""
    g.add_argument("--no-traffic", action="store_true",
                   help="only build, check reachability and tear down")
    g.add_argument("--iperf-check", action="store_true",
                   help="also run the iperf3 check across the leaves (per-uplink bytes)")
    g.add_argument("--incast", type=_checked(integer(*INCAST), _whole), metavar="SENDERS",
                   help="instead of a size sweep, an incast with real TCP: SENDERS servers "
                        "send to the last one at once, iperf3 Reno flows for --seconds, "
                        "beside the packet engine's prediction; with --engine sim, the packet "
                        "engine alone under the fabric's technology (docs/running.md)")
    g.add_argument("--seconds", type=_checked(integer(*SECONDS), _whole),
                   help="length of the iperf3 check or the incast, whole seconds, 1 to 600 "
                        "(default 3, the incast 10)")
    g.add_argument("--streams", type=_checked(integer(*STREAMS), _whole),
                   help="parallel TCP flows per server pair in the iperf3 check, 1 to 128 "
                        "(default 4)")


def _step_flags(g) -> None:
    def field(key, parse=str, what=None):
        return _checked(STEP_SCHEMA[key][0], parse, what)
    g.add_argument("--step", action="store_true",
                   help="replay a training step (compute, gradient buckets and their "
                        "collectives) instead of a size sweep; experiment.step, or defaults")
    g.add_argument("--layers", dest="step_layers", type=field("layers", _whole),
                   help="layers of the model, 1 to 1000 (default 8)")
    g.add_argument("--params", dest="step_params", type=field("params"),
                   help="the model's parameters, such as 1.3e9, 70B or 512k (default 524288)")
    g.add_argument("--bucket", dest="step_bucket", type=field("bucket"),
                   help="gradient bucket size, 4 to 1G (default 256K; PyTorch's is 25M)")
    g.add_argument("--overlap", dest="step_overlap", metavar="on|off",
                   type=field("overlap", lambda t: {"on": True, "off": False}.get(t, t),
                              "expected on or off"),
                   help="launch each bucket as the backward pass produces it (on, default), "
                        "or all after it (off)")
    g.add_argument("--step-mode", dest="step_mode", choices=MODES, type=field("mode"),
                   help="allreduce per bucket (data parallel, default), or sharded: "
                        "AllGather before the forward pass, ReduceScatter after the backward")
    g.add_argument("--in-flight", dest="step_in_flight", type=field("in_flight", _whole),
                   help="collectives running at once, 1 to 8 (default 1: one NCCL stream)")
    g.add_argument("--parallel", dest="step_parallel", metavar="tp=T,pp=P,dp=D[,...]",
                   type=field("parallel", _layout),
                   help="a hybrid step: tensor parallel T inside servers, P pipeline stages "
                        "(1F1B), data parallel D; also micro_batches=M, activation=BYTES "
                        "(docs/training.md)")
    g.add_argument("--trace", dest="step_trace", metavar="PATH[,replicas=R,...]",
                   type=field("trace", _trace),
                   help="replay a recorded job's iteration (PyTorch profiler or execution "
                        "traces, one file a rank, in the folder PATH); also iteration=N, "
                        "replicas=R, ranks_per_server=K, rank_map=FILE (docs/traces.md)")


def _failure_flags(g) -> None:
    g.add_argument("--fail", type=_checked(SCHEMA["fail"][0], lambda text: [text]),
                   action="append", metavar="LINK@S[+D][:KIND]",
                   help="take a link between two switches (leaf1-spine1, or random) down S "
                        "seconds into the sweep, for D seconds (default: to the end); "
                        "':silent' drops its frames with the carrier up instead (only BFD, "
                        "routing.bfd_ms, sees it); repeatable; each event is reported")
    g.add_argument("--flap", dest="fail", type=_checked(SCHEMA["fail"][0], _flap),
                   action="append", metavar="LINK@S+D",
                   help="flap a link between two switches from S seconds for D seconds: "
                        "down 0.25 s, up 0.25 s, over and over (--fail LINK@S+D:flap); "
                        "repeatable")


def _run_flags(p) -> None:
    p.add_argument("--calibrate", action="store_true",
                   help="measure which link rates this host can emulate for this fabric "
                        "(ring AllReduce at rising rates) and recommend one")
    p.add_argument("--cli", action="store_true",
                   help="open the Mininet CLI once the checks are done, in place of the "
                        "experiment; tear down when it exits")
    p.add_argument("--results", type=Path,
                   help="folder for this run's folder: summary.json, controller log "
                        "(default: results/ in the repository)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of text; "
                   "with --check, what it found")
    p.add_argument("--version", action=_Version, help="print the version and commit, then exit")
    p.add_argument("--csv", type=Path, help="also write one CSV row per collective size here")
    p.add_argument("--cleanup", action="store_true",
                   help="remove what labs killed without teardown (SIGKILL) left behind, "
                        "from their records in /run/fabric-lab; touches nothing else")
    p.add_argument("--cluster", metavar="HOST,HOST",
                   type=_checked(machines, lambda text: text.split(",")),
                   help="spread the fabric over these machines (ssh destinations; overrides "
                        "the YAML's cluster.machines; docs/cluster.md); with --check, print "
                        "where each switch and server would run")
    p.add_argument("-v", "--verbose", action="store_true", help="Mininet and controller detail")
    p.add_argument("--up", action="store_true",
                   help="build the lab and keep it up (scripts/lab up): a keeper process owns "
                        "it until `scripts/lab down`; docs/running.md")
    p.add_argument("--lab", action="store_true",
                   help="run this experiment on the lab that is up (scripts/lab up), in its "
                        "own results folder; Ctrl-C stops the experiment, not the lab")
    p.add_argument("--name", type=_kept_name,
                   help="with --up or --lab: the kept lab's name, so that several can be up "
                        "at once (scripts/lab inspect/exec/down --name NAME); default 'lab'")
    p.add_argument("--keeper", type=Path, help=argparse.SUPPRESS)   # what --up starts


# --- combinations -----------------------------------------------------------------------

NAMES = {**FLAGS, "compare": "--compare", "fabric": "the fabric file", "check": "--check",
         "policy": "--policy", "network": "--network", "datapath": "--datapath",
         "no_traffic": "--no-traffic",
         "iperf_check": "--iperf-check", "seconds": "--seconds", "streams": "--streams",
         "incast": "--incast",
         "calibrate": "--calibrate", "cli": "--cli", "results": "--results", "json": "--json",
         "csv": "--csv", "cleanup": "--cleanup", "verbose": "-v/--verbose",
         "cluster": "--cluster", "step": "--step", "up": "--up", "lab": "--lab", "name": "--name"}
CALIBRATE_IGNORES = COLLECTIVE_FLAGS + ("no_traffic", "iperf_check", "incast", "seconds", "streams",
                                        "csv", "policy")
NO_TRAFFIC_IGNORES = COLLECTIVE_FLAGS + ("iperf_check", "incast", "seconds", "streams", "csv")
INCAST_IGNORES = COLLECTIVE_FLAGS + ("step", "iperf_check", "streams", "csv")


def refusal(args) -> Optional[str]:
    """One sentence for flags that contradict each other or that the mode
    asked for would ignore; None when they go together."""
    given = [key for key in NAMES if getattr(args, key, None) not in (None, False)]
    if args.cleanup and len(given) > 1:
        other = next(key for key in given if key != "cleanup")
        return (f"--cleanup takes no other option: it only removes what killed labs left "
                f"(/run/fabric-lab); leave out {NAMES[other]}")
    if args.check and (args.cli or args.calibrate):
        mode = "--cli opens a network" if args.cli else "--calibrate builds labs"
        return f"{mode} and --check builds none: use one of them"
    if args.calibrate:
        if args.cli:
            return ("--cli opens a prompt on one lab and --calibrate builds a lab per rate: "
                    "use one of them")
        ignored = [key for key in given if key in CALIBRATE_IGNORES]
        if ignored:
            return (f"--calibrate replays its own ring AllReduce with ecmp routing, so "
                    f"{NAMES[ignored[0]]} would do nothing: leave it out")
    if args.cli and args.json:
        return ("--json prints the summary for a program to read and --cli opens a prompt on "
                "the same output: use one of them")
    if args.step is not None and args.compare:
        return ("--compare replays a size sweep per algorithm and --step a training step: "
                "use one of them")
    if args.no_traffic:
        ignored = [key for key in given if key in NO_TRAFFIC_IGNORES]
        if ignored:
            return (f"--no-traffic replays nothing, so {NAMES[ignored[0]]} would do nothing: "
                    "use one of them")
    if getattr(args, "engine", None) == "sim":
        builds = [key for key in ("cli", "iperf_check", "no_traffic", "calibrate", "datapath",
                                  "cluster")
                  if key in given]
        if builds:
            return (f"--engine sim simulates and builds no network, so {NAMES[builds[0]]} has "
                    "nothing to work on: leave out one of them")
        if args.policy and not policy(args.policy).simulated:
            return ("--engine sim routes as the controller does; "
                    + policy(args.policy).why_not_simulated)
    return _checks_refusal(args, given)


def _checks_refusal(args, given) -> Optional[str]:
    """The iperf3 check's and the incast's flags: one sentence, or None."""
    if args.incast:
        # an engine that needs no lab runs the incast in the packet engine
        engine = getattr(args, "engine", None)
        simulated = engine is not None and not ENGINES[engine].needs_lab
        ignored = [key for key in given if key in INCAST_IGNORES
                   and not (key == "engine" and simulated)]
        if ignored:
            return (f"--incast replays an incast instead of a size sweep, so "
                    f"{NAMES[ignored[0]]} would do nothing: use one of them")
    if "seconds" in given and not (args.iperf_check or args.incast):
        return ("--seconds sets the iperf3 check or the incast, which only --iperf-check or "
                "--incast runs: add one of them or leave out --seconds")
    if "streams" in given and not args.iperf_check:
        return ("--streams sets the iperf3 check, which only --iperf-check runs: add "
                "--iperf-check or leave out --streams")
    return None
