"""The client of the kept lab (`scripts/lab inspect|exec|down`, and what
run_topology.py --up and --lab use): it talks to the keeper on its socket
(lab/kept/kept.py) and prints what it answers.

    python -m lab.kept.kept_client inspect [--json]
    python -m lab.kept.kept_client exec NODE -- CMD ...
    python -m lab.kept.kept_client down

Each exits with the status of what it asked for: the command's in exec
(127, with one sentence, when the node has no such command), 1 when the
keeper refuses or there is no lab (one sentence, `error: ...`). exec
passes its stdin to the command, and the lab's server names resolve in it
(lab/kept/keeper.py: a hosts file of the lab's, in the command's own mount
namespace).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Iterable, List

from lab.kept import kept
from lab.kept.kept import KeptError


def ask(request: dict, stdin: bool = False) -> Iterable[dict]:
    """The keeper's messages in answer to `request` (with `stdin`, what this
    process reads on its stdin goes to the keeper meanwhile). Ctrl-C sends a
    cancel (the keeper stops the work, and its last messages still come); a
    second one leaves."""
    conn = kept.connect()
    lock = threading.Lock()
    try:
        kept.send(conn, **request)
        if stdin:
            threading.Thread(target=send_stdin, args=(conn, lock), daemon=True).start()
        reader = kept.Reader(conn)
        cancelled = False
        while True:
            try:
                message = reader.next()
            except KeyboardInterrupt:
                if cancelled:
                    raise
                cancelled = True
                with lock:
                    kept.send(conn, op="cancel")
                continue
            if message is None:
                return
            yield message
            if any(key in message for key in kept.LAST):
                return
    finally:
        conn.close()


def send_stdin(conn, lock: threading.Lock) -> None:
    """What this process reads on its stdin, to an exec's command, then its
    end; a stdin closed or unreadable is an empty one."""
    with contextlib.suppress(OSError):
        while True:
            try:
                data = os.read(0, 65536)
            except OSError:
                data = b""
            with lock:
                if not data:
                    kept.send(conn, op="stdin", eof=True)
                    return
                kept.send(conn, op="stdin", data=base64.b64encode(data).decode())


class ReaderGone(Exception):
    """Where the output goes was closed (`scripts/lab exec ... | head`)."""


def show(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise ReaderGone() from None


def relay(request: dict, stdin: bool = False) -> int:
    """Print the keeper's output as it comes; its exit status."""
    try:
        for message in ask(request, stdin):
            if "out" in message:
                show(sys.stdout, message["out"])
            if "err" in message:
                show(sys.stderr, message["err"])
            if "error" in message:
                print(f"error: {message['error']}", file=sys.stderr)
                return 1
            if "exit" in message:
                return int(message["exit"])
    except KeptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted (Ctrl-C): left without waiting for the keeper", file=sys.stderr)
        return 130
    except OSError as exc:
        print(f"error: the keeper went away ({exc.strerror})", file=sys.stderr)
        return 1
    print("error: the keeper went away before it answered", file=sys.stderr)
    return 1


def run(argv: List[str], cwd: str) -> int:
    """An experiment (run_topology.py's flags) on the kept lab."""
    return relay({"op": "run", "argv": argv, "cwd": cwd})


def execute(node: str, argv: List[str]) -> int:
    return relay({"op": "exec", "node": node, "argv": argv}, stdin=True)


def inspect() -> dict:
    """What the keeper says of its lab; KeptError when no lab answers."""
    for message in ask({"op": "inspect"}):
        if "inspect" in message:
            return message["inspect"]
        if "error" in message:
            raise KeptError(message["error"])
    raise KeptError("the keeper went away before it answered")


def down() -> int:
    """The keeper takes its lab down; a dead keeper's leftovers are removed
    from its record; a keeper still building its lab is told with SIGTERM."""
    record = kept.read_record()
    if record is None:
        print(f"nothing to take down: no lab{kept.name_flag().replace(' --name', ' named')} "
              "is up")
        return 0
    if not kept.keeper_alive(record):
        from lab.cleanup import cleanup_dead_labs
        print(f"the keeper (pid {record['pid']}) is gone: removing what its record names")
        cleanup_dead_labs(owner=record["pid"])
        return 0
    if record.get("state") == "starting":
        return _stop_starting(record)
    return relay({"op": "down"})


def _stop_starting(record: dict) -> int:
    """SIGTERM to a keeper still building its lab (same pid, same start
    time: the record's): it tears down what it built, then exits."""
    os.kill(record["pid"], signal.SIGTERM)
    while kept.keeper_alive(kept.read_record() or record):
        time.sleep(0.1)
    print(f"down     the keeper (pid {record['pid']}) was still building its lab: "
          f"stopped, and its lab torn down (log: {record.get('log')})")
    return 0


