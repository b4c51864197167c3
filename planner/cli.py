"""The planner's command line: ``python -m planner``. Reads the flags (and a
fabric YAML or a results folder when given), plans, prints the report or its
JSON. Every refusal is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path

from collectives.registry import FLAT_RING, SERVER_RINGS
from networks import DEFAULT as DEFAULT_NETWORK, NETWORKS, network
from planner import inputs as check
from planner.calibration import calibrate_from_run, fabric_predictions
from planner.compute import TrainingRun
from planner.costmodel import NVLINK_GBPS, Links, predict_allreduce
from planner.designs import plan
from planner.inputs import PlanError, parse_bytes
from planner.report import format_fabric, format_plan
from planner import layouts, steptime
from planner.simulate import format_simulation, simulate_plan
from planner.nccl_plan import (DEFAULT_SERVER, format_nccl, format_side_by_side,
                               format_steps_side_by_side, nccl_plan, networks_side_by_side,
                               unhindered)
from topologies.hardware import SERVERS
from topologies.limits import EMULATED_ENDPOINTS
from toolkit.errors import OneLineParser
from report.progress import Progress
from toolkit.errors import shown
from toolkit.units import parse_count, parse_rate_mbit, parse_ratio


PATH_SHOWN = 64             # characters of a path a message quotes
HOP_LATENCY_US = 0.0        # --simulate: per link crossed, beyond the technology's switches
MAX_SIZES, MAX_SEEDS = 16, 64
MAX_SIMULATED_GPUS = 262_144      # about 40 s and 0.5 GB a size and draw on 2 cores
MAX_SIMULATED_WORK = 4_000_000    # GPUs x sizes x (draws + 1): about 10 minutes
SIMULATE_ONLY = ("hop_latency_us", "sizes", "seeds")
TEXTBOOK_MAX_GPUS = 16_384        # the lab's schedules simulated beside NCCL's up to this
FROM_FABRIC = {"gpus_per_server": "its GPUs per server", "nics_per_server": "its NICs per server",
               "link_gbps": "its NIC link rate", "intra_gbps": "its NVLink-class rate"}
DEFAULTS = {"radix": 64, "gpus_per_server": 8, "link_gbps": 400.0, "oversubscription": 1.0,
            "gpu_pflops": 2.0, "flops": 1e24, "utilisation": 1.0, "gradient_bytes": "1G",
            "alpha_us": 5.0, "intra_gbps": NVLINK_GBPS}     # NICs: one per GPU


class _Parser(OneLineParser):
    """Bad flags raise PlanError (one line, status 2) instead of argparse's
    usage-and-exit."""

    error_class = PlanError


def _cli_number(kind):
    """An argparse type: a count as toolkit/units.py reads them (200000,
    200,000, 2e5, 200k, 70B), or a rate in Gbit/s (400, 400G, 50GB/s), or a
    ratio (2:1)."""
    read = {"a whole number": lambda t: parse_count(t),
            "a number": lambda t: _float(parse_count(t, whole=False)),
            "a rate": lambda t: _gbps(parse_rate_mbit(t, plain_mbit=1000.0)),
            "a ratio": parse_ratio}[kind]

    def convert(text):
        value = read(text)
        if value is None:
            example = {"a whole number": " such as 200000, 200k or 2e5",
                       "a number": " such as 1e24 or 70B", "a rate": " such as 400 or 400G",
                       "a ratio": " such as 2 or 2:1"}[kind]
            raise argparse.ArgumentTypeError(f"expected {kind}{example}, got {shown(text)}")
        return value
    return convert


def _float(value):
    """A float, None for none or beyond a float's range (1e400)."""
    try:
        return None if value is None else float(value)
    except OverflowError:
        return None


def _gbps(mbit):
    return None if mbit is None else mbit / 1000.0


