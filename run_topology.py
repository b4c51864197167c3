#!/usr/bin/env python3
"""Build a GPU-cluster fabric from YAML, replay NCCL collectives across it, measure, tear down.

    sudo python run_topology.py                       # ring AllReduce sweep on the default fabric
    sudo python run_topology.py topologies/leaf-spine-4x4.yaml -c allgather -b 64K -e 4M
    sudo python run_topology.py -c allreduce -a rhd --channels 4 --json > out.json
    sudo python run_topology.py --engine iperf3       # the same transfers as iperf3 flows
    sudo python run_topology.py --calibrate           # what link rates this host can emulate
    python run_topology.py --check topologies/my.yaml # validate only, no root needed
    sudo python run_topology.py --cli                 # then a Mininet prompt
    sudo python run_topology.py --step --bucket 1M    # a training step: compute + buckets
    sudo python run_topology.py --up                  # build the lab and keep it up (scripts/lab up)
    sudo python run_topology.py --lab -b 32K -e 1M    # an experiment on the lab that is up

A run: validate the YAML; start the os-ken ECMP controller; build the Mininet
network of Open vSwitch bridges; shape every link; wait until every switch is
programmed; ping all pairs; replay the collective for each message size
(nccl-tests' -b/-e/-f) with latency probes and link, queue and CPU sampling;
print an nccl-tests table and what the fabric did, with a fidelity verdict;
write everything to the results folder; tear everything down. Ctrl-C or
SIGTERM at any point tears down what was built and nothing else.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent


def _interrupted_early(signum, _frame):
    """A stop signal before any lab is started (importing, reading the YAML,
    checking): there is nothing to tear down, and no traceback to show."""
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    os.write(2, f"\ninterrupted ({name}): nothing had been built\n".encode())
    os._exit(130)


if __name__ == "__main__":
    # `sudo python run_topology.py` starts the system Python: hand over to .venv
    from topologies.handover import hand_over_script
    hand_over_script(__file__)
    for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_sig, _interrupted_early)

try:
    from topologies.fabric import (FabricError, check_emulation, check_policy, describe_links,
                                   load_fabric)
    from topologies.placement import cluster_of, place_cluster, placement_text, refuse_in_cluster
    from runs import flags
    from runs.experiment import FIELDS, experiment_from
    from runs.outputs import output_problem
    from runs.provenance import provenance
    from collectives.registry import ENGINES
    from traffic.engines.sim import simulation_method
    from lab.host import Interrupted
    from report import console
except ImportError as exc:  # pragma: no cover - only without the environment
    sys.exit(f"error: {exc.name} is not installed: run `sudo scripts/lab setup` first")


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum, _frame):
    # Further signals are ignored from here on: a second Ctrl-C must not cut
    # the teardown that this one starts.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


def _unraisable(hook_args):
    """An interruption raised where Python drops exceptions (a signal that
    lands in an at-fork callback, as a Popen starts a process) is raised
    again, from ordinary code: otherwise the run would print a traceback and
    go on to its end as if nothing had come."""
    if isinstance(hook_args.exc_value, Interrupted) and \
            threading.current_thread() is threading.main_thread():
        sig = signal.Signals[hook_args.exc_value.args[0]]
        signal.signal(sig, _interrupt)
        signal.raise_signal(sig)            # its handler runs once this hook returns
        return
    sys.__unraisablehook__(hook_args)



# --- the command -------------------------------------------------------------------

def main(argv=None, sweeps=None) -> int:
    """The command; its output guarded against a reader that stops reading.
    `sweeps` (ncclperf/nccl_sweeps.py): what replays the collective sweeps in
    place of report.write.sweep_collectives, with its `check(fabric, exp)`
    run before anything is built."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _PipeGuard(sys.stdout), _PipeGuard(sys.stderr)
    sys.unraisablehook = _unraisable
    try:
        code = _main(argv, sweeps)
        sys.stdout.flush()
        return code
    except PipeClosed:
        return 141                  # as a shell reports a command SIGPIPE stopped
    finally:
        sys.stdout, sys.stderr = streams


