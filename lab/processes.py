"""Stopping what the lab started: one way, with a grace period.

A process the lab started (a rank agent, an iperf3, a probe, the controller)
is asked to stop, given `grace` seconds, then killed, and its pipes are
closed, so nothing outlives the lab and no file descriptor leaks. A Mininet
node's shell is its own process group and gets the same treatment as a group.
"""

from __future__ import annotations

import os
import signal
import subprocess

from lab.progress_wait import CAP_S, STALL_S, wait_progressing


class CheckError(Exception):
    """A process the lab started to check or replay something failed, said
    something unexpected, or did not finish in time."""


def stop_process(proc: subprocess.Popen, grace: float = 3.0, ask: bool = True) -> None:
    """SIGTERM (unless `ask` is False: the process was already told to quit),
    up to `grace` seconds to exit, then SIGKILL; then close its pipes."""
    if proc.poll() is None:
        try:
            if ask:
                proc.terminate()
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        except ProcessLookupError:
            pass
    for stream in (proc.stdout, proc.stderr, proc.stdin):
        if stream:
            try:
                stream.close()
            except OSError:        # a write to a process already gone, still buffered
                pass


def stop_process_group(leader: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGHUP to the group `leader` heads (a Mininet node's shell), then
    SIGKILL after `grace` seconds; reap the leader."""
    if leader.poll() is None:
        try:
            os.killpg(leader.pid, signal.SIGHUP)
            leader.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(leader.pid, signal.SIGKILL)
            leader.wait(5)
        except ProcessLookupError:
            pass


def is_mininet_shell(proc: subprocess.Popen) -> bool:
    return any(str(a).startswith("mininet:") for a in proc.args)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far; 0 once it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # after the command: state is field 3, utime 14 and stime 15 (proc(5))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> list:
    """/proc/PID/stat's fields from the state on (field 3 is index 0), or []."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def tree_cpu_seconds(*pids: int) -> float:
    """CPU time the processes `pids` and all their descendants have used so
    far, those still running and those already reaped (cutime, cstime); 0
    for one gone. The progress of a shell pipeline, of a program started
    through a wrapper that forks, or of a machine's whole tree."""
    stats = {p: _stat(p) for p in os.listdir("/proc") if p.isdigit()}
    children = {}
    for p, fields in stats.items():
        if fields:
            children.setdefault(fields[1], []).append(p)      # field 4: the parent
    total, todo, seen = 0, [str(pid) for pid in pids if stats.get(str(pid))], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        fields = stats.get(p) or []
        if len(fields) > 14:
            total += sum(int(x) for x in fields[11:15])     # utime stime cutime cstime
        todo.extend(children.get(p, ()))
    return total / os.sysconf("SC_CLK_TCK")


def communicate_progressing(proc: subprocess.Popen, what: str, stall_s: float = STALL_S,
                            cap_s: float = CAP_S):
    """`proc.communicate()` bounded by the progress of the process and its
    children (their CPU), not by the clock: (stdout, stderr) once it ends;
    a CheckError naming `what`, the process stopped, once it sat still for
    `stall_s` (say, past any wait of its own) or ran for `cap_s`."""
    def ended():
        try:
            return [proc.communicate(timeout=0.5)]
        except subprocess.TimeoutExpired:
            return None
    waited = wait_progressing(ended, lambda: tree_cpu_seconds(proc.pid), stall_s=stall_s,
                              cap_s=cap_s, interval=0)
    if not waited.ready:
        stop_process(proc, grace=0, ask=False)
        raise CheckError(f"{what} did not end: {waited.reason('it')}")
    return waited.value[0]
