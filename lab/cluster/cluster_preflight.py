"""Before a cluster run: can every machine take its part? Each machine is
checked over ssh, in order, and reported by its first failure, in one line:

1. ssh logs in without a password (batch mode), as root, or as a user with
   passwordless sudo (``sudo -n true``), to a machine whose host key this
   machine's known_hosts holds (StrictHostKeyChecking=yes: an unknown or
   changed key is refused, in one line saying what to do);
2. Open vSwitch is running: its database (``ovs-vsctl --timeout=3 show``)
   and its switch daemon (``ovs-appctl -t ovs-vswitchd version``);
3. the project is checked out at the same path and the same commit as here
   (``git -C <project> rev-parse HEAD``);
4. the project's Python environment is there and the same as here: the
   same Python version and numpy (``<project>/.venv/bin/python -c "import
   sys, numpy, mininet; ..."``).

Commands run through a runner, ``runner(argv, timeout) -> (status, output)``:
by default `run_command` (a subprocess with a timeout); tests pass a fake.
Nothing here changes a machine.

    python -m lab.cluster.cluster_preflight HOST,HOST [--user USER]

prints one line per machine that fails (exit status 1), or one line saying
all are ready (0).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from toolkit.errors import OneLineParser, printable
from toolkit.validators import machines
from topologies.schema import SCHEMA

REPO = Path(__file__).resolve().parents[2]
# ssh verifies every machine's host key against known_hosts, whatever the
# user's ssh_config says, and never adds one by itself: a first key is
# checked by a person (docs/cluster.md)
HOST_KEYS = ("-o", "StrictHostKeyChecking=yes")
SSH = ("ssh", "-o", "BatchMode=yes", *HOST_KEYS, "-o", "ConnectTimeout=5")
TIMEOUT = 30.0                 # seconds for one command, ssh's connection included
SHOWN = 100                    # characters of a command's output a line quotes
# the same Python is the same version with the same numpy, whatever its build
# date (a machine's Debian python3.11 may be a later build of 3.11.2)
PYTHON_PROBE = ("import sys, numpy, mininet; "
                "print('Python %d.%d.%d' % sys.version_info[:3], 'numpy', numpy.__version__)")

Runner = Callable[[Sequence[str], float], Tuple[int, str]]


@dataclass(frozen=True)
class Check:
    label: str                 # how the line names the command
    remote: str                # the shell command run on the machine
    failure: str               # what its failure means, as the line says it
    expect: Optional[str] = None   # its output must be this (the local value)
    differs: str = ""          # what a different output means


def run_command(argv: Sequence[str], timeout: float = TIMEOUT) -> Tuple[int, str]:
    """(exit status, stdout and stderr stripped); 124 on a timeout, 127 when
    the program is missing."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {timeout:g} s"
    except OSError as exc:
        return 127, f"cannot run {argv[0]}: {exc.strerror}"
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def local_values(project: Path, runner: Runner) -> Tuple[Optional[str], Optional[str], str]:
    """(commit, Python version, problem) of the project here, read with the
    same commands the machines run."""
    status, commit = runner(["git", "-C", str(project), "rev-parse", "HEAD"], TIMEOUT)
    if status:
        return None, None, f"cannot read the project's commit here (git rev-parse: {_line(commit)})"
    status, version = runner([str(project / ".venv" / "bin" / "python"), "-c", PYTHON_PROBE],
                             TIMEOUT)
    if status:
        return commit, None, ("the project's Python environment here cannot import numpy and "
                              f"mininet (.venv/bin/python: {_line(version)})")
    return commit, version, ""


def checks_for(user: str, project: Path, commit: Optional[str],
               version: Optional[str]) -> List[Check]:
    """What each machine must pass, in order (the first failure is reported)."""
    sudo = "" if user == "root" else "sudo -n "
    where = shlex.quote(str(project))
    python = shlex.quote(str(project / ".venv" / "bin" / "python"))
    checks = [Check("ssh", "true", f"cannot log in with ssh as {user} without a password")]
    if sudo:
        checks.append(Check("sudo -n true", "sudo -n true",
                            f"{user} cannot run sudo without a password"))
    return checks + [
        # the database answering is not enough: the switch daemon must too
        Check("ovs-vsctl show", f"{sudo}ovs-vsctl --timeout=3 show >/dev/null && "
              f"{sudo}ovs-appctl --timeout=3 -t ovs-vswitchd version",
              "Open vSwitch is not running"),
        Check("git rev-parse", f"git -C {where} rev-parse HEAD",
              f"the project is not checked out at {printable(str(project), 60)}", commit,
              "the project is at another commit"),
        Check(".venv/bin/python", f"{python} -c {shlex.quote(PYTHON_PROBE)}",
              "the project's Python environment cannot import numpy and mininet", version,
              "the project's Python differs"),
    ]


