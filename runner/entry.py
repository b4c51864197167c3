"""The command a run starts from (run_topology.py, and each nccl-tests
program with its own front): the flags and the fabric read and checked
before anything is built, then one of the runs: --check, --cleanup, a
simulated run, a run on a lab it builds, --calibrate, the kept lab's modes.

Its output is guarded against a reader that stops reading (`| head`): the
lab still tears down, and the command stops quietly. A front that owns
stdout (an nccl-tests program's) gets it alone: the run's own lines go to
stderr, each a comment there too (ncclperf/nccl_sweeps.py `Commented`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Optional

from lab.host import Interrupted
from report import console
from runner import kept_runs, on_lab
from runner.simulated_runs import packet_incast_run, simulated_run
from runner.sweeping import Front, RunFront
from runs import flags
from runs.experiment import FIELDS, experiment_from
from runs.outputs import output_problem, run_name
from runs import trace_replay
from sim.simulator import simulation_method
from topologies.fabric import FabricError, check_emulation, check_policy, load_fabric
from traffic.engines import ENGINES
from topologies.placement import cluster_of, place_cluster, placement_text, refuse_in_cluster

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SCRIPT = Path(__file__).resolve().parent.parent / "run_topology.py"
# --check without root, on a technology that marks ECN: the kernel cannot be asked
ECN_UNKNOWN = ("asked by the network technology; whether this kernel marks (sch_red) and "
               "runs DCTCP (tcp_dctcp): run --check as root to find out")


class PipeClosed(BaseException):
    """The reader of our output went away (`| head`): unwinds like Ctrl-C,
    so a lab tears down, and the command then stops quietly."""


class PipeGuard:
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


def interrupt(signum, _frame):
    """A stop signal once labs may be built: ignore the next ones (a second
    Ctrl-C must not cut the teardown this one starts) and unwind."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


def unraisable(hook_args):
    """An interruption raised where Python drops exceptions (a signal that
    lands in an at-fork callback, as a Popen starts a process) is raised
    again, from ordinary code: otherwise the run would print a traceback and
    go on to its end as if nothing had come."""
    if isinstance(hook_args.exc_value, Interrupted) and \
            threading.current_thread() is threading.main_thread():
        sig = signal.Signals[hook_args.exc_value.args[0]]
        signal.signal(sig, interrupt)
        signal.raise_signal(sig)            # its handler runs once this hook returns
        return
    sys.__unraisablehook__(hook_args)


def main(argv=None, usage: str = "", front: Front = None) -> int:
    """The command (see the module); `usage`: --help's text. `front`: what
    plans the run's sweeps and hears of them (runner/sweeping.py), by
    default run_topology.py's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    front = front or RunFront(argv)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = PipeGuard(sys.stdout), PipeGuard(sys.stderr)
    sys.unraisablehook = unraisable
    try:
        code = _main(argv, usage, front)
        sys.stdout.flush()
        return 1 if code == 0 and front.failed() else code
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


def _read(argv, usage: str, front: Front):
    """The flags, the fabric and the experiment, each checked: (args, fabric,
    exp, cluster, placement, notes), or an exit status."""
    try:
        args = flags.parse_args(argv, usage, SCRIPT.parent / "results")
        args.front, args.argv, args.typed, args.usage = front, argv, front.typed, usage
        if not args.json:       # each line as it is printed, on a pipe too
            getattr(sys.stdout, "reconfigure", lambda **_: None)(line_buffering=True)
        if args.cleanup:
            return cleanup()
        if kept_runs.kept_flags(args):              # --lab: the kept lab's keeper runs it
            return kept_runs.on_kept_lab(args)
        fabric = _flagged(load_fabric(args.fabric, emulate=False), args)   # the model's limits
        exp = experiment_from(fabric, {k: getattr(args, k) for k in FIELDS}, args.compare)
        args.packet_incast = packet_incast(args, exp)        # no sweep: engine_plan checks it
        if exp is None or ENGINES[exp.engine].needs_lab:     # a network is to be built
            check_emulation(fabric)
        elif not args.packet_incast:                          # simulated: how, or why not
            simulation_method("allreduce" if exp.step is not None else exp.collective,
                              exp.algorithm, len(exp.ranks or fabric.endpoints),
                              exp.step is None and fabric.server_model is not None)
        _check_fabric_flags(fabric, args)
        if exp is not None:
            front.check(fabric, exp)
        if exp is not None and exp.step is not None and exp.step.get("trace"):
            trace_replay.check(fabric, exp)         # read, and placed, before anything starts
        cluster = cluster_of(fabric, args.cluster)
        placement = cluster and place_cluster(fabric, cluster)
        if cluster and not args.check:
            refuse_in_cluster(fabric, cluster, args.cli, args.calibrate)
        simulated = exp is not None and not ENGINES[exp.engine].needs_lab and not args.check
        problem, notes = output_problem(args, run_name(fabric, args.calibrate, "YYYYmmdd-HHMMSS"),
                                        by_this_user=simulated)
    except SystemExit as exc:                   # --help
        return exc.code if isinstance(exc.code, int) else 0
    except (FabricError, ValueError) as exc:    # the YAML, or the command-line flags
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return args, fabric, exp, cluster, placement, notes


def packet_incast(args, exp) -> bool:
    """Whether the run is an incast in the packet engine alone: --incast
    with an engine that needs no lab (--engine sim, or the file's)."""
    return bool(args.incast) and exp is not None and not ENGINES[exp.engine].needs_lab


def _main(argv, usage: str, front: Front) -> int:
    read = _read(argv, usage, front)
    if isinstance(read, int):
        return read
    args, fabric, exp, cluster, placement, notes = read
    if args.check:
        for note in notes:
            print(f"note: {note}")
        code = _check(fabric, exp, args)          # its summary lists the warnings
        if code == 0 and cluster:
            print(placement_text(fabric, cluster, placement))
        return code
    with _front_streams(front):                   # a front's run: its notes are comments too
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return _run(args, fabric, exp, cluster and (cluster, placement))


@contextlib.contextmanager
def _front_streams(front: Front):
    """A front that owns stdout gets it (`front.out`); the run's lines go to
    stderr, each a comment (`front.commented`)."""
    if not front.owns_stdout:
        yield
        return
    front.out = sys.stdout
    with contextlib.redirect_stderr(front.commented(sys.stderr)), \
            contextlib.redirect_stdout(sys.stderr):
        yield


def _run(args, fabric, exp, cluster) -> int:
    """The run the flags ask for, once everything is checked."""
    if args.packet_incast:                                         # no lab, no root
        return packet_incast_run(fabric, args)
    if exp is not None and not ENGINES[exp.engine].needs_lab:     # simulated: no root
        return simulated_run(fabric, exp, args)
    if os.geteuid() != 0:
        print("error: building a fabric needs root: run it with sudo "
              "(--check validates it without root)", file=sys.stderr)
        return 2
    for warning in fabric.warnings:
        print(f"warning: {fabric.source}: {warning}", file=sys.stderr)
    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)
    if args.calibrate:
        return on_lab.guarded(lambda: on_lab.calibrate(fabric, args))
    if args.up:
        return kept_runs.up(fabric, args, str(SCRIPT))
    if args.keeper:
        return on_lab.guarded(lambda: kept_runs.keep(fabric, args, args.usage,
                                                     SCRIPT.parent / "results"))
    return on_lab.guarded(lambda: on_lab.lab_run(fabric, exp, args, cluster))


