"""The planner's command line: ``python -m planner``. Reads the flags (and a
fabric YAML or a results folder when given), plans, prints the report or its
JSON. Every refusal is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from planner import inputs as check
from planner.calibration import calibrate_from_run, fabric_predictions
from planner.costmodel import NVLINK_GBPS, predict_allreduce
from planner.designs import plan
from planner.inputs import PlanError, parse_bytes
from planner.report import format_fabric, format_plan


class _Parser(argparse.ArgumentParser):
    """Bad flags raise PlanError (one line, status 2) instead of argparse's
    usage-and-exit."""

    def error(self, message):
        raise PlanError(message)


def _cli_number(kind):
    """An argparse type: a number, with , or _ between digits allowed (200,000)."""
    def convert(text):
        try:
            value = float(text.replace(",", "").replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if kind == "a whole number":
            if not math.isfinite(value) or not value.is_integer():
                raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
            return int(value)
        return value
    return convert


def _parser():
    whole, number = _cli_number("a whole number"), _cli_number("a number")
    p = _Parser(prog="python -m planner",
                description="Switches, ports, cables, training time and AllReduce time for "
                            "a GPU cluster under each network design (closed-form, no network built).")
    p.add_argument("--gpus", type=whole, help="GPUs in the cluster (2 to 10,000,000); "
                   "with --fabric or --results, the fabric's own count unless given")
    p.add_argument("--fabric", help="a fabric YAML: plan its GPU count and servers, and predict "
                   "AllReduce on it at its configured rates (its GPUs and NICs per server and "
                   "link rates replace --gpus-per-server, --nics-per-server, --link-gbps and "
                   "--intra-gbps)")
    p.add_argument("--results", help="a results folder of run_topology.py: calibrate the "
                   "AllReduce model on its runs (its fabric, unless --fabric is given)")
    p.add_argument("--radix", type=whole, default=64, help="ports per switch, even (default 64)")
    p.add_argument("--gpus-per-server", type=whole, default=8, help="scale-up domain size (default 8)")
    p.add_argument("--nics-per-server", type=whole, default=8,
                   help="scale-out NICs per server, the network's endpoints (default 8)")
    p.add_argument("--link-gbps", type=number, default=400.0, help="link rate, Gbit/s (default 400)")
    p.add_argument("--oversubscription", type=number, default=1.0,
                   help="leaf downlink:uplink ratio, 1 = nonblocking (default 1)")
    p.add_argument("--gpu-pflops", type=number, default=2.0, help="PFLOP/s per GPU (default 2)")
    p.add_argument("--flops", type=number, default=1e24, help="FLOPs of the training run (default 1e24)")
    p.add_argument("--utilisation", type=number, default=1.0,
                   help="fraction of peak FLOP/s achieved, 0 to 1 (default 1)")
    p.add_argument("--gradient-bytes", default="1G",
                   help="AllReduce size: 1048576, 512M, 1G (powers of 1024; default 1G)")
    p.add_argument("--alpha-us", type=number, default=5.0, help="per-step latency, us (default 5)")
    p.add_argument("--intra-gbps", type=number, default=NVLINK_GBPS,
                   help=f"in-server (NVLink) rate, Gbit/s (default {NVLINK_GBPS:,.0f})")
    p.add_argument("--json", action="store_true", help="print JSON instead of the report")
    return p


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:      # --help
        return exc.code if isinstance(exc.code, int) else 0
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        fabric, calibration, source = _fabric_inputs(args)
        result = _plan(args, fabric)
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = format_plan(result)
    if fabric is not None:
        sizes = _fabric_sizes(fabric, calibration, args)
        algorithms = ["ring"] + (["hierarchical"] if fabric.gpus_per_server > 1 else [])
        rows = fabric_predictions(fabric, sizes, algorithms, calibration,
                                  alpha_s=args.alpha_us * 1e-6)
        result["fabric"] = {"name": fabric.name, "calibration": calibration, "predictions": rows}
        text += "\n\n" + format_fabric(fabric, rows, calibration, source)
    if args.json:
        print(json.dumps(_jsonable(result), indent=2))
    else:
        print(text)
    return 0


def _plan(args, fabric) -> dict:
    """The plan of the flags (a fabric's GPU count when --gpus is not given),
    with the AllReduce prediction."""
    if args.gpus is None:
        if fabric is None:
            raise PlanError("--gpus is required (or a --fabric or --results to take it from)")
        args.gpus = len(fabric.endpoints)
    gpu_flops = check.positive("gpu_pflops", args.gpu_pflops) * 1e15
    result = plan(args.gpus, args.radix, args.gpus_per_server, args.nics_per_server,
                  args.link_gbps, args.oversubscription, gpu_flops=gpu_flops,
                  total_flops=args.flops, utilisation=args.utilisation)
    alpha_us = check.non_negative("alpha_us", args.alpha_us)
    result["allreduce"] = predict_allreduce(result, parse_bytes(args.gradient_bytes),
                                            alpha_s=alpha_us * 1e-6, intra_gbps=args.intra_gbps)
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
    from traffic.experiment import experiment_section
    fabric = calibration = None
    source = ""
    try:
        if args.fabric:
            fabric = load_fabric(args.fabric)
            experiment_section(fabric)     # its experiment: keys too, as the loader always did
        if args.results:
            folder = Path(args.results)
            fabric, calibration = _results_calibration(folder, fabric)
            source = str(folder)
    except FabricError as exc:
        raise PlanError(str(exc)) from None
    if fabric is not None:
        args.gpus_per_server = fabric.gpus_per_server
        args.nics_per_server = fabric.spec["server"]["nics"]
        args.link_gbps = fabric.spec["links"]["server_leaf"]["rate_mbit"] / 1e3
        intra = fabric.spec["links"].get("intra_node")
        if intra:
            args.intra_gbps = intra["rate_mbit"] / 1e3
    return fabric, calibration, source


def _results_calibration(folder: Path, fabric):
    """The fabric (`fabric`, else the one the run built) and the calibration
    from a results folder of run_topology.py."""
    from topologies.fabric import parse_fabric
    from traffic.experiment import experiment_section
    try:
        summary = json.loads((folder / "summary.json").read_text())
        runs = (summary.get("collectives") or {}).get("runs") or []
        if fabric is None:          # the fabric the run built, checked as a YAML is
            fabric = parse_fabric((folder / "fabric.json").read_text(),
                                  str(folder / "fabric.json"))
            experiment_section(fabric)
    except (OSError, ValueError, AttributeError) as exc:
        raise PlanError(f"--results {folder}: expected a results folder of "
                        f"run_topology.py with summary.json and fabric.json ({exc})") from None
    other = {r.get("ranks") for r in runs} - {len(fabric.endpoints), None}
    if other:
        raise PlanError(f"--results {folder}: its runs had {other.pop()} ranks and "
                        f"{fabric.name} has {len(fabric.endpoints)}: not the same fabric")
    try:
        calibration = calibrate_from_run(fabric, runs)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError(f"--results {folder}: a run in summary.json cannot be "
                        f"modelled ({type(exc).__name__}: {exc})") from None
    return fabric, calibration


def _fabric_sizes(fabric, calibration, args):
    """The sizes to predict: the calibration run's, else --gradient-bytes."""
    if calibration:
        return sorted({p["size_bytes"] for p in calibration["points"]})
    return [parse_bytes(args.gradient_bytes)]