def _flagged(fabric, args):
    """The fabric with --network and --policy applied, the routing checked."""
    if args.network:
        fabric = fabric.with_network(args.network)
    if args.policy:
        fabric = fabric.with_policy(args.policy)
    if args.network or args.policy:
        check_policy(fabric)
    return fabric


def _main(argv, sweeps=None) -> int:
    try:
        args = flags.parse_args(argv, __doc__, REPO / "results")
        args.sweeps = sweeps
        args.argv = list(sys.argv[1:] if argv is None else argv)
        # the command as typed, for the provenance: an nccl-tests program's own
        args.typed = getattr(sweeps, "typed", ("run_topology.py", args.argv))
        if not args.json:       # each line as it is printed, on a pipe too
            getattr(sys.stdout, "reconfigure", lambda **_: None)(line_buffering=True)
        if args.cleanup:
            return _cleanup()
        if _kept_flags(args):                       # --lab: the kept lab's keeper runs it
            return _on_kept_lab(args)
        fabric = _flagged(load_fabric(args.fabric, emulate=False), args)   # the model's limits
        exp = experiment_from(fabric, {k: getattr(args, k) for k in FIELDS}, args.compare)
        if exp is None or ENGINES[exp.engine].needs_lab:     # a network is to be built
            check_emulation(fabric)
        else:                                                 # simulated: how, or why not
            simulation_method("allreduce" if exp.step is not None else exp.collective,
                              exp.algorithm, len(exp.ranks or fabric.endpoints),
                              exp.step is None and fabric.server_model is not None)
        _check_fabric_flags(fabric, args)
        if sweeps is not None and exp is not None:
            sweeps.check(fabric, exp)
        cluster = cluster_of(fabric, args.cluster)
        placement = cluster and place_cluster(fabric, cluster)
        if cluster and not args.check:
            refuse_in_cluster(fabric, cluster, args.cli, args.calibrate)
        problem, notes = output_problem(args, _run_name(fabric, args, "YYYYmmdd-HHMMSS"))
    except SystemExit as exc:                   # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (FabricError, ValueError) as exc:    # the YAML, or the command-line flags
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stdout if args.check else sys.stderr)
    if args.check:
        code = _check(fabric, exp, args)          # its summary lists the warnings
        if code == 0 and cluster:
            print(placement_text(fabric, cluster, placement))
        return code
    if exp is not None and not ENGINES[exp.engine].needs_lab:     # simulated: no root
        from report.write import simulated_run
        return simulated_run(fabric, exp, _fresh(args.results, _run_name(fabric, args)),
                             args.json, args.csv, _progress(args.json, sweeps), args.compare,
                             sweeps, provenance(args.typed[1], fabric, args.typed[0]))
    if os.geteuid() != 0:
        print("error: building a fabric needs root: run it with sudo "
              "(--check validates it without root)", file=sys.stderr)
        return 2
    for warning in fabric.warnings:
        print(f"warning: {fabric.source}: {warning}", file=sys.stderr)
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    if args.calibrate or args.up or args.keeper:
        return _other_mode(fabric, args)
    return _guarded(lambda: _run(fabric, exp, args, cluster and (cluster, placement)))


def _other_mode(fabric, args) -> int:
    """--calibrate, --up, or the keeper --up starts."""
    if args.calibrate:
        return _guarded(lambda: _calibrate(fabric, args))
    if args.up:
        return _up(fabric, args)
    return _guarded(lambda: _keep(fabric, args))