def wait_up(keeper: subprocess.Popen, log: Path) -> int:
    """Until the keeper `keeper` reports its lab up (then print inspect), or
    exits (then say why, from its log): bounded by its progress, not a clock."""
    while keeper.poll() is None:
        record = kept.read_record()
        if record and record.get("pid") == keeper.pid and record.get("state") == "up":
            print(inspect_text(inspect()))
            if record.get("reach_ok", True):
                return 0
            print("error: not every server reaches every other: the lab is up to look "
                  f"into (`sudo scripts/lab down{kept.name_flag()}` takes it down)",
                  file=sys.stderr)
            return 1
        time.sleep(0.1)
    try:
        lines = [l for l in log.read_text().splitlines() if l.strip()]
    except OSError:
        lines = []
    errors = [l for l in lines if l.startswith("error:")]
    print(errors[-1] if errors else f"error: the keeper exited ({keeper.returncode}): "
          f"{lines[-1] if lines else 'no output'}", file=sys.stderr)
    print(f"(log: {log})", file=sys.stderr)
    return keeper.returncode or 1


# --- inspect as text -----------------------------------------------------------------

def inspect_text(info: dict) -> str:
    since = datetime.fromtimestamp(info["since"]).strftime("%H:%M:%S")
    control = info["controller"]
    lines = [f"lab      {info['fabric']} ({info['source']}): {info['shape']}",
             f"         policy {info['policy']}, datapath {info['datapath']}; up "
             f"{duration(info['uptime_s'])} (since {since}); {info['reach']}",
             f"         folder {info['folder']}",
             f"keeper   pid {info['keeper']['pid']}, log {info['keeper']['log']}",
             (f"control  pid {control['pid']}, port {control['port']}, log {control['log']}"
              if control else "control  none (L2 learning + STP)"),
             f"servers  {len(info['servers'])}"]
    lines += [f"  {h['name']:<10} {h['ip']:<15} {h['mac']}  on {h['leaf']:<8} pid {h['pid']}"
              + (f"  nv {h['nv_ip']}" if h.get("nv_ip") else "") for h in info["servers"]]
    lines.append(f"switches {len(info['switches'])}")
    lines += [f"  {s['name']:<10} {s['role']:<6} dpid {s['dpid']:<6} pid {s['pid']}"
              for s in info["switches"]]
    lines.append(f"links    {len(info['links'])}")
    lines += [f"  {l['a']:<14} -- {l['b']:<14} {l['kind']:<12} {l['rate_mbit']:g} Mbit/s, "
              f"queue {l['queue_packets']} packets" + link_extra(l) for l in info["links"]]
    lines.append(f"runs     {len(info['experiments'])}" + (" (one running)" if info["running"]
                                                           else ""))
    lines += [f"  {e['number']}. {' '.join(e['command'])}: "
              + ("running" if e["exit"] is None else f"exit {e['exit']}")
              + (f", {e['results']}" if e["results"] else "") for e in info["experiments"]]
    return "\n".join(lines)


def link_extra(link: dict) -> str:
    return ((f", {link['delay_ms']:g} ms delay" if link["delay_ms"] else "")
            + (f", {link['loss_percent']:g}% loss" if link["loss_percent"] else ""))


def duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}h " if hours else "") + f"{rest // 60}m {rest % 60:02d}s"


# --- the command line ----------------------------------------------------------------

USAGE = ("usage: scripts/lab inspect [--json] | exec NODE -- CMD ... | down, each with "
         "[--name NAME] (and `up [FABRIC] [--name NAME]`, `run --lab [--name NAME] ...`)")


def main(argv: List[str]) -> int:
    """The command; a reader that stops reading (`inspect --json | head`)
    ends it quietly, with the status a shell gives a command SIGPIPE stopped."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except (BrokenPipeError, ReaderGone):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())          # the exit's own flush finds nowhere to fail
        os.close(null)
        return 141


def _main(argv: List[str]) -> int:
    if not argv or argv[0] not in ("inspect", "exec", "down"):
        print(USAGE, file=sys.stderr)
        return 2
    command = argv[0]
    try:
        rest = kept.take_name(argv[1:])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("error: the kept lab answers root only: run it with sudo", file=sys.stderr)
        return 2
    try:
        if command == "inspect":
            if rest not in ([], ["--json"]):
                print(USAGE, file=sys.stderr)
                return 2
            info = inspect()
            print(json.dumps(info, indent=1) if rest else inspect_text(info))
            return 0
        if command == "down":
            return down()
        node, cmd = (rest[0], rest[1:]) if rest else ("", [])
        if cmd[:1] == ["--"]:
            cmd = cmd[1:]
        if not node or not cmd:
            print("usage: scripts/lab exec NODE -- CMD ...", file=sys.stderr)
            return 2
        return execute(node, cmd)
    except KeptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
