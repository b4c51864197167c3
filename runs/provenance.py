"""Where a run came from, so that two runs can be told apart and one run
made again: the project's version and commit, the command line, when it
started, the host (cores, kernel, Python, Open vSwitch) and a digest of the
fabric as it was read (its spec, defaults filled in).

Every summary.json carries it as `provenance`; `--version` prints the
first two.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import platform
import shlex
import subprocess
import time
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parent.parent


def version() -> str:
    """The project's version, as setup.cfg declares it."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return cfg.get("metadata", "version", fallback="unknown")


def commit() -> Optional[str]:
    """The checkout's commit, with "+changes" where the tree differs from
    it; None outside a git checkout (an installed copy)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def version_text(program: str) -> str:
    """What `--version` prints."""
    return f"{program} (fabric-lab) {version()}, commit {commit() or 'unknown'}"


def _ovs_version() -> Optional[str]:
    try:
        out = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = out.stdout.splitlines()[0] if out.returncode == 0 and out.stdout else ""
    return first.split()[-1] if first else None


def fabric_digest(spec: dict) -> str:
    """sha256 of the fabric as read (keys sorted): the same file, defaults
    and all, gives the same digest."""
    text = json.dumps(spec, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def provenance(argv: Sequence[str], fabric, program: str = "run_topology.py") -> dict:
    """The `provenance` of a summary.json (the module docstring); `program`
    as typed (`all_reduce_perf`, `python -m ncclperf.all_reduce_perf`)."""
    return {"version": version(), "commit": commit(),
            "command": shlex.join([*program.split(), *argv]),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host": {"cores": os.cpu_count(), "kernel": platform.release(),
                     "python": platform.python_version(), "ovs": _ovs_version()},
            "fabric_sha256": fabric_digest(fabric.spec)}
