"""run_topology.py and the planner as a user runs them: child processes of
this Python, from the repository's root, their output captured."""

import os
import subprocess
import sys

from harness import REPO

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
RUN_TOPOLOGY = [sys.executable, "-u", str(REPO / "run_topology.py")]


def python(*args, timeout=None, input=None) -> subprocess.CompletedProcess:
    """`python ARGS` from the repository's root (`-m planner ...`,
    `run_topology.py ...`), its output captured as text."""
    return subprocess.run([sys.executable, "-u", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV, cwd=REPO, input=input)


def run(*args, timeout=120, input=None) -> subprocess.CompletedProcess:
    """run_topology.py with these arguments (and what a user types, if
    `input`), as a user runs it."""
    return python(*RUN_TOPOLOGY[2:], *args, timeout=timeout, input=input)


def start(*args) -> subprocess.Popen:
    """run_topology.py started in the background (to interrupt it)."""
    return subprocess.Popen(RUN_TOPOLOGY + list(args), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=REPO)
