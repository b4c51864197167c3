"""Where a run writes (--results, --csv), checked before anything is built:
a name too long, a file where a folder must be, a folder that cannot be
written is one sentence at the start, not a traceback after the run."""

from __future__ import annotations

import errno
import os
import tempfile
import time
from pathlib import Path
from typing import Optional

from toolkit.errors import shown

PATH_MAX, NAME_MAX = 4096, 255      # Linux's limits, in bytes: a whole path, one name in it
BELOW_RUN = 64                      # the longest path a run writes inside its folder
PATH_SHOWN = 64                     # characters of a path a message quotes


def output_problem(args, run_name, by_this_user: bool = False):
    """(problem, notes): what would make writing the results fail at the end
    of a run (a name too long, a file where a folder must be, a folder that
    cannot be written), or None. Permission this user lacks is a note, not a
    problem, when the user is not root: the run is root's; unless the run is
    this user's own (`by_this_user`: a simulated run needs no root)."""
    notes, csv_notes = (None, None) if by_this_user else ([], [])
    folder = args.results
    problem = (_path_problem(folder, 1 + len(run_name) + BELOW_RUN)
               or _folder_problem(folder, notes))
    if problem:
        return f"--results {shown(str(folder), PATH_SHOWN)}: {problem}", []
    if args.csv:
        problem = _path_problem(args.csv, 0) or _file_problem(args.csv, csv_notes)
        if problem:
            return f"--csv {shown(str(args.csv), PATH_SHOWN)}: {problem}", []
    return None, ([f"--results {shown(str(folder), PATH_SHOWN)}: {n}" for n in notes or []]
                  + [f"--csv {shown(str(args.csv), PATH_SHOWN)}: {n}" for n in csv_notes or []])


def _path_problem(path: Path, below: int):
    raw = os.fsencode(str(path))
    if b"\0" in raw:
        return "expected a path, and it holds a NUL character"
    longest = max((os.fsencode(part) for part in path.parts), key=len, default=b"")
    if len(longest) > NAME_MAX:
        return (f"a name in it is {len(longest):,} bytes long "
                f"({shown(os.fsdecode(longest), 24)}); Linux allows {NAME_MAX}")
    if len(raw) + below >= PATH_MAX:
        return (f"the path is {len(raw):,} bytes long; with what the run writes below it, it "
                f"would pass the {PATH_MAX - 1:,} bytes Linux allows")
    return None


def _nearest(path: Path):
    """The nearest of `path` and its parents that exists, and a problem."""
    while True:
        try:
            os.stat(path)
            return path, None
        except (FileNotFoundError, NotADirectoryError):
            if os.path.lexists(path):
                return path, f"{shown(str(path), PATH_SHOWN)} is a broken symbolic link"
            if path == path.parent:
                return path, "no part of it exists"
            path = path.parent
        except OSError as exc:
            return path, f"cannot look at {shown(str(path), PATH_SHOWN)} ({exc.strerror})"


def _folder_problem(folder: Path, notes):
    nearest, problem = _nearest(folder)
    if problem or nearest.is_dir():
        return problem or _unwritable(nearest, notes, tempfile.mkdtemp, os.rmdir)
    if nearest == folder:
        return "expected a folder, and it is a file"
    return f"{shown(str(nearest), PATH_SHOWN)} is a file, so no folder can be made in it"


def _file_problem(path: Path, notes):
    nearest, problem = _nearest(path)
    if problem:
        return problem
    if nearest == path:
        if path.is_dir():
            return "expected a file, and it is a folder"
        if path.is_file() and path.resolve().parts[1:2] in (("proc",), ("sys",)):
            return "expected a file, and it is one of the kernel's (/proc, /sys)"
        return _unwritable(path, notes)
    if nearest != path.parent:
        return (f"the folder {shown(str(path.parent), PATH_SHOWN)} does not exist" if nearest.is_dir()
                else f"{shown(str(nearest), PATH_SHOWN)} is a file, not a folder")
    if not nearest.is_dir():
        return f"{shown(str(nearest), PATH_SHOWN)} is a file, not a folder"
    return _unwritable(nearest, notes, tempfile.mkstemp, lambda made: (
        os.close(made[0]), os.unlink(made[1])))


def _unwritable(path: Path, notes, make=None, remove=None):
    """Whether this process can create in folder `path` (with `make`, then
    `remove` what it made) or, without `make`, append to file `path`."""
    try:
        if make:
            remove(make(prefix=".fabric-lab-check-", dir=path))
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM) and os.geteuid() != 0 and notes is not None:
            notes.append(f"this user cannot write in {shown(str(path), PATH_SHOWN)}; root may "
                         "(--check as root tells)")
            return None
        if exc.errno == errno.ENXIO:
            return "it is a named pipe that no program reads"
        return f"cannot write in {shown(str(path), PATH_SHOWN)} ({exc.strerror})"
    return None


def run_name(fabric, calibrate: bool = False, when: Optional[str] = None) -> str:
    """The name of a run's folder under --results: when it started, and
    the fabric's name."""
    when = when or time.strftime("%Y%m%d-%H%M%S")
    return f"{when}-{fabric.name}" + ("-calibration" if calibrate else "")


def fresh_folder(results: Path, name: str) -> Path:
    """The run's own folder under `results`, made now: `name`, or `name-2`,
    `name-3`, ... when runs of the same fabric start within one second."""
    for number in range(1, 1000):
        folder = results / (name if number == 1 else f"{name}-{number}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
    raise ValueError(f"--results {results}: {name} and 998 more like it exist already")
