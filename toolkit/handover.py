"""The project's commands run in the project's Python: `python run_topology.py`,
`python -m planner`, `python -m ncclperf.NAME`, `python -m report.compare`,
`python -m lab.NAME`, `python -m devtools.NAME`, `python -m bench.NAME` and `python -m
topologies.jsonschema`, started by a Python that is
not the repository's `.venv` (which scripts/setup.sh builds: os-ken, numpy,
matplotlib, ...), hand themselves over to it: the same command, the same
arguments, the same folder. Standard library only, so that it runs before
anything that needs the environment is imported; here in the bottom
package, which every layer may import and every install of the project,
however old, knows (setup.cfg's packages)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"


def _wanted() -> bool:
    """Not in .venv already, .venv built, and not turned off (a benchmark
    times the Python it was given: FABRIC_LAB_NO_REEXEC)."""
    return (Path(sys.prefix).resolve() != VENV.resolve() and (VENV / "bin" / "python").exists()
            and "FABRIC_LAB_NO_REEXEC" not in os.environ)


def _module_being_run() -> str | None:
    """The NAME of `python -m NAME ...` while Python locates it (sys.argv[0]
    is "-m" until the module runs: its packages' __init__ run first)."""
    if sys.argv[:1] != ["-m"]:
        return None
    argv = getattr(sys, "orig_argv", [])
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-m" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:]
    return None


def hand_over_script(script: str) -> None:
    """`python SCRIPT ARGS` (run_topology.py) becomes `.venv/bin/python SCRIPT ARGS`."""
    if _wanted():
        python = str(VENV / "bin" / "python")
        os.execv(python, [python, script, *sys.argv[1:]])


def hand_over_module(package: str) -> None:
    """Called by `package`'s __init__: `python -m package[.NAME] ARGS` becomes
    `.venv/bin/python -m package[.NAME] ARGS`, with the repository on
    PYTHONPATH, as it was on the path that found the module here (the folder
    the user stands in, or PYTHONPATH). A plain import of the package (a
    library use, or a test) hands nothing over."""
    name = _module_being_run()
    if name is None or name.split(".")[0] != package or not _wanted():
        return
    python = str(VENV / "bin" / "python")
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": str(REPO) + (os.pathsep + path if path else "")}
    os.execve(python, [python, "-m", name, *sys.argv[1:]], env)
