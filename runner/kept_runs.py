"""The kept lab (docs/running.md, "A lab that stays up"): `--up` starts a
keeper in its own session and waits until its lab is up; the keeper
(`--keeper FOLDER`) builds the lab and serves experiments; `--lab` sends one
experiment to it and prints what it prints. An experiment on a kept lab is
checked and measured as a run on its own lab is (runner/on_lab.py
`measure`), in a folder of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from lab.host import Interrupted
from runner.on_lab import failing, finish, lab_summary, measure, reachability, summary_head
from runner.sweeping import RunFront
from runs import flags
from runs.experiment import FIELDS, experiment_from
from runs.outputs import output_problem, run_name
from traffic.engines import ENGINES
from topologies.fabric import FabricError

LAB_OPTIONS = ("fabric", "policy", "datapath", "results", "verbose", "up", "keeper", "name")
BUILDS = ("fabric", "policy", "datapath", "cli", "calibrate", "cluster", "check", "up")


def _given(args, key) -> bool:
    value = getattr(args, key, None)
    if key == "datapath":
        return value not in (None, "auto")
    if key in ("seconds", "streams", "results"):      # their defaults are filled in
        return False
    return value is not None and value is not False and value != []


def kept_flags(args) -> bool:
    """Whether this is --lab; ValueError for flags --up or --lab would ignore."""
    problem = kept_refusal(args) if args.up or args.lab or args.keeper else (
        "--name names a kept lab: use it with --up or --lab" if args.name else None)
    if args.name:
        from lab.kept import kept
        kept.select(args.name)
    if problem:
        raise ValueError(problem)
    return args.lab


def kept_refusal(args):
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


def on_kept_lab(args) -> int:
    """run_topology.py --lab ...: the experiment, run by the keeper; its output here."""
    from lab.kept import kept, kept_client
    signal.signal(signal.SIGINT, signal.default_int_handler)   # a Ctrl-C cancels it
    for sig in (signal.SIGTERM, signal.SIGHUP):                # and these end this client
        signal.signal(sig, signal.SIG_DFL)
    argv = kept.take_name(list(args.argv))
    argv.remove("--lab")
    return kept_client.run(argv, os.getcwd())


def up(fabric, args, script: str) -> int:
    """Start the keeper (`script --keeper`, its own session; its output in
    the lab's folder), wait until its lab is up, then print what inspect
    prints."""
    from lab.kept import kept, kept_client
    record = kept.read_record()
    if kept.keeper_alive(record):
        print(f"error: a lab is already up: {kept.running_text(record)}; "
              f"`sudo scripts/lab down{kept.name_flag()}` takes it down, or `--name NAME` "
              "keeps another one beside it", file=sys.stderr)
        return 1
    folder = (args.results / (run_name(fabric) + "-lab")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    argv = list(args.argv)
    argv.remove("--up")
    with open(folder / "keeper.log", "w") as log:
        keeper = subprocess.Popen([sys.executable, script, "--keeper", str(folder), *argv],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        return kept_client.wait_up(keeper, folder / "keeper.log")
    except Interrupted as exc:                # the lab goes down with this command
        keeper.terminate()
        keeper.wait()
        print(f"\ninterrupted ({exc.args[0]}): the lab was torn down", file=sys.stderr)
        return 130


def keep(fabric, args, usage: str, results: Path) -> int:
    """The keeper: build the lab, keep it, serve experiments until down
    (each parsed as `usage`'s command, --results by default `results`)."""
    from lab.lifecycle import Lab
    from lab.kept.keeper import Keeper

    def ready(lab):
        summary = summary_head(fabric, args, lab.run_dir, print)
        lab_summary(lab, summary, print)
        ok = reachability(lab, summary, print)
        reach = summary.reachability
        return f"{reach['ok']}/{reach['total']} server pairs reach each other", ok

    def experiment(lab, argv, cwd, number):
        return kept_experiment(lab, argv, cwd, number, usage, results)

    lab = Lab(fabric, args.keeper, datapath=args.datapath, verbose=args.verbose)
    return Keeper(lab, ready, experiment, str(args.keeper)).keep()


def kept_experiment(lab, argv, cwd, number, usage: str, results: Path):
    """One experiment of `run_topology.py --lab`, on the kept lab: its flags
    as a normal run takes them, then what a normal run does on its lab.
    (exit status, results folder)."""
    try:
        args = flags.parse_args(["--lab", *argv], usage, results)
        problem = kept_refusal(args)
        if problem:
            raise ValueError(problem)
        args.results = Path(cwd) / args.results
        args.csv = args.csv and Path(cwd) / args.csv
        args.argv = ["--lab", *argv]
        args.front = RunFront(args.argv)
        args.typed = args.front.typed
        exp = experiment_from(lab.fabric, {k: getattr(args, k) for k in FIELDS}, args.compare)
        if exp is not None and not ENGINES[exp.engine].needs_lab:
            raise ValueError(f"--engine {exp.engine} builds no network: run it without --lab")
        name = f"{run_name(lab.fabric)}-exp{number}"
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

    def run():
        summary = summary_head(lab.fabric, args, run_dir, say)
        measure(lab, exp, args, run_dir, summary, say)
        summary.results, summary.lab = str(run_dir), str(lab.run_dir)
        return finish(summary, run_dir, args, f"results in {run_dir} (the lab stays up)")
    return failing(run), str(run_dir)
