#!/usr/bin/env python3
"""A stop signal at any moment of a run: the default run (`-e 512K`),
interrupted by SIGINT or SIGTERM (in turn) at moments spread evenly over a
whole run (build, reachability, each size, figures, teardown), counting what
each interrupted run left on the host and whether the next run was refused.

    sudo scripts/lab bench interrupt [--moments 200] [--json out.json]

A reference run first gives the time each phase starts (the time its line
appears); moment i of n falls at (i + 0.5)/n of the reference's length. Per
run: the phase it fell in (the last line printed before the signal), the
exit status (130: interrupted; 0: it had finished), whether the message was
true (130 says the lab was torn down, and there is no traceback), and what
the host holds afterwards that it did not before (host_state, this bench's
own labs only: bridges, veths, processes, records of dead labs). A run
refused because another lab's names are taken counts as refused.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness import REPO
from harness.commandline import command_line
from harness.labs import OWNER_VARIABLE, host_state

RUN = [sys.executable, str(REPO / "run_topology.py"), "-e", "512K"]
PHASES = (("fabric", "build"), ("lab ", "reachability"), ("reach", "sizes"),
          ("# Fidelity", "figures"), ("figures", "teardown"))


def phase_of(lines) -> str:
    """The phase a signal fell in: after the last of PHASES' lines printed."""
    phase = "start"
    for line in lines:
        for head, name in PHASES:
            if line.startswith(head):
                phase = name
    return phase


class Run:
    """run_topology.py with its output lines timestamped as they come."""

    def __init__(self, results: Path, env: dict):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(RUN + ["--results", str(results)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        self.lines = []                          # (seconds after start, line)
        self.err = ""
        self.readers = [threading.Thread(target=self._out, daemon=True),
                        threading.Thread(target=self._err, daemon=True)]
        for t in self.readers:
            t.start()

    def _out(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.t0, line))

    def _err(self):
        self.err = self.proc.stderr.read()

    def wait(self) -> int:
        code = self.proc.wait()
        for t in self.readers:
            t.join()
        return code


def leftovers(before: dict, owner: str, settle_s: float = 30.0) -> dict:
    """What the host holds now beyond `before` (a cap for what takes a
    moment to go: a process's last exit)."""
    deadline = time.monotonic() + settle_s
    while True:
        now = host_state(owner)
        if now == before or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return {k: v for k, v in now.items() if v != before[k]}


def reference(env: dict, work: Path):
    """A whole run, uninterrupted: its length and when each phase starts."""
    ref = Run(work / "reference", env)
    if ref.wait() != 0:
        sys.exit(f"error: the reference run failed: {ref.err.strip()[-300:]}")
    starts = {}
    for t, line in ref.lines:
        for head, name in PHASES:
            if line.startswith(head):
                starts.setdefault(name, t)
    return ref.lines[-1][0], starts


def interrupted(i: int, at: float, sig, env: dict, work: Path, before: dict, owner: str) -> dict:
    """One run, `sig` at `at` seconds: where it fell, what it said and left."""
    run = Run(work / f"run{i}", env)
    time.sleep(max(0.0, at - (time.monotonic() - run.t0)))
    seen = [line for _, line in run.lines]
    run.proc.send_signal(sig)
    code = run.wait()
    # before the interpreter ran our first line: killed, or Python's own
    # KeyboardInterrupt from its start-up
    early = not seen and (code == -sig or (code == 1 and run.err.strip().endswith(
        "KeyboardInterrupt") and "run_topology" not in run.err))
    phase = "python start" if early else phase_of(seen) if code == 130 else "finished"
    said = "torn down" in run.err or (phase == "start" and "nothing had been built" in run.err)
    untrue = not early and ("Traceback" in run.err or (code == 130 and not said)
                            or code not in (0, 130))
    left = leftovers(before, owner)
    if left:                                  # say it, and clear it for the next run
        subprocess.run([sys.executable, str(REPO / "run_topology.py"), "--cleanup"],
                       env=env, capture_output=True)
    return {"moment_s": round(at, 3), "signal": signal.Signals(sig).name, "phase": phase,
            "exit": code, "refused": "already exists" in run.err, "untrue": untrue,
            "left": left, "stderr_tail": run.err.strip()[-200:]}


def main() -> int:
    parser = command_line(__doc__)
    parser.add_argument("--moments", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("error: the interrupt bench builds labs: run it with sudo")
    # the runs get SIGINT's default action even if this bench was started
    # in the background of a shell, which ignores it there
    signal.signal(signal.SIGINT, signal.default_int_handler)
    owner = f"interrupt-bench-{os.getpid()}"
    env = dict(os.environ, **{OWNER_VARIABLE: owner})
    work = Path(f"/tmp/interrupt-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    before = host_state(owner)
    length, starts = reference(env, work)
    print(f"reference run: {length:.1f} s; phases start at "
          + ", ".join(f"{name} {t:.1f} s" for name, t in starts.items()))
    rows, table = [], collections.OrderedDict()
    for i in range(args.moments):
        sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
        at = length * (i + 0.5) / args.moments
        r = interrupted(i, at, sig, env, work, before, owner)
        rows.append(r)
        table.setdefault(r["phase"], collections.Counter()).update(
            runs=1, left=bool(r["left"]), refused=r["refused"], untrue=r["untrue"])
        print(f"  {i + 1:>3}/{args.moments} at {at:5.2f} s {r['signal']:<7} {r['phase']:<12} "
              f"exit {r['exit']:<3} {'LEFT ' + json.dumps(r['left']) if r['left'] else ''}"
              f"{' REFUSED' if r['refused'] else ''}"
              f"{' UNTRUE: ' + r['stderr_tail'][-120:] if r['untrue'] else ''}", flush=True)
    total = report(table)
    if args.json:
        args.json.write_text(json.dumps({"reference_s": length, "phase_starts_s": starts,
                                         "runs": rows}, indent=1))
    return 1 if total["left"] or total["refused"] or total["untrue"] else 0


def report(table) -> collections.Counter:
    print(f"\n{'phase':<14} {'runs':>5} {'leftovers':>10} {'refused':>8} {'untrue':>7}")
    total = collections.Counter()
    for phase, c in table.items():
        print(f"{phase:<14} {c['runs']:>5} {c['left']:>10} {c['refused']:>8} {c['untrue']:>7}")
        total.update(c)
    print(f"{'all':<14} {total['runs']:>5} {total['left']:>10} {total['refused']:>8} "
          f"{total['untrue']:>7}")
    return total


if __name__ == "__main__":
    sys.exit(main())
