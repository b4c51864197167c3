"""lab/processes.py's view of a process: the CPU time it has used, which the
lab's start-up waits are bounded by instead of the wall clock."""

import os
import subprocess
import sys

from lab.processes import cpu_seconds

BUSY_THEN_WAIT = """
import sys, time
while time.process_time() < 0.3:
    pass
print("busy", flush=True)
sys.stdin.read()
"""


def test_cpu_seconds_counts_the_cpu_a_process_used_not_the_time_it_lived():
    proc = subprocess.Popen([sys.executable, "-c", BUSY_THEN_WAIT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "busy\n"
        used = cpu_seconds(proc.pid)
        tick = 1 / os.sysconf("SC_CLK_TCK")        # /proc counts whole ticks
        assert 0.3 - 2 * tick <= used < 5.0, used
    finally:
        proc.communicate("")
    assert cpu_seconds(proc.pid) == 0.0          # reaped: gone


def test_an_idle_process_uses_next_to_no_cpu():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert cpu_seconds(proc.pid) < 0.1
    finally:
        proc.kill()
        proc.wait()