def _check_fabric_flags(fabric, args) -> None:
    """Flags this fabric cannot honour: ValueError, one sentence."""
    if args.calibrate and len(fabric.endpoints) < 2:
        raise ValueError("--calibrate replays a ring AllReduce across the servers, and this "
                         "fabric has one")
    if args.iperf_check and len(fabric.leaves) < 2:
        raise ValueError("--iperf-check measures flows from leaf to leaf, and this fabric "
                         "has one leaf")
    if args.packet_incast:
        from runs.incast_engine import engine_plan
        engine_plan(fabric, args.incast, args.seconds)
    elif args.incast:
        from traffic.measure.incast import incast_plan
        incast_plan(fabric, args.incast)


def _check(fabric, exp, args) -> int:
    """--check: the fabric, the experiment and what the run would take."""
    from lab.host import LabError, check_netem
    if not args.packet_incast and any(link.spec.needs_netem for link in fabric.links):
        if os.geteuid() != 0:
            print("note: delay and loss need the kernel's sch_netem qdisc; "
                  "run --check as root to find out whether this kernel has it")
        else:
            try:
                check_netem(fabric)
            except LabError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
    incast = engine = None
    if args.packet_incast:
        from runs.incast_engine import engine_plan
        engine = engine_plan(fabric, args.incast, args.seconds)
    elif args.incast:
        from traffic.measure.incast import incast_plan
        incast = (*incast_plan(fabric, args.incast), args.seconds)
    from traffic.measure.fidelity import calibrated_rate
    ceiling = calibrated_rate(args.results, fabric.name)
    plan = None if exp is None else [
        s.exp for s in args.front.plan(exp, args.compare, args.results)]
    builds = incast or (exp is not None and ENGINES[exp.engine].needs_lab)
    ecn = ecn_check(fabric) if builds else None     # a simulation marks nothing
    if args.json:
        print(json.dumps(console.check_record(fabric, exp, args.compare, incast, ceiling, plan,
                                              ecn, engine), indent=1))
    else:
        print(console.check_summary(fabric, exp, args.compare, incast, ceiling, plan, ecn,
                                    engine))
    return 0


def ecn_check(fabric) -> Optional[dict]:
    """What a lab of this fabric would do about ECN (lab/ecn.py's plan, as
    its to_dict: the `ecn` a lab run says and records), where the fabric's
    technology marks congestion; None where it does not. Only root can ask
    the kernel (a throwaway network namespace): without it the answer would
    be a false no, so it says how to find out instead, as the netem check
    does."""
    from lab.ecn import asked, plan as ecn_plan
    if not asked(fabric):
        return None
    if os.geteuid() != 0:
        return {"asked": True, "marking": None, "dctcp": None, "note": ECN_UNKNOWN}
    return ecn_plan(fabric).to_dict()


def cleanup() -> int:
    """--cleanup: what labs killed outright left behind."""
    if os.geteuid() != 0:
        print("error: --cleanup needs root: run it with sudo", file=sys.stderr)
        return 2
    from lab.cleanup import cleanup_dead_labs
    if not cleanup_dead_labs():
        print("nothing to clean up: no records of dead labs in /run/fabric-lab")
    return 0
