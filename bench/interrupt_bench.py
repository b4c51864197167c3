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
    ref = Run(work / "reference", env)
    if ref.wait() != 0:
        sys.exit(f"error: the reference run failed: {ref.err.strip()[-300:]}")
    length = ref.lines[-1][0]
    starts = {}
    for t, line in ref.lines:
        for head, name in PHASES:
            if line.startswith(head):
                starts.setdefault(name, t)
    print(f"reference run: {length:.1f} s; phases start at "
          + ", ".join(f"{name} {t:.1f} s" for name, t in starts.items()))
    rows, table = [], collections.OrderedDict()
    for i in range(args.moments):
        sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
        at = length * (i + 0.5) / args.moments
        run = Run(work / f"run{i}", env)
        time.sleep(max(0.0, at - (time.monotonic() - run.t0)))
        seen = [line for _, line in run.lines]
        run.proc.send_signal(sig)
        code = run.wait()
        if code == -sig and not seen and not run.err:
            phase = "python start"               # before the interpreter ran our first line
        else:
            phase = phase_of(seen) if code == 130 else "finished"
        refused = "already exists" in run.err
        said = "torn down" in run.err or (phase in ("python start", "start")
                                          and "nothing had been built" in run.err)
        untrue = "Traceback" in run.err or (code == 130 and not said) or \
            (code not in (0, 130) and phase != "python start")
        left = leftovers(before, owner)
        if left:                                  # say it, and clear it for the next run
            subprocess.run([sys.executable, str(REPO / "run_topology.py"), "--cleanup"],
                           env=env, capture_output=True)
        rows.append({"moment_s": round(at, 3), "signal": signal.Signals(sig).name,
                     "phase": phase, "exit": code, "refused": refused, "untrue": untrue,
                     "left": left, "stderr_tail": run.err.strip()[-200:]})
        row = table.setdefault(phase, collections.Counter())
        row.update(runs=1, left=bool(left), refused=refused, untrue=untrue)
        print(f"  {i + 1:>3}/{args.moments} at {at:5.2f} s {signal.Signals(sig).name:<7} "
              f"{phase:<12} exit {code:<3} {'LEFT ' + json.dumps(left) if left else ''}"
              f"{' REFUSED' if refused else ''}{' UNTRUE: ' + run.err.strip()[-120:] if untrue else ''}",
              flush=True)
    print(f"\n{'phase':<14} {'runs':>5} {'leftovers':>10} {'refused':>8} {'untrue':>7}")
    for phase, c in table.items():
        print(f"{phase:<14} {c['runs']:>5} {c['left']:>10} {c['refused']:>8} {c['untrue']:>7}")
    total = collections.Counter()
    for c in table.values():
        total.update(c)
    print(f"{'all':<14} {total['runs']:>5} {total['left']:>10} {total['refused']:>8} "
          f"{total['untrue']:>7}")
    if args.json:
        args.json.write_text(json.dumps({"reference_s": length, "phase_starts_s": starts,
                                         "runs": rows}, indent=1))
    return 1 if total["left"] or total["refused"] or total["untrue"] else 0


if __name__ == "__main__":
    sys.exit(main())