def _parser():
    whole, number = _cli_number("a whole number"), _cli_number("a number")
    rate, ratio = _cli_number("a rate"), _cli_number("a ratio")
    p = _Parser(prog="python -m planner",
                description="Switches, ports, cables, training time and AllReduce time for "
                            "a GPU cluster under each network design (closed-form, no network built).")
    p.add_argument("--gpus", type=whole, help="GPUs in the cluster (2 to 10,000,000); "
                   "with --fabric or --results, the fabric's own count unless given")
    p.add_argument("--fabric", help="a fabric YAML: plan its GPU count and servers, and predict "
                   "AllReduce on it at its configured rates (its GPUs and NICs per server and "
                   "link rates take the place of --gpus-per-server, --nics-per-server, "
                   "--link-gbps and --intra-gbps, which it refuses)")
    p.add_argument("--results", help="a results folder of run_topology.py: calibrate the "
                   "AllReduce model on its runs (its fabric, unless --fabric is given)")
    p.add_argument("--radix", type=whole, help="ports per switch, even, 4 to 1,024 (default 64)")
    p.add_argument("--gpus-per-server", type=whole,
                   help="scale-up domain size, 1 to 72 (default 8)")
    p.add_argument("--nics-per-server", type=whole,
                   help="scale-out NICs per server, the network's endpoints, 1 to "
                        "--gpus-per-server (default one per GPU)")
    p.add_argument("--link-gbps", type=rate,
                   help="link rate, Gbit/s (400) or with its unit (400G, 50GB/s), 0.00001 to "
                        "1,000,000 (default 400)")
    p.add_argument("--oversubscription", type=ratio,
                   help="leaf downlink:uplink ratio, 1 or 1:1 = nonblocking, up to 1,023 "
                        "(default 1)")
    p.add_argument("--gpu-pflops", type=number,
                   help="PFLOP/s per GPU, 0.000001 to 10,000 (default 2)")
    p.add_argument("--flops", type=number, help="FLOPs of the training run, 1 to 1e30 "
                   "(default 1e24)")
    p.add_argument("--utilisation", type=number,
                   help="fraction of peak FLOP/s achieved, above 0 and at most 1 (default 1)")
    p.add_argument("--gradient-bytes",
                   help="AllReduce size: 1048576, 512M, 1G (powers of 1024; default 1G)")
    p.add_argument("--alpha-us", type=number,
                   help="per-step latency, us, 0 to 1,000,000 (default 5)")
    p.add_argument("--intra-gbps", type=rate,
                   help=f"in-server (NVLink) rate, Gbit/s (default {NVLINK_GBPS:,.0f})")
    p.add_argument("--nvlink-gbytes", type=number,
                   help="in-server (NVLink) rate in GB/s per GPU and direction, e.g. 450: "
                        "--intra-gbps in the unit NVIDIA quotes")
    p.add_argument("--simulate", action="store_true",
                   help="also simulate ring and hierarchical AllReduce on the Clos designs "
                        "(each wiring, ECMP hashed per switch and flow): nccl-tests-style time, "
                        "algbw and busbw (docs/planner.md)")
    p.add_argument("--hop-latency-us", type=number,
                   help=f"with --simulate: latency per link crossed beyond the network "
                        f"technology's switches and transport, us, 0 to "
                        f"{check.MAX_ALPHA_US:,.0f} (default {HOP_LATENCY_US:g})")
    p.add_argument("--sizes", help="with --simulate: AllReduce sizes, comma-separated "
                                   f"(at most {MAX_SIZES}; default --gradient-bytes)")
    p.add_argument("--seeds", type=whole, help=f"with --simulate: ECMP draws, 1 to {MAX_SEEDS} "
                                               "(the median is shown, with the range; default 1)")
    _add_hardware_flags(p)
    steptime.add_flags(p, whole, number)
    layouts.add_flags(p, number)
    p.add_argument("--json", action="store_true", help="print JSON instead of the report")
    return p


def _networks(text) -> list:
    """--network's technologies: one, several (comma-separated) or all."""
    if text is None:
        return [DEFAULT_NETWORK]
    names = list(NETWORKS) if text.strip() == "all" else [t.strip() for t in text.split(",")]
    for name in names:
        if name not in NETWORKS:
            raise PlanError(f"--network: expected one or more of {', '.join(NETWORKS)} "
                            f"(comma-separated) or all, got {shown(name)}")
    return names


def _add_hardware_flags(p) -> None:
    """The servers as sold and the network between them, for NCCL's model."""
    p.add_argument("--server", help=f"the servers as sold, for NCCL's model "
                                    f"(GPU generation, NVLink, PCIe, host CPU), with the plan's "
                                    f"GPUs, NICs and link rate: {', '.join(SERVERS)} "
                                    f"(default {DEFAULT_SERVER})")
    p.add_argument("--network", help="the scale-out network technology (docs/networks.md): "
                                     f"{', '.join(NETWORKS)}; its routing, switch latency and "
                                     "transport price NCCL's collectives (default "
                                     f"{DEFAULT_NETWORK}, or --fabric's); with --simulate, "
                                     "several (comma-separated) or all side by side")