def check_machine(host: str, user: str, checks: Sequence[Check],
                  runner: Runner) -> Optional[str]:
    """The line for `host`'s first failing check, or None when it passes all."""
    for check in checks:
        status, output = runner([*SSH, "--", f"{user}@{host}", check.remote], TIMEOUT)
        if status == 255 and "Host key verification failed" in output:
            return host_key_line(host, output)
        if status == 255 and check.label != "ssh":
            return f"{host}: ssh failed during {check.label} ({_line(output)})"
        if status:
            detail = _line(output)
            said = detail if detail.startswith(f"{check.label}:") else f"{check.label}: {detail}"
            return f"{host}: {check.failure} ({said})"
        if check.expect is not None and output != check.expect:
            return (f"{host}: {check.differs} ({_short(output)}; here "
                    f"{_short(check.expect)})")
    return None


def preflight(hosts: Sequence[str], user: str = "root", project: Path = REPO,
              runner: Runner = run_command) -> List[str]:
    """One line per machine that cannot take its part (and one first if this
    machine cannot say what the others must match), in the order given;
    [] when all are ready."""
    commit, version, problem = local_values(project, runner)
    lines = [f"local: {problem}"] if problem else []
    checks = checks_for(user, project, commit, version)
    with ThreadPoolExecutor(max_workers=min(16, len(hosts) or 1)) as pool:
        results = list(pool.map(lambda host: check_machine(host, user, checks, runner), hosts))
    return lines + [line for line in results if line]


def host_key_line(host: str, output: str) -> str:
    """What to do when ssh refused `host`'s host key, in one line."""
    if "HOST IDENTIFICATION HAS CHANGED" in output:
        return (f"{host}: its ssh host key differs from the one known_hosts holds for it: if "
                f"the machine was reinstalled, check its new key's fingerprint, then `ssh-keygen "
                f"-R {host}` and add the new key (docs/cluster.md), otherwise do not go on")
    return (f"{host}: its ssh host key is not in this machine's known_hosts: check the key's "
            f"fingerprint against the machine's own (`ssh-keygen -lf "
            f"/etc/ssh/ssh_host_ed25519_key.pub` there), then add it here with `ssh-keyscan "
            f"-t ed25519 {host} >> ~/.ssh/known_hosts` as the user who runs the lab "
            "(docs/cluster.md)")


def _line(output: str) -> str:
    """A command's output as a line quotes it: its last non-empty line (where
    a traceback says what went wrong), printable, shortened."""
    lines = [l for l in output.splitlines() if l.strip()]
    return printable(lines[-1].strip(), SHOWN) if lines else "no output"


def _short(value: str) -> str:
    """A commit as its first 12 hex digits, a version as its first line."""
    first = value.splitlines()[0] if value else "nothing"
    return printable(first[:12] if len(first) == 40 else first, 80)


def main(argv=None) -> int:
    parser = OneLineParser(prog="python -m lab.cluster.cluster_preflight",
                           description="check that each machine of a cluster run is ready")
    parser.add_argument("machines", metavar="HOST,HOST",
                        help="the machines, as --cluster takes them")
    parser.add_argument("--user", default="root", help="the user ssh logs in as (default root)")
    try:
        args = parser.parse_args(argv)
        hosts = _checked(machines, args.machines.split(","), "HOST,HOST")
        user = _checked(SCHEMA["cluster"][0]["user"][0], args.user, "--user")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failing = preflight(hosts, user, runner=run_command)
    for line in failing:
        print(line)
    if not failing:
        print(f"all {len(hosts)} machine{'s' if len(hosts) > 1 else ''} ready: ssh as {user}, "
              "Open vSwitch running, the same commit and Python environment as here")
    return 1 if failing else 0


def _checked(validate, value, name: str):
    def fail(message):
        raise ValueError(f"{name}: {message}")
    return validate(value, fail)


if __name__ == "__main__":
    sys.exit(main())
