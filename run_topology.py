#!/usr/bin/env python3
"""Build a GPU-cluster fabric from YAML, replay NCCL collectives across it, measure, tear down.

    sudo python run_topology.py                       # ring AllReduce sweep on the default fabric
    sudo python run_topology.py topologies/leaf-spine-4x4.yaml -c allgather -b 64K -e 4M
    sudo python run_topology.py -c allreduce -a rhd --channels 4 --json > out.json
    sudo python run_topology.py --engine iperf3       # the same transfers as iperf3 flows
    sudo python run_topology.py --calibrate           # what link rates this host can emulate
    python run_topology.py --check topologies/my.yaml # validate only, no root needed
    sudo python run_topology.py --cli                 # then a Mininet prompt

A run: validate the YAML; start the os-ken ECMP controller; build the Mininet
network of Open vSwitch bridges; shape every link; wait until every switch is
programmed; ping all pairs; replay the collective for each message size
(nccl-tests' -b/-e/-f) with latency probes and link, queue and CPU sampling;
print an nccl-tests table and what the fabric did, with a fidelity verdict;
write everything to the results folder; tear everything down. Ctrl-C or
SIGTERM at any point tears down what was built and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent
VENV = REPO / ".venv"


def _reexec_into_venv() -> None:
    """`sudo python run_topology.py` starts the system Python: hand over to the
    project's environment, which scripts/setup.sh builds."""
    if Path(sys.prefix).resolve() != VENV.resolve() and (VENV / "bin" / "python").exists() \
            and "FABRIC_LAB_NO_REEXEC" not in os.environ:
        os.execv(str(VENV / "bin" / "python"),
                 [str(VENV / "bin" / "python"), __file__, *sys.argv[1:]])


if __name__ == "__main__":
    _reexec_into_venv()

try:
    from topologies.fabric import (DEFAULT_FABRIC, FabricError, check_policy, describe_links,
                                   load_fabric)
    from topologies.schema import POLICIES, parse_size
    from traffic import registry
    from traffic.experiment import FIELDS, experiment_from
    from traffic.report import console