def main(argv=None) -> int:
    """The command; a reader that stops reading (`| head`) stops it quietly."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        null = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(null, stream.fileno())
        os.close(null)
        return 141                  # as a shell reports a command SIGPIPE stopped


def _main(argv) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:      # --help
        return exc.code if isinstance(exc.code, int) else 0
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        _check_flags(args)
        fabric, calibration, source = _fabric_inputs(args)
        result = _plan(args, fabric)
        layouts.check_named(args, result)
        if args.simulate:
            sizes = steptime.bucket_sizes(args, result) if args.params else _sizes(args)
            _check_simulation_size(result, len(sizes), args.seeds, bool(args.params))
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = format_plan(result)
    if args.simulate:
        text += _simulate(args, result, sizes)
    if args.params and args.layouts:
        text += "\n\n" + layouts.PURE_DP_NOTE
    elif args.params:
        result["training_step"] = steptime.training_with_comm(args, result, result["nccl"],
                                                              "nccl")
        text += "\n\n" + steptime.format_training(result["training_step"], result["inputs"])
    if args.layouts:
        result["layouts"] = layouts.layouts(args, result)
        text += "\n\n" + layouts.format_layouts(result["layouts"], result["inputs"])
    if fabric is not None and len(fabric.endpoints) > EMULATED_ENDPOINTS:
        text += (f"\n\n# the lab's own schedules are predicted on fabrics a lab can build (up to "
                 f"{EMULATED_ENDPOINTS} endpoints); {fabric.name} has "
                 f"{len(fabric.endpoints):,}: run_topology.py {args.fabric} --engine sim "
                 "prices them")
    elif fabric is not None:
        sizes = _fabric_sizes(fabric, calibration, args)
        algorithms = [FLAT_RING] + ([SERVER_RINGS] if fabric.gpus_per_server > 1 else [])
        rows = fabric_predictions(fabric, sizes, algorithms, calibration,
                                  alpha_s=args.alpha_us * 1e-6)
        result["fabric"] = {"name": fabric.name, "calibration": calibration, "predictions": rows}
        text += "\n\n" + format_fabric(fabric, rows, calibration, source)
    print(json.dumps(_jsonable(result), indent=2) if args.json else text)
    return 0


def _simulate(args, result, sizes) -> str:
    """What NCCL would run on the plan's designs, and (up to TEXTBOOK_MAX_GPUS)
    the lab's own schedules simulated beside it; progress on a terminal."""
    progress = Progress()                  # on a terminal only (report/progress.py)
    techs = args.techs
    tech = techs[0]
    result["nccl"] = nccl_plan(result, sizes, args.seeds, args.server, progress, tech)
    text = "\n\n" + format_nccl(result["nccl"], result["inputs"])
    if len(techs) > 1:
        side = result["networks"] = networks_side_by_side(result, sizes, techs, args.seeds,
                                                          args.server, progress)
        text += "\n\n" + format_side_by_side(side)
        if args.params and not args.layouts:
            steps = {n: steptime.training_with_comm(args, result, p, "nccl")
                     for n, p in side["plans"].items()}
            side["training_steps"] = steps
            text += "\n" + format_steps_side_by_side(side, steps)
    gpus = result["nccl"]["gpus"]
    if gpus > TEXTBOOK_MAX_GPUS:
        progress("done")
        return text + (f"\n\n# the lab's ring and hierarchical schedules are simulated up to "
                       f"{TEXTBOOK_MAX_GPUS:,} GPUs; NCCL runs neither at {gpus:,}")
    progress("the lab's ring and hierarchical schedules")
    result["simulated"] = simulate_plan(result, sizes, args.hop_latency_us * 1e-6,
                                        args.intra_gbps, args.seeds, tech)
    progress("done")
    return text + "\n\n" + format_simulation(result["simulated"], result["inputs"])