def _check_fabric_flags(fabric, args) -> None:
    """Flags this fabric cannot honour: ValueError, one sentence."""
    if args.calibrate and len(fabric.endpoints) < 2:
        raise ValueError("--calibrate replays a ring AllReduce across the servers, and this "
                         "fabric has one")
    if args.iperf_check and len(fabric.leaves) < 2:
        raise ValueError("--iperf-check measures flows from leaf to leaf, and this fabric "
                         "has one leaf")
    if args.incast:
        from traffic.measure.incast import incast_plan
        incast_plan(fabric, args.incast)


def _fresh(results: Path, name: str) -> Path:
    """The run's own folder under `results`, made now: `name`, or `name-2`,
    `name-3`, ... when runs of the same fabric start within one second."""
    for number in range(1, 1000):
        folder = results / (name if number == 1 else f"{name}-{number}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
    raise ValueError(f"--results {results}: {name} and 998 more like it exist already")


def _run_name(fabric, args, when=None) -> str:
    """The name of this run's folder under --results."""
    when = when or time.strftime("%Y%m%d-%H%M%S")
    return f"{when}-{fabric.name}" + ("-calibration" if args.calibrate else "")


class PipeClosed(BaseException):
    """The reader of our output went away (`| head`): unwinds like Ctrl-C,
    so a lab tears down, and the command then stops quietly."""


class _PipeGuard:
    """stdout or stderr, where a write to a closed pipe sends the rest to
    /dev/null (teardown's messages too) and raises PipeClosed, once."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._closed()

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self):
        try:                        # the teardown this starts is not to be cut either
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN)
        except ValueError:          # not the main thread
            pass
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())
        os.close(null)
        raise PipeClosed()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _guarded(job) -> int:
    """Run a job that builds labs; every way it can fail ends in one sentence."""
    try:
        return _failing(job)
    except Interrupted as exc:
        name = "Ctrl-C" if exc.args[0] == "SIGINT" else exc.args[0]
        print(f"\ninterrupted ({name}): the lab was torn down", file=sys.stderr)
        return 130


def _failing(job) -> int:
    """Run a job on a lab; a lab's or a check's failure ends in one sentence
    (an interruption goes on up)."""
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


def _run(fabric, exp, args, cluster=None) -> int:
    from lab.lifecycle import Lab

    run_dir = _fresh(args.results, _run_name(fabric, args))
    say = (lambda *a: None) if args.json else print
    summary = _summary_start(fabric, args, say)
    if cluster:
        from lab.cluster.cluster import ClusterLab
        lab = ClusterLab(fabric, run_dir, *cluster, datapath=args.datapath, verbose=args.verbose)
    else:
        lab = Lab(fabric, run_dir, datapath=args.datapath, verbose=args.verbose)
    with lab:
        # --cli: the prompt once the checks are done, in place of the experiment
        _measure(lab, None if args.cli else exp, args, run_dir, summary, say)
        if args.cli:
            _mininet_cli(lab)
    summary["timings"]["teardown_s"] = round(lab.timings["teardown_s"], 2)
    if "cluster" in summary:                       # each machine's teardown, now known
        summary["cluster"] = lab.summary()
    return _finish(summary, run_dir, args,
                   f"teardown {summary['timings']['teardown_s']:.1f} s; results in {run_dir}")


def _summary_start(fabric, args, say) -> dict:
    """The summary's first keys: the fabric and how the run was asked for."""
    say(f"fabric   {fabric.name}: {fabric.shape()}")
    from report.write import network_summary
    return {"fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
            "links": describe_links(fabric), "policy": fabric.policy,
            "network": network_summary(fabric), "warnings": list(fabric.warnings),
            "provenance": provenance(args.typed[1], fabric, args.typed[0])}


def _measure(lab, exp, args, run_dir, summary, say) -> None:
    """What a run does on a lab that is up: all pairs, then the experiment."""
    _lab_summary(lab, summary, say)
    if _reachability(lab, summary, say) and not args.no_traffic and exp is not None:
        _traffic(lab, exp, run_dir, args, summary, say)


def _finish(summary, run_dir, args, last_line) -> int:
    """summary.json (and --json); the run's exit status: 0 when every pair
    reached every other, no collective came out wrong and every incast flow
    ran."""
    from report.write import write_summary
    write_summary(summary, run_dir, args.json)
    if not args.json:
        print(last_line)
    ok = summary["reachability"]["ok"] == summary["reachability"]["total"]
    records = ([summary["collectives"]] if "collectives" in summary else []) + list(
        summary.get("compared", {}).values())
    wrong = [r["wrong"] for record in records for r in record.runs]
    wrong.append(summary.get("step", {}).get("wrong"))
    failed = [f for f in summary.get("incast", {}).get("lab", {}).get("flows", []) if "error" in f]
    return 0 if ok and not any(wrong) and not failed else 1


def _lab_summary(lab, summary, say) -> None:
    status = lab.status
    summary.update(datapath=lab.datapath, openflow=sorted(set(status["versions"].values())),
                   timings=dict(lab.timings), results=str(lab.run_dir))
    for warning in lab.warnings:
        summary["warnings"].append(f"host: {warning}")
        print(f"warning: host: {warning}", file=sys.stderr)
    control = "/".join(summary["openflow"]) or "no controller (L2 learning + STP)"
    say(f"lab      datapath {lab.datapath}, {control}, policy {lab.fabric.policy}; "
        f"ready in {lab.timings['start_s']:.1f} s (build {lab.timings['build_s']:.1f} s)")
    if lab.ecn.asked:
        summary["ecn"] = lab.ecn.to_dict()
        say(f"ecn      {lab.fabric.network.title}: {lab.ecn.note}")
    if lab.spread:
        summary["cluster"] = lab.summary()
        say(console.cluster_text(summary["cluster"]))


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
    from report.write import Outputs, sweep_collectives
    from runs.measured import run_experiment
    from traffic.measure.iperf3_check import cross_leaf_pairs, iperf3_check
    if args.incast:                       # an incast instead of a sweep
        from runs.incast_beside import incast_beside
        summary["incast"] = incast_beside(lab, args.incast, args.seconds)
        return say(console.incast_text(summary["incast"]))
    if exp.step is not None:              # a training step instead of a sweep
        from report.step_report import report_step
        from runs.training import run_step
        summary["step"] = run_step(lab, exp, progress=_progress(args.json))
        return report_step(summary["step"], run_dir, args.csv, say)
    results, figures, failed = (args.sweeps or sweep_collectives)(
        lab.fabric, exp, args.compare,
        lambda e, folder: run_experiment(lab, e, folder,
                                         progress=_progress(args.json, args.sweeps)),
        Outputs(run_dir, args.csv, say, machines=lab.hosts() if lab.spread else None,
                announce=lambda algorithm: say(f"compare  the same sweep with algorithm "
                                               f"{algorithm}")))
    summary["collectives"] = results[exp.algorithm]
    if args.compare:
        summary["compared"] = {a: r for a, r in results.items() if a != exp.algorithm}
    say(f"figures  {', '.join(figures)} in {run_dir}" if failed is None
        else f"figures  none: drawing failed ({failed})")
    pairs = cross_leaf_pairs(lab.fabric)
    if args.iperf_check and pairs:
        summary["traffic"] = iperf3_check(lab, pairs, args.seconds, args.streams)
        if not args.json:
            print(console.iperf3_check_text(lab.fabric, summary["traffic"]))


def _mininet_cli(lab) -> None:
    from lab.mininet_cli import open_cli
    open_cli(lab)


def _progress(quiet, sweeps=None):
    """A one-line progress display with the time left on a terminal, a line
    a finished size elsewhere (report/progress.py); nothing with --json.
    An nccl-tests program's sweeps hear of each size as it ends."""
    from report.progress import Progress
    return Progress(enabled=False if quiet else None, on_size=getattr(sweeps, "size_done", None))


def _calibrate(fabric, args) -> int:
    """--calibrate: the table's head at once, a row as each rate ends (on a
    pipe or in a file too), the ceiling at the end; or the rows as JSON."""
    from report.progress import Progress
    from runs.rate_calibration import (calibrate_rates, calibration_ceiling, calibration_head,
                                       calibration_row)
    run_dir = args.results / f"{time.strftime('%Y%m%d-%H%M%S')}-{fabric.name}-calibration"
    if args.json:
        progress = Progress(enabled=False)
    else:
        print(calibration_head(fabric))
        progress = Progress(on_size=lambda row: print(calibration_row(row)))
    rows = calibrate_rates(fabric, run_dir, args.datapath, progress=progress)
    (run_dir / "calibration.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows, indent=1) if args.json else calibration_ceiling(rows))
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
    incast = None
    if args.incast:
        from traffic.measure.incast import incast_plan
        incast = (*incast_plan(fabric, args.incast), args.seconds)
    from traffic.measure.fidelity import calibrated_rate
    ceiling = calibrated_rate(args.results, fabric.name)
    plan = args.sweeps.plan(exp) if getattr(args, "sweeps", None) and exp is not None else None
    if args.json:
        print(json.dumps(console.check_record(fabric, exp, args.compare, incast, ceiling, plan),
                         indent=1))
    else:
        print(console.check_summary(fabric, exp, args.compare, incast, ceiling, plan))
    return 0


def _cleanup() -> int:
    if os.geteuid() != 0:
        print("error: --cleanup needs root: run it with sudo", file=sys.stderr)
        return 2
    from lab.cleanup import cleanup_dead_labs
    if not cleanup_dead_labs():
        print("nothing to clean up: no records of dead labs in /run/fabric-lab")
    return 0


# --- the kept lab: --up, --lab (docs/running.md, "A lab that stays up") ---------------

LAB_OPTIONS = ("fabric", "policy", "datapath", "results", "verbose", "up", "keeper", "name")
BUILDS = ("fabric", "policy", "datapath", "cli", "calibrate", "cluster", "check", "up")


def _given(args, key) -> bool:
    value = getattr(args, key, None)
    if key == "datapath":
        return value not in (None, "auto")
    if key in ("seconds", "streams", "results"):      # their defaults are filled in
        return False
    return value is not None and value is not False and value != []


def _kept_flags(args) -> bool:
    """Whether this is --lab; ValueError for flags --up or --lab would ignore."""
    problem = _kept_refusal(args) if args.up or args.lab or args.keeper else (
        "--name names a kept lab: use it with --up or --lab" if args.name else None)
    if args.name:
        from lab.kept import kept
        kept.select(args.name)
    if problem:
        raise ValueError(problem)
    return args.lab


def _kept_refusal(args):
    """One sentence for flags that --up, or --lab, would ignore; None if none."""
    given = [key for key in flags.NAMES if _given(args, key)]
    if args.up and args.lab:
        return "--up builds a lab and --lab runs an experiment on it: use one of them"
    if args.check and (args.up or args.lab):
        mode = "--up builds a lab" if args.up else "--lab runs an experiment on the lab that is up"
        return f"{mode} and --check builds and runs nothing: use one of them"
    if args.up or args.keeper:
        other = [key for key in given if key not in LAB_OPTIONS]
        if other:
            return (f"--up builds a lab and keeps it up, and {flags.NAMES[other[0]]} belongs "
                    f"to an experiment on it: run that afterwards with --lab")
    if args.lab:
        other = [key for key in given if key in BUILDS]
        if other:
            return (f"--lab runs an experiment on the lab that is up, which is built already, "
                    f"so {flags.NAMES[other[0]]} would do nothing: `sudo scripts/lab down`, "
                    "then `sudo scripts/lab up` with it")
    return None


def _on_kept_lab(args) -> int:
    """run_topology.py --lab ...: the experiment, run by the keeper; its output here."""
    from lab.kept import kept_client
    from lab.kept import kept
    signal.signal(signal.SIGINT, signal.default_int_handler)   # a Ctrl-C cancels it
    for sig in (signal.SIGTERM, signal.SIGHUP):                # and these end this client
        signal.signal(sig, signal.SIG_DFL)
    argv = kept.take_name(list(args.argv))
    argv.remove("--lab")
    return kept_client.run(argv, os.getcwd())


def _up(fabric, args) -> int:
    """Start the keeper (its own session; its output in the lab's folder),
    wait until its lab is up, then print what inspect prints."""
    from lab.kept import kept, kept_client
    record = kept.read_record()
    if kept.keeper_alive(record):
        print(f"error: a lab is already up: {kept.running_text(record)}; "
              f"`sudo scripts/lab down{kept.name_flag()}` takes it down, or `--name NAME` "
              "keeps another one beside it", file=sys.stderr)
        return 1
    folder = (args.results / (_run_name(fabric, args) + "-lab")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    argv = list(args.argv)
    argv.remove("--up")
    with open(folder / "keeper.log", "w") as log:
        keeper = subprocess.Popen([sys.executable, __file__, "--keeper", str(folder), *argv],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        return kept_client.wait_up(keeper, folder / "keeper.log")
    except Interrupted as exc:                # the lab goes down with this command
        keeper.terminate()
        keeper.wait()
        print(f"\ninterrupted ({exc.args[0]}): the lab was torn down", file=sys.stderr)
        return 130


def _keep(fabric, args) -> int:
    """The keeper: build the lab, keep it, serve requests until down."""
    from lab.lifecycle import Lab
    from lab.kept.keeper import Keeper

    def ready(lab):
        summary = _summary_start(fabric, args, print)
        _lab_summary(lab, summary, print)
        ok = _reachability(lab, summary, print)
        reach = summary["reachability"]
        return f"{reach['ok']}/{reach['total']} server pairs reach each other", ok

    lab = Lab(fabric, args.keeper, datapath=args.datapath, verbose=args.verbose)
    return Keeper(lab, ready, _kept_experiment, str(args.keeper)).keep()


def _kept_experiment(lab, argv, cwd, number):
    """One experiment of `run_topology.py --lab`, on the kept lab: its flags
    as a normal run takes them, then what a normal run does on its lab.
    (exit status, results folder)."""
    try:
        args = flags.parse_args(["--lab", *argv], __doc__, REPO / "results")
        problem = _kept_refusal(args)
        if problem:
            raise ValueError(problem)
        args.results, args.sweeps = Path(cwd) / args.results, None
        args.csv = args.csv and Path(cwd) / args.csv
        args.argv = ["--lab", *argv]
        args.typed = ("run_topology.py", args.argv)
        exp = experiment_from(lab.fabric, {k: getattr(args, k) for k in FIELDS}, args.compare)
        if exp is not None and not ENGINES[exp.engine].needs_lab:
            raise ValueError(f"--engine {exp.engine} builds no network: run it without --lab")
        name = f"{_run_name(lab.fabric, args)}-exp{number}"
        problem, notes = output_problem(args, name)
        if problem:
            raise ValueError(problem)
    except SystemExit as exc:                   # --help
        return (exc.code if isinstance(exc.code, int) else 0), None
    except (FabricError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    run_dir = args.results / name
    say = (lambda *a: None) if args.json else print

    def measure():
        summary = _summary_start(lab.fabric, args, say)
        _measure(lab, exp, args, run_dir, summary, say)
        summary.update(results=str(run_dir), lab=str(lab.run_dir))
        return _finish(summary, run_dir, args, f"results in {run_dir} (the lab stays up)")
    return _failing(measure), str(run_dir)


if __name__ == "__main__":
    sys.exit(main())
