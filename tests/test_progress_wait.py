"""lab/progress_wait.py: a wait bounded by progress, not by the clock, played
on a fake clock with made-up progress; and lab/processes.py's CPU of a
process with its descendants, the progress most waits read."""

import os
import signal
import subprocess
import sys

import pytest

from lab.processes import tree_cpu_seconds
from lab.progress_wait import CAPPED, READY, SPENT, STALLED, wait_progressing


class Clock:
    """Time that passes only when the wait sleeps."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def wait(clock, ready, progress, **kw):
    kw.setdefault("cap_s", 10_000)
    kw.setdefault("stall_s", 30)
    return wait_progressing(ready, progress, interval=1.0, clock=clock, sleep=clock.sleep, **kw)


def test_a_slow_start_that_keeps_moving_is_waited_for_far_past_the_stall_limit():
    clock = Clock()
    start = clock.now
    # a tenth of a CPU second every 20 s: a crawl, but a moving one; ready after 500 s
    done = wait(clock, lambda: clock.now - start >= 500 and "listening",
                lambda: int((clock.now - start) // 20))
    assert done.why == READY and done.value == "listening" and done.ready
    assert done.seconds == pytest.approx(500)


def test_nothing_moving_for_the_stall_limit_ends_the_wait():
    clock = Clock()
    done = wait(clock, lambda: None, lambda: 7, stall_s=30)
    assert done.why == STALLED and not done.ready and done.value is None
    assert done.seconds == pytest.approx(30) and done.still_s == pytest.approx(30)
    assert "no progress for 30 s" in done.reason("the controller")


def test_the_stall_is_counted_from_the_last_move_not_from_the_start():
    clock = Clock()
    start = clock.now
    # moves for 100 s, then stops
    done = wait(clock, lambda: None, lambda: min(clock.now - start, 100), stall_s=30)
    assert done.why == STALLED
    assert done.seconds == pytest.approx(130) and done.still_s == pytest.approx(30)


def test_the_work_budget_ends_a_wait_that_moves_without_getting_anywhere():
    clock = Clock()
    start = clock.now
    used = lambda: (clock.now - start) * 0.5           # noqa: E731  half a core, spinning
    done = wait(clock, lambda: None, used, spent=lambda: used() > 60)
    assert done.why == SPENT and done.seconds == pytest.approx(121)
    assert "the work that should have sufficed" in done.reason()


def test_the_cap_ends_even_a_moving_wait():
    clock = Clock()
    done = wait(clock, lambda: None, clock, cap_s=300)
    assert done.why == CAPPED and done.seconds == pytest.approx(300)
    assert "300 s passed" in done.reason()


def test_no_stall_limit_waits_for_the_cap():
    clock = Clock()
    done = wait(clock, lambda: None, lambda: 0, stall_s=None, cap_s=50)
    assert done.why == CAPPED


def test_ready_at_the_last_moment_is_not_lost():
    clock = Clock()
    start = clock.now
    calls = []

    def ready():
        calls.append(clock.now)
        # the thing becomes ready on the check made as the wait gives up
        return len(calls) > 31 and "yes"
    done = wait(clock, ready, lambda: 0, stall_s=30)
    assert done.why == READY and done.value == "yes"
    assert clock.now - start == pytest.approx(30)


def test_ready_raising_ends_the_wait_with_its_error():
    clock = Clock()

    def ready():
        if clock.now >= 1005:
            raise RuntimeError("the process exited")
    with pytest.raises(RuntimeError, match="exited"):
        wait(clock, ready, lambda: 0)


def test_ready_at_once_neither_sleeps_nor_reads_progress_twice():
    clock = Clock()
    reads = []
    done = wait(clock, lambda: 42, lambda: reads.append(1) or len(reads))
    assert done.value == 42 and done.seconds == 0 and len(reads) == 1


def test_tree_cpu_counts_a_child_that_does_the_work():
    script = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
              "'import time\\nwhile time.process_time() < 0.3: pass']); "
              "print('done', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "done\n"
        # the child has exited and been reaped: its CPU is the parent's cutime now
        assert tree_cpu_seconds(proc.pid) >= 0.28
    finally:
        proc.communicate("")
    assert tree_cpu_seconds(proc.pid) == 0.0


def test_tree_cpu_counts_a_running_grandchild():
    spin = "import sys, time\nwhile time.process_time() < 0.3: pass\nprint(1, flush=True)\nsys.stdin.read()"
    # `; true`: the shell stays the parent instead of exec'ing python
    proc = subprocess.Popen(["sh", "-c", '"$0" -c "$1"; true', sys.executable, spin],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "1\n"
        assert tree_cpu_seconds(proc.pid) >= 0.28
    finally:
        proc.communicate("")


def test_the_vm_wait_gives_up_on_a_qemu_that_stopped(tmp_path, monkeypatch):
    from devtools import vmtest
    monkeypatch.setattr(vmtest, "CONSOLE", tmp_path / "console.log")
    monkeypatch.setattr(vmtest, "STALL_S", 0.5)
    (tmp_path / "console.log").write_text(f"{vmtest.MARK} stage init 3.0 ===\n")
    proc = subprocess.Popen(["sleep", "600"])          # alive, using no CPU
    try:
        with pytest.raises(vmtest.VMTestError, match=r"made no progress .*last stage: init"):
            vmtest.follow(proc, cap_s=600)
    finally:
        proc.kill()
        proc.wait()


def test_the_vm_wait_gives_up_on_a_qemu_that_spins_past_its_cpu(tmp_path, monkeypatch):
    from devtools import vmtest
    monkeypatch.setattr(vmtest, "CONSOLE", tmp_path / "console.log")
    monkeypatch.setattr(vmtest, "QEMU_CPU_S", 0.2)
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with pytest.raises(vmtest.VMTestError, match="the work that should have sufficed"):
            vmtest.follow(proc, cap_s=600)
    finally:
        proc.kill()
        proc.wait()


def test_the_vm_wait_notes_each_stage_and_the_end(tmp_path, monkeypatch):
    from devtools import vmtest
    console = tmp_path / "console.log"
    monkeypatch.setattr(vmtest, "CONSOLE", console)
    proc = subprocess.Popen(["sh", "-c", f"echo '{vmtest.MARK} stage init 1.0 ===' > {console}; "
                                         f"echo '{vmtest.MARK} stage done 2.0 ===' >> {console}"])
    seen = vmtest.follow(proc, cap_s=600)
    assert {"init", "done", "qemu_exit", "qemu_cpu"} <= set(seen)


def test_the_pings_output_is_read_once_they_end(monkeypatch):
    from lab import reachability
    proc = subprocess.Popen(["sh", "-c", "sleep 0.3; echo ok 10.0.0.2"], stdout=subprocess.PIPE,
                            text=True)
    assert reachability.pings_output("h1", proc, 1, 1, 1000) == "ok 10.0.0.2\n"


def test_pings_that_sit_still_past_their_own_wait_are_a_hang(monkeypatch):
    from lab import reachability
    from lab.processes import CheckError
    monkeypatch.setattr(reachability, "STALL_S", 0.5)
    proc = subprocess.Popen(["sh", "-c", "sleep 600; true"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        with pytest.raises(CheckError, match="the pings from h1 did not end: it made no "
                                             "progress"):
            reachability.pings_output("h1", proc, 1, 1, wait_ms=100)
        assert proc.poll() is not None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)       # the sleep the shell left


def test_the_test_bed_waits_for_sshd_while_the_machines_boot(monkeypatch):
    from devtools import testbed
    tries = []

    def fake_ssh(*cmd, check, timeout):
        tries.append(cmd[-2])
        return subprocess.CompletedProcess(cmd, 0 if len(tries) > 3 else 255)
    monkeypatch.setattr(testbed, "run", fake_ssh)
    monkeypatch.setattr(testbed, "alive", lambda pid, start: True)
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])   # booting, busy
    try:
        ready = testbed.wait_for_ssh([{"name": "m1", "address": "10.77.0.11", "init": proc.pid,
                                       "init_start": 0, "launched": 0.0}])
        assert list(ready) == ["m1"] and len(tries) == 4
    finally:
        proc.kill()
        proc.wait()


def test_the_test_bed_gives_up_on_machines_that_sit_still(monkeypatch):
    from devtools import testbed
    monkeypatch.setattr(testbed, "run", lambda *cmd, check, timeout:
                        subprocess.CompletedProcess(cmd, 255))
    monkeypatch.setattr(testbed, "alive", lambda pid, start: True)
    monkeypatch.setattr(testbed, "STALL_S", 0.3)
    proc = subprocess.Popen(["sleep", "600"])
    try:
        with pytest.raises(testbed.TestbedError, match="sshd of m1 did not answer: the machines "
                                                       "made no progress"):
            testbed.wait_for_ssh([{"name": "m1", "address": "10.77.0.11", "init": proc.pid,
                                   "init_start": 0, "launched": 0.0}])
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_works_is_read_to_its_end_and_one_that_sits_still_is_stopped():
    from lab.processes import CheckError, communicate_progressing
    busy = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 1.0: "
                             "pass\nprint('done')"], stdout=subprocess.PIPE, text=True)
    assert communicate_progressing(busy, "busy", stall_s=10)[0] == "done\n"
    still = subprocess.Popen(["sleep", "600"], stdout=subprocess.PIPE, text=True)
    with pytest.raises(CheckError, match="the sleeper did not end: it made no progress"):
        communicate_progressing(still, "the sleeper", stall_s=0.5)
    assert still.poll() is not None


def test_a_machine_is_its_unshare_s_child_once_it_exists(tmp_path):
    from devtools import testbed
    proc = subprocess.Popen(["sh", "-c", "sleep 600; true"], start_new_session=True)
    try:
        child = testbed.child_of(proc, tmp_path / "console.log")
        assert open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[1] == str(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    gone = subprocess.Popen(["sh", "-c", "echo no room >&2; exit 1"],
                            stderr=open(tmp_path / "console.log", "w"))
    with pytest.raises(testbed.TestbedError, match="a machine failed to start: no room"):
        testbed.child_of(gone, tmp_path / "console.log")


def test_tree_cpu_sums_several_trees():
    spin = "import sys, time\nwhile time.process_time() < 0.2: pass\nprint(1, flush=True)\nsys.stdin.read()"
    procs = [subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for proc in procs:
            assert proc.stdout.readline() == "1\n"
        assert tree_cpu_seconds(*(p.pid for p in procs)) >= 0.38
    finally:
        for proc in procs:
            proc.communicate("")