except ImportError as exc:  # pragma: no cover - only without the environment
    sys.exit(f"error: {exc.name} is not installed: run `sudo scripts/lab setup` first")


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: unwinds like Ctrl-C, so the lab tears down."""


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum, _frame):
    # Further signals are ignored from here on: a second Ctrl-C must not cut
    # the teardown that this one starts.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


# --- flags -------------------------------------------------------------------------

def _positive_int(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def _whole(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 0, got {text!r}")
    return int(text)


def _channels(text):
    n = _positive_int(text)
    if n > 16:
        raise argparse.ArgumentTypeError(f"expected 1 to 16 connections per peer, got {n}")
    return n


def _size(text):
    n = parse_size(text)
    if n is None or n < 4:
        raise argparse.ArgumentTypeError(f"expected a size in bytes such as 65536, 64K or 2M, got {text!r}")
    return n


def _pair(text):
    parts = text.split(",")
    if len(parts) != 2 or not all(parts):
        raise argparse.ArgumentTypeError(f"expected two servers as SRC,DST, got {text!r}")
    return parts


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="run_topology.py", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fabric", nargs="?", type=Path,
                   help=f"fabric YAML (default: the embedded {DEFAULT_FABRIC.relative_to(REPO)})")
    p.add_argument("--check", action="store_true",
                   help="validate the YAML and print what would be built; build nothing")
    p.add_argument("--policy", choices=POLICIES,
                   help="override routing.policy: ecmp spreads over all spines, "
                        "single-path pins each destination leaf to one spine, stp runs "
                        "plain L2 switches with spanning tree and no controller (a baseline)")
    p.add_argument("--datapath", choices=("auto", "kernel", "user"), default="auto",
                   help="Open vSwitch datapath: the kernel module when present (auto), "
                        "else the userspace one")
    _collective_flags(p.add_argument_group(
        "collectives (override the YAML's experiment section)"))
    _run_flags(p)
    return p.parse_args(argv)


def _collective_flags(g) -> None:
    g.add_argument("-c", "--collective", choices=registry.COLLECTIVES,
                   help="the NCCL collective to replay (default allreduce)")
    g.add_argument("-a", "--algorithm", choices=registry.ALL_ALGORITHMS,
                   help="ring (default), rhd (recursive halving-doubling), tree or hierarchical "
                        "(multi-GPU servers) for AllReduce; pairwise for AllToAll; ring otherwise")
    g.add_argument("--compare", metavar="ALG[,ALG]", type=lambda v: [a for a in v.split(",") if a],
                   default=[],
                   help="then replay these algorithms of the same collective in the same lab, "
                        "each with its tables; busbw.png draws every one")
    g.add_argument("--engine", choices=tuple(registry.ENGINES),
                   help="; ".join(f"{name}: {info.help}" for name, info in
                                  registry.ENGINES.items()))
    g.add_argument("-b", "--minbytes", type=_size, help="smallest size (default 32K)")
    g.add_argument("-e", "--maxbytes", type=_size, help="largest size (default 2M)")
    g.add_argument("-f", "--stepfactor", type=float, help="size multiplier (default 4)")
    g.add_argument("-n", "--iters", type=_positive_int, help="timed iterations per size (default 5)")
    g.add_argument("-w", "--warmup", type=_whole, help="untimed iterations first (default 1)")
    g.add_argument("--root", type=int, help="root rank of Broadcast and Reduce (default 0)")
    g.add_argument("--channels", type=_channels,
                   help="TCP connections (NCCL channels, RoCE QPs) per peer: the flow entropy "
                        "ECMP spreads (default 1)")
    g.add_argument("--piece-bytes", type=_size,
                   help="messages are cut into pieces of this size and forwarded piece by "
                        "piece (default 64K)")
    g.add_argument("--probe", type=_pair, metavar="SRC,DST",
                   help="servers between which latency is probed (default first and last rank)")
    g.add_argument("--cross", type=_pair, metavar="SRC,DST",
                   help="run an iperf3 TCP flow between two servers during the whole sweep "
                        "(background traffic the collective must share the fabric with)")
    g.add_argument("--no-traffic", action="store_true",
                   help="only build, check reachability and tear down")
    g.add_argument("--iperf-check", action="store_true",
                   help="also run the iperf3 check across the leaves (per-uplink bytes)")
    g.add_argument("--seconds", type=_positive_int, default=3,
                   help="length of the iperf3 check, whole seconds (default 3)")
    g.add_argument("--streams", type=_positive_int, default=4,
                   help="parallel TCP flows per server pair in the iperf3 check (default 4)")


def _run_flags(p) -> None:
    p.add_argument("--calibrate", action="store_true",
                   help="measure which link rates this host can emulate for this fabric "
                        "(ring AllReduce at rising rates) and recommend one")
    p.add_argument("--cli", action="store_true",
                   help="open the Mininet CLI once the checks are done; tear down when it exits")
    p.add_argument("--results", type=Path, default=REPO / "results",
                   help="folder for this run's folder: summary.json, controller log "
                        "(default ./results)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    p.add_argument("--csv", type=Path, help="also write one CSV row per collective size here")
    p.add_argument("--cleanup", action="store_true",
                   help="remove what labs killed without teardown (SIGKILL) left behind, "
                        "from their records in /run/fabric-lab; touches nothing else")
    p.add_argument("-v", "--verbose", action="store_true", help="Mininet and controller detail")


# --- the command -------------------------------------------------------------------

def main(argv=None) -> int:
    args = parse_args(argv)
    if args.cleanup:
        return _cleanup()
    try:
        fabric = load_fabric(args.fabric)
        if args.policy:
            fabric = fabric.with_policy(args.policy)
            check_policy(fabric)
        exp = experiment_from(fabric, {k: getattr(args, k) for k in FIELDS}, args.compare)
    except (FabricError, ValueError) as exc:        # the YAML, or the command-line flags
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = _output_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.check:
        return _check(fabric, exp, args)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    if args.calibrate:
        return _guarded(lambda: _calibrate(fabric, args))
    return _guarded(lambda: _run(fabric, exp, args))


def _output_problem(args):
    """Refuse, before anything is built, output paths that would fail at the end."""
    if args.results.exists() and not args.results.is_dir():
        return f"--results {args.results}: expected a folder, and it is a file"
    if args.csv and not args.csv.parent.is_dir():
        return f"--csv {args.csv}: the folder {args.csv.parent} does not exist"
    return None


def _guarded(job) -> int:
    """Run a job that builds labs; every way it can fail ends in one sentence."""
    from lab.host import LabError
    from lab.processes import CheckError
    try:
        return job()
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (subprocess.TimeoutExpired, CheckError) as exc:
        print(f"error: a check did not finish: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        name = "Ctrl-C" if exc.args[0] == "SIGINT" else exc.args[0]
        print(f"\ninterrupted ({name}): the lab was torn down", file=sys.stderr)
        return 130


def _run(fabric, exp, args) -> int:
    from lab.lifecycle import Lab

    run_dir = args.results / f"{time.strftime('%Y%m%d-%H%M%S')}-{fabric.name}"
    say = (lambda *a: None) if args.json else print
    summary = {"fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
               "links": describe_links(fabric), "policy": fabric.policy}
    say(f"fabric   {fabric.name}: {fabric.shape()}")
    with Lab(fabric, run_dir, datapath=args.datapath, verbose=args.verbose) as lab:
        _lab_summary(lab, summary, say)
        if _reachability(lab, summary, say) and not args.no_traffic and exp is not None:
            _traffic(lab, exp, run_dir, args, summary, say)
        if args.cli:
            _mininet_cli(lab)
    summary["timings"]["teardown_s"] = round(lab.timings["teardown_s"], 2)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"teardown {summary['timings']['teardown_s']:.1f} s; results in {run_dir}")
    ok = summary["reachability"]["ok"] == summary["reachability"]["total"]
    results = [summary.get("collectives", {})] + list(summary.get("compared", {}).values())
    wrong = [r["wrong"] for result in results for r in result.get("runs", [])]
    return 0 if ok and not any(wrong) else 1


def _lab_summary(lab, summary, say) -> None:
    status = lab.status
    summary.update(datapath=lab.datapath, openflow=sorted(set(status["versions"].values())),
                   timings=dict(lab.timings), results=str(lab.run_dir))
    control = "/".join(summary["openflow"]) or "no controller (L2 learning + STP)"
    say(f"lab      datapath {lab.datapath}, {control}, policy {lab.fabric.policy}; "
        f"ready in {lab.timings['start_s']:.1f} s (build {lab.timings['build_s']:.1f} s)")


def _reachability(lab, summary, say) -> bool:
    from lab.reachability import all_pairs_reachability
    t0 = time.monotonic()
    reach = all_pairs_reachability(lab)
    summary["reachability"] = {"ok": reach.ok, "total": reach.total, "failures": reach.failures,
                               "seconds": round(time.monotonic() - t0, 2)}
    say(f"reach    {reach.ok}/{reach.total} server pairs reach each other"
        + ("" if reach.complete else f"; failing: {console.pairs_text(reach.failures)}"))
    return reach.complete


def _traffic(lab, exp, run_dir, args, summary, say) -> None:
    """The sweep, the algorithms to compare, the figures, the iperf3 check."""
    from dataclasses import replace

    from traffic.measure.iperf3_check import cross_leaf_pairs, iperf3_check
    summary["collectives"] = _collectives(lab, exp, run_dir, args, say)
    compared = {}
    for algorithm in args.compare:
        say(f"compare  the same sweep with algorithm {algorithm}")
        compared[algorithm] = _collectives(lab, replace(exp, algorithm=algorithm),
                                           run_dir / algorithm, args, say)
    if compared:
        summary["compared"] = compared
    summary["collectives"]["figures"] = _figures(lab.fabric, summary["collectives"],
                                                 compared, run_dir, say)
    pairs = cross_leaf_pairs(lab.fabric)
    if args.iperf_check and pairs:
        summary["traffic"] = iperf3_check(lab, pairs, args.seconds, args.streams)
        if not args.json:
            print(console.iperf3_check_text(lab.fabric, summary["traffic"]))


def _mininet_cli(lab) -> None:
    from lab.cli import open_cli
    open_cli(lab)


def _collectives(lab, exp, run_dir, args, say) -> dict:
    from traffic.report.tables import csv_text, fabric_table, nccl_table
    from traffic.sweep import run_experiment
    rate = lab.fabric.spec["links"]["server_leaf"]["rate_mbit"]
    result = run_experiment(lab, exp, run_dir, progress=_progress(args.json))
    (run_dir / "results.csv").write_text(csv_text(result))
    if args.csv:
        args.csv.write_text(csv_text(result))
    say(nccl_table(result, rate))
    say(fabric_table(result, rate))
    if result["cross_traffic"]:
        say(console.cross_text(result["cross_traffic"]))
    if not args.json:
        print(console.uplinks_text(lab.fabric, result["uplink_tx_bytes"],
                                   "during the collectives"))
        split = console.split_text(result)
        if split:
            print(split)
    return result


def _figures(fabric, result, compared, run_dir, say) -> list:
    """The PNGs of the run; busbw.png has a curve per algorithm replayed."""
    try:
        from traffic.report.figures import write_figures
        curves = None
        if compared:
            curves = {f"{r['experiment']['collective']} ({alg})":
                      [(x["size_bytes"], x["busbw_gbps"]) for x in r["runs"]]
                      for alg, r in [(result["experiment"]["algorithm"], result),
                                     *compared.items()]}
        names = [p.name for p in write_figures(fabric, result, run_dir, curves)]
        say(f"figures  {', '.join(names)} in {run_dir}")
        return names
    except Exception as exc:          # noqa: BLE001 (a picture is never worth the run)
        say(f"figures  none: drawing failed ({type(exc).__name__}: {exc})")
        return []


def _progress(quiet):
    """A one-line progress display on a terminal; nothing otherwise."""
    if quiet or not sys.stderr.isatty():
        return lambda msg: None

    def show(msg):
        sys.stderr.write(f"\r\033[K# {msg}")
        sys.stderr.flush()
        if msg == "done":
            sys.stderr.write("\r\033[K")
    return show


def _calibrate(fabric, args) -> int:
    from traffic.rate_calibration import calibrate_rates, calibration_table
    run_dir = args.results / f"{time.strftime('%Y%m%d-%H%M%S')}-{fabric.name}-calibration"
    rows = calibrate_rates(fabric, run_dir, args.datapath, progress=_progress(args.json))
    (run_dir / "calibration.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows, indent=1) if args.json else calibration_table(fabric, rows))
    return 0


def _check(fabric, exp, args) -> int:
    from lab.host import LabError, check_netem
    if any(l.spec.needs_netem for l in fabric.links):
        if os.geteuid() != 0:
            print("note: delay and loss need the kernel's sch_netem qdisc; "
                  "run --check as root to find out whether this kernel has it")
        else:
            try:
                check_netem(fabric)
            except LabError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
    print(console.check_summary(fabric, exp, args.compare))
    return 0


def _cleanup() -> int:
    if os.geteuid() != 0:
        print("error: --cleanup needs root: run it with sudo", file=sys.stderr)
        return 2
    from lab.records import cleanup_dead_labs
    if not cleanup_dead_labs():
        print("nothing to clean up: no records of dead labs in /run/fabric-lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