def _check_flags(args) -> None:
    """Every flag in its range, each mistake naming the flag; the values a
    fabric sets are refused as flags beside --fabric or --results."""
    if args.fabric or args.results:
        given = [key for key in FROM_FABRIC if getattr(args, key) is not None]
        if given:
            flag, by = "--" + given[0].replace("_", "-"), "--fabric" if args.fabric else "--results"
            raise PlanError(f"{flag}: {by} sets {FROM_FABRIC[given[0]]} from the fabric; "
                            f"leave out {flag}")
    args.techs = [network(name) for name in _networks(args.network)]
    layouts.check_flags(args)
    steptime.check_flags(args)
    _check_simulate_flags(args)
    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, default)
    if args.nics_per_server is None:
        args.nics_per_server = args.gpus_per_server
    if args.gpus is not None:
        check.whole("--gpus", args.gpus, check.MIN_GPUS, check.MAX_GPUS)
    check.radix("--radix", args.radix)
    check.whole("--gpus-per-server", args.gpus_per_server, 1, check.MAX_GPUS_PER_SERVER)
    check.whole("--nics-per-server", args.nics_per_server, 1, args.gpus_per_server,
                f"a whole number from 1 to --gpus-per-server ({args.gpus_per_server})")
    for flag, key in (("--link-gbps", "link_gbps"), ("--intra-gbps", "intra_gbps")):
        check.between(flag, getattr(args, key), check.MIN_GBPS, check.MAX_GBPS)
    check.between("--oversubscription", args.oversubscription, 1, check.MAX_OVERSUBSCRIPTION)
    check.between("--gpu-pflops", args.gpu_pflops, check.MIN_PFLOPS, check.MAX_PFLOPS)
    check.between("--flops", args.flops, 1, check.MAX_FLOPS)
    check.fraction("--utilisation", args.utilisation)
    check.between("--alpha-us", args.alpha_us, 0, check.MAX_ALPHA_US)
    parse_bytes(args.gradient_bytes, "--gradient-bytes")


def _check_simulate_flags(args) -> None:
    """--simulate's own flags, and NVLink in GB/s as the one in-server rate."""
    given = [k for k in SIMULATE_ONLY if getattr(args, k) is not None]
    if given and not args.simulate:
        raise PlanError(f"--{given[0].replace('_', '-')} goes with --simulate")
    if args.nvlink_gbytes is not None:
        if args.intra_gbps is not None:
            raise PlanError("--nvlink-gbytes and --intra-gbps both give the in-server rate; "
                            "give one")
        if args.fabric or args.results:
            raise PlanError(f"--nvlink-gbytes: {'--fabric' if args.fabric else '--results'} "
                            "sets its NVLink-class rate from the fabric; leave out --nvlink-gbytes")
        check.between("--nvlink-gbytes", args.nvlink_gbytes, check.MIN_GBPS / 8,
                      check.MAX_GBPS / 8)
        args.intra_gbps = args.nvlink_gbytes * 8
    args.hop_latency_us = HOP_LATENCY_US if args.hop_latency_us is None else args.hop_latency_us
    check.between("--hop-latency-us", args.hop_latency_us, 0, check.MAX_ALPHA_US)
    args.seeds = 1 if args.seeds is None else args.seeds
    args.server = DEFAULT_SERVER if args.server is None else args.server
    if args.server not in SERVERS:
        raise PlanError(f"--server: expected one of {', '.join(SERVERS)}, got "
                        f"{shown(args.server)}")
    check.whole("--seeds", args.seeds, 1, MAX_SEEDS)
    if args.sizes is not None:
        _sizes(args)


def _check_simulation_size(result, sizes: int, seeds: int, params: bool = False) -> None:
    gpus = result["servers"] * result["inputs"]["gpus_per_server"]
    flag = "--params" if params else "--simulate"
    if gpus > MAX_SIMULATED_GPUS:
        raise PlanError(f"{flag}: {gpus:,} GPUs are more than the {MAX_SIMULATED_GPUS:,} "
                        f"it simulates; plan without {flag}, or give fewer --gpus")
    if gpus * sizes * (seeds + 1) > MAX_SIMULATED_WORK:
        fewer = "--seeds" if params else "--sizes or --seeds"
        raise PlanError(f"{flag}: {gpus:,} GPUs x {sizes} size(s) x {seeds} draw(s) would "
                        f"take over ten minutes; give fewer {fewer}")


def _sizes(args) -> list:
    """--sizes as byte counts (--gradient-bytes when not given)."""
    if args.sizes is None:
        return [parse_bytes(args.gradient_bytes, "--gradient-bytes")]
    parts = args.sizes.split(",") if len(args.sizes) <= 400 else []
    if not 1 <= len(parts) <= MAX_SIZES:
        raise PlanError(f"--sizes: expected 1 to {MAX_SIZES} sizes separated by commas, "
                        f"got {shown(args.sizes)}")
    return sorted({parse_bytes(part.strip(), "--sizes") for part in parts})


