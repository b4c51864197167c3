#!/usr/bin/env python3
"""Build a GPU-cluster fabric from YAML, prove it forwards, and tear it down.

    sudo python run_topology.py                       # the default 2x2 leaf-spine
    sudo python run_topology.py topologies/leaf-spine-4x4.yaml --policy single-path
    python run_topology.py --check topologies/my.yaml # validate only, no root needed
    sudo python run_topology.py --cli                 # then a Mininet prompt

A run: validate the YAML; start the os-ken ECMP controller; build the Mininet
network of Open vSwitch bridges; shape every link; wait until every switch is
programmed; ping all pairs; run a short iperf3 check across the leaves; print
a summary (and write it as JSON in the results folder); tear everything down.
Ctrl-C or SIGTERM at any point tears down what was built and nothing else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent
VENV = REPO / ".venv"

# `sudo python run_topology.py` starts the system Python: hand over to the
# project's environment, which scripts/setup.sh builds.
if Path(sys.prefix).resolve() != VENV.resolve() and (VENV / "bin" / "python").exists() \
        and "FABRIC_LAB_NO_REEXEC" not in os.environ:
    os.execv(str(VENV / "bin" / "python"), [str(VENV / "bin" / "python"), __file__, *sys.argv[1:]])

import argparse   # noqa: E402
import json       # noqa: E402
import signal     # noqa: E402
import subprocess  # noqa: E402
import time       # noqa: E402

try:
    from topologies.fabric import DEFAULT_FABRIC, POLICIES, FabricError, describe_links, load_fabric
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


def _positive_int(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


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
    p.add_argument("--seconds", type=_positive_int, default=3,
                   help="length of the iperf3 traffic check, whole seconds (default 3)")
    p.add_argument("--streams", type=_positive_int, default=4,
                   help="parallel TCP flows per server pair in the traffic check (default 4)")
    p.add_argument("--no-traffic", action="store_true", help="skip the iperf3 traffic check")
    p.add_argument("--cli", action="store_true",
                   help="open the Mininet CLI once the checks are done; tear down when it exits")
    p.add_argument("--results", type=Path, default=REPO / "results",
                   help="folder for this run's folder: summary.json, controller log "
                        "(default ./results)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of text")
    p.add_argument("--cleanup", action="store_true",
                   help="remove what labs killed without teardown (SIGKILL) left behind, "
                        "from their records in /run/fabric-lab; touches nothing else")
    p.add_argument("-v", "--verbose", action="store_true", help="Mininet and controller detail")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.cleanup:
        return _cleanup()
    try:
        fabric = load_fabric(args.fabric)
    except FabricError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.policy:
        fabric = fabric.with_policy(args.policy)
    if args.check:
        return _check(fabric)

    from topologies.lab import Lab
    from topologies.system import LabError
    from traffic import checks

    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    run_dir = args.results / f"{time.strftime('%Y%m%d-%H%M%S')}-{fabric.name}"
    say = (lambda *a: None) if args.json else print
    summary = {"fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
               "links": describe_links(fabric), "policy": fabric.policy}
    say(f"fabric   {fabric.name}: {fabric.shape()}")
    try:
        with Lab(fabric, run_dir, datapath=args.datapath, verbose=args.verbose) as lab:
            status = lab.status
            summary.update(datapath=lab.datapath, openflow=sorted(set(status["versions"].values())),
                           timings=dict(lab.timings), results=str(run_dir))
            control = "/".join(summary["openflow"]) or "no controller (L2 learning + STP)"
            say(f"lab      datapath {lab.datapath}, {control}, policy {fabric.policy}; "
                f"ready in {lab.timings['start_s']:.1f} s (build {lab.timings['build_s']:.1f} s)")
            t0 = time.monotonic()
            reach = checks.all_pairs_reachability(lab)
            summary["reachability"] = {"ok": reach.ok, "total": reach.total,
                                       "failures": reach.failures,
                                       "seconds": round(time.monotonic() - t0, 2)}
            say(f"reach    {reach.ok}/{reach.total} server pairs reach each other"
                + ("" if reach.complete else f"; failing: {_pairs(reach.failures)}"))
            pairs = checks.cross_leaf_pairs(fabric)
            if not args.no_traffic and pairs and reach.complete:
                traffic = checks.iperf3_check(lab, pairs, args.seconds, args.streams)
                summary["traffic"] = traffic
                if not args.json:
                    _print_traffic(fabric, traffic)
            if args.cli:
                from mininet.cli import CLI
                # Inside the CLI, Ctrl-C interrupts the running command, as in
                # Mininet; `exit`, Ctrl-D or SIGTERM leave and tear down.
                signal.signal(signal.SIGINT, signal.default_int_handler)
                CLI(lab.net)
                signal.signal(signal.SIGINT, _interrupt)
        summary["timings"]["teardown_s"] = round(lab.timings["teardown_s"], 2)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (subprocess.TimeoutExpired, checks.CheckError) as exc:
        print(f"error: a check did not finish: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        name = "Ctrl-C" if exc.args[0] == "SIGINT" else exc.args[0]
        print(f"\ninterrupted ({name}): the lab was torn down", file=sys.stderr)
        return 130
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"teardown {summary['timings']['teardown_s']:.1f} s; results in {run_dir}")
    return 0 if summary["reachability"]["ok"] == summary["reachability"]["total"] else 1


def _pairs(pairs, limit=5):
    text = ", ".join(f"{a}->{b}" for a, b in pairs[:limit])
    return text + (f" and {len(pairs) - limit} more" if len(pairs) > limit else "")


def _print_traffic(fabric, traffic):
    from traffic.checks import imbalance
    n = len(traffic["pairs"])
    share = traffic["total_mbit_s"] / traffic["server_links_mbit_s"]
    print(f"traffic  {n} iperf3 TCP tests x {traffic['streams_per_pair']} flows for "
          f"{traffic['seconds']:g} s: {traffic['total_mbit_s']:.1f} Mbit/s in total, "
          f"{share:.0%} of the {traffic['server_links_mbit_s']:g} Mbit/s the senders' links allow")
    for flow in traffic["pairs"]:
        err = f"  ({flow['error']})" if "error" in flow else ""
        print(f"         {flow['src']:>6} -> {flow['dst']:<6} {flow['mbit_s']:8.1f} Mbit/s"
              f"  {flow['retransmits']} retransmits{err}")
    spine_of = {l.a_intf: l.b for l in fabric.links if l.kind == "leaf_spine"}
    print("uplinks  bytes each leaf sent towards each spine during the check")
    for leaf, counters in traffic["uplink_tx_bytes"].items():
        cells = "  ".join(f"{spine_of[i]}:{v / 1e6:7.2f} MB" for i, v in counters.items())
        print(f"         {leaf:>7}  {cells}  (max/mean {imbalance(list(counters.values())):.2f})")


def _check(fabric) -> int:
    from topologies.system import LabError, check_netem
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
    print(f"{fabric.source}: valid")
    print(f"  {fabric.shape()}")
    for kind, text in describe_links(fabric).items():
        print(f"  {kind.replace('_', '-')} links: {text}")
    print(f"  routing: {fabric.policy}; servers {fabric.servers[0].ip} .. {fabric.servers[-1].ip}")
    return 0


def _cleanup() -> int:
    if os.geteuid() != 0:
        print("error: --cleanup needs root: run it with sudo", file=sys.stderr)
        return 2
    from topologies.system import cleanup_dead_labs
    if not cleanup_dead_labs():
        print("nothing to clean up: no records of dead labs in /run/fabric-lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
