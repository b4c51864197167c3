"""Kept labs (`scripts/lab up`): a keeper's record and the request protocol
on its socket.

The keeper (lab/kept/keeper.py) owns a running Lab and answers on a unix socket
next to the labs' records: /run/fabric-lab/kept.sock (0600: root only). Its
record, /run/fabric-lab/kept.json, names its pid and start time (a reused
pid is never taken for it), the fabric, the lab's folder, its log and its
state ("starting" until the lab is ready, then "up", then "down").

Several can be up at once, each by its name (`--name NAME`; the default one
is "lab"): kept-NAME.json and kept-NAME.sock. Each lab runs in a sandbox of
its own (lab/sandbox.py), so their switches and servers share names without
meeting. `select` says which one the calls below mean.

The protocol is JSON lines: the client sends one request,

    {"op": "inspect"}
    {"op": "exec", "node": "h1", "argv": ["ping", "-c1", "h4"]}     then {"op": "stdin", ...}
    {"op": "run", "argv": ["-b", "32K"], "cwd": "/home/me"}     then perhaps {"op": "cancel"}
    {"op": "down"}

and the keeper answers with messages: {"out": text} and {"err": text} as the
work prints, then one last message, {"exit": status} (and for inspect
{"inspect": {...}}), or {"error": sentence} when it refuses. While an
exec runs, the client sends what it reads on its stdin, {"op": "stdin",
"data": base64}, then {"op": "stdin", "eof": true}; the command's stdin
closes there.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Iterator, List, Optional

from lab.records import RECORDS, pid_alive, start_time, write_json

DEFAULT_NAME = "lab"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
SELECTED = DEFAULT_NAME
RECORD = RECORDS / "kept.json"          # the selected kept lab's (select)
SOCKET = RECORDS / "kept.sock"
LAST = ("exit", "error", "inspect")         # the keys of a reply's last message


class KeptError(Exception):
    """No kept lab to talk to, or it refused: one sentence."""


# --- which one -----------------------------------------------------------------------

def check_name(name: str) -> str:
    """A kept lab's name, or ValueError saying what one looks like."""
    if not NAME.fullmatch(name):
        raise ValueError(f"a kept lab's name is 1 to 32 of a-z, 0-9, - and _, starting with a "
                         f"letter or digit; got {name!r}")
    return name


def select(name: str = DEFAULT_NAME) -> None:
    """Make the record and socket below those of the kept lab `name`."""
    global RECORD, SOCKET, SELECTED
    stem = "kept" if check_name(name) == DEFAULT_NAME else f"kept-{name}"
    RECORD, SOCKET = RECORDS / f"{stem}.json", RECORDS / f"{stem}.sock"
    SELECTED = name


def name_flag() -> str:
    """What to add to a scripts/lab command for the selected kept lab."""
    return "" if SELECTED == DEFAULT_NAME else f" --name {SELECTED}"


def take_name(argv: List[str]) -> List[str]:
    """`argv` without its --name NAME (or --name=NAME) before any `--`,
    that name selected; ValueError for a bad or missing name."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return out + argv[i:]
        if arg == "--name" or arg.startswith("--name="):
            if arg == "--name":
                if i + 1 >= len(argv):
                    raise ValueError("--name needs the kept lab's name")
                value, i = argv[i + 1], i + 2
            else:
                value, i = arg.split("=", 1)[1], i + 1
            select(value)
            continue
        out.append(arg)
        i += 1
    return out


def names() -> List[str]:
    """The names of the kept labs with a record here, live or not."""
    found = []
    for path in sorted(RECORDS.glob("kept*.json")) if RECORDS.is_dir() else []:
        stem = path.stem
        if stem == "kept":
            found.append(DEFAULT_NAME)
        elif stem.startswith("kept-") and NAME.fullmatch(stem[5:]):
            found.append(stem[5:])
    return found


# --- the record ----------------------------------------------------------------------

def write_record(**fields) -> None:
    write_json(RECORD, fields)


def read_record() -> Optional[dict]:
    try:
        return json.loads(RECORD.read_text())
    except (OSError, ValueError):
        return None


def keeper_alive(record: Optional[dict]) -> bool:
    """Whether the process the record names still runs (same pid, same start)."""
    return bool(record) and pid_alive(record["pid"]) and \
        start_time(record["pid"]) == record.get("start_time")


def own_record(pid: int, **fields) -> dict:
    """The record of keeper `pid`: its start time beside the fields."""
    return {"pid": pid, "start_time": start_time(pid), "since": time.time(), **fields}


def remove_record() -> None:
    SOCKET.unlink(missing_ok=True)
    RECORD.unlink(missing_ok=True)


def running_text(record: dict) -> str:
    """Which kept lab is up, in a few words."""
    return (f"{record.get('fabric')} (keeper pid {record['pid']}, folder "
            f"{record.get('folder')})")


# --- the protocol --------------------------------------------------------------------

def encode(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def send(conn: socket.socket, **message) -> None:
    conn.sendall(encode(message))


def messages(conn: socket.socket) -> Iterator[dict]:
    """Every message on `conn` until it closes; a line that is not a JSON
    object ends it with an error message."""
    reader = Reader(conn)
    while True:
        message = reader.next()
        if message is None:
            return
        yield message


class Reader:
    """The messages on a connection, one at a time; an exception while it
    waits (Ctrl-C) loses nothing: the next call goes on where it was."""

    def __init__(self, conn: socket.socket):
        self.conn, self.buffered, self.lines = conn, b"", []

    def next(self) -> Optional[dict]:
        """The next message; None once the connection has closed."""
        while not self.lines:
            chunk = self.conn.recv(65536)
            if not chunk:
                return None
            *lines, self.buffered = (self.buffered + chunk).split(b"\n")
            self.lines = [line for line in lines if line]
        return decode(self.lines.pop(0))


def decode(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except ValueError:
        return {"error": "the other end sent something that is not JSON"}
    return message if isinstance(message, dict) else {"error": "expected a JSON object"}


def connect(path: Optional[Path] = None) -> socket.socket:
    """A connection to the keeper (of the selected kept lab); KeptError
    saying why there is none."""
    path = SOCKET if path is None else path
    if os.geteuid() != 0:
        raise KeptError("the kept lab answers root only: run it with sudo")
    record = read_record()
    if not keeper_alive(record):
        named = f" named {SELECTED!r}" if SELECTED != DEFAULT_NAME else ""
        others = [n for n in names() if n != SELECTED]
        raise KeptError(f"no lab{named} is up: `sudo scripts/lab up [FABRIC]{name_flag()}` "
                        "starts one"
                        + (f" (a dead keeper's record is here: `sudo scripts/lab "
                           f"down{name_flag()}` removes what it left)" if record else "")
                        + (f"; kept labs here: {', '.join(others)} (--name)" if others else ""))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError as exc:
        conn.close()
        state = record.get("state")
        raise KeptError(f"the keeper (pid {record['pid']}) does not answer on {path}"
                        + (f": its lab is {state}" if state != "up" else f" ({exc.strerror})"))
    return conn