def _plan(args, fabric) -> dict:
    """The plan of the flags (a fabric's GPU count when --gpus is not given),
    with the AllReduce prediction."""
    if args.gpus is None:
        if fabric is None:
            raise PlanError("--gpus is required (or a --fabric or --results to take it from)")
        args.gpus = len(fabric.endpoints)
        if args.gpus < check.MIN_GPUS:
            raise PlanError(f"{'--fabric' if args.fabric else '--results'}: {fabric.name} has "
                            f"{args.gpus} GPU, and a plan needs at least {check.MIN_GPUS}: "
                            "give --gpus")
    training = TrainingRun(total_flops=args.flops, gpu_flops=args.gpu_pflops * 1e15,
                           utilisation=args.utilisation)
    result = plan(args.gpus, args.radix, args.gpus_per_server, args.nics_per_server,
                  args.link_gbps, args.oversubscription, training=training)
    result["allreduce"] = predict_allreduce(result, parse_bytes(args.gradient_bytes), Links(
        alpha_s=args.alpha_us * 1e-6, intra_gbps=args.intra_gbps))
    if fabric is not None and fabric.gpus_per_server > 1:
        result["in_server_gbps"] = args.intra_gbps      # the fabric's own, for NCCL's floor
    result["allreduce"]["nccl"] = unhindered(result, parse_bytes(args.gradient_bytes),
                                             args.server, args.techs[0])
    return result


def _jsonable(result):
    out = dict(result)
    out["designs"] = [d.to_dict() for d in result["designs"]]
    return out


def _fabric_inputs(args):
    """The fabric (from --fabric, else the results folder's own fabric.json),
    the calibration from --results, and its source. The fabric also sets the
    servers' GPUs and NICs and the link rates of the plan."""
    from topologies.fabric import FabricError, load_fabric
    from runs.experiment import experiment_section
    fabric = calibration = None
    source = ""
    try:
        if args.fabric:
            fabric = load_fabric(args.fabric, emulate=False)     # the model's limits
            experiment_section(fabric)     # its experiment: keys too, as the loader always did
        if args.results:
            folder = Path(args.results)
            fabric, calibration = _results_calibration(folder, fabric)
            source = str(folder)
    except FabricError as exc:
        raise PlanError(str(exc)) from None
    if fabric is not None:
        # the file's technology as the file sets it (its options and routing policy)
        mine = fabric.network.configured(fabric.network_settings, fabric.policy)
        args.techs = ([mine if t.name == mine.name else t for t in args.techs] if args.network
                      else [mine])
        args.gpus_per_server = fabric.gpus_per_server
        args.nics_per_server = fabric.nics_per_server
        args.link_gbps = fabric.nic_rate_mbit / 1e3
        intra = fabric.link_classes.get("intra_node")
        if intra:
            args.intra_gbps = intra.rate_mbit / 1e3
    return fabric, calibration, source


def _regular_text(path: Path, limit: int = 1 << 30) -> str:
    """A results file's text: a regular file (a FIFO would block, a device
    never end) of at most `limit` bytes."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        raise ValueError(f"{path.name} is not a regular file of at most {limit >> 20} MB")
    return path.read_text()


def _results_calibration(folder: Path, fabric):
    """The fabric (`fabric`, else the one the run built) and the calibration
    from a results folder of run_topology.py."""
    from topologies.fabric import parse_fabric
    from runs.experiment import experiment_section
    where = f"--results {shown(str(folder), PATH_SHOWN)}"
    try:
        summary = json.loads(_regular_text(folder / "summary.json"))
        runs = (summary.get("collectives") or {}).get("runs") or []
        if fabric is None:          # the fabric the run built, checked as a YAML is
            fabric = parse_fabric(_regular_text(folder / "fabric.json"),
                                  str(folder / "fabric.json"), emulate=False)
            experiment_section(fabric)
        other = {r.get("ranks") for r in runs} - {len(fabric.endpoints), None}
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        why = (f"{exc.strerror}: {Path(exc.filename or '').name}" if isinstance(exc, OSError)
               and exc.strerror else f"{type(exc).__name__}: {str(exc)[:80]}")
        raise PlanError(f"{where}: expected a results folder of run_topology.py ({why})") from None
    if other:
        raise PlanError(f"{where}: its runs had {shown(other.pop())} ranks and "
                        f"{fabric.name} has {len(fabric.endpoints)}: not the same fabric")
    try:
        calibration = calibrate_from_run(fabric, runs)
    except PlanError as exc:
        raise PlanError(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlanError(f"{where}: a run in summary.json cannot be modelled "
                        f"({type(exc).__name__}: {str(exc)[:80]})") from None
    return fabric, calibration


def _fabric_sizes(fabric, calibration, args):
    """The sizes to predict: the calibration run's, else --gradient-bytes."""
    if calibration:
        return sorted({p["size_bytes"] for p in calibration["points"]})
    return [parse_bytes(args.gradient_bytes)]
