"""The keeper of a kept lab (`scripts/lab up`): the process that owns the Lab
(controller, network) between commands and answers on its socket
(lab/kept/kept.py): inspect, exec in a node's namespace, run an experiment,
down. It uses the lab only as lab/protocol.py's KeptLab says.

    Keeper(lab, ready, experiment, folder).keep()     # until down or a signal

Experiments run one at a time in the main thread, with the code of a
normal run (`experiment`, given by run_topology.py), their output sent to
the client that asked; the client's Ctrl-C (a cancel, or its connection
closing) stops that experiment as Ctrl-C stops a normal run, with SIGUSR1
raising Cancelled in the main thread, and the lab stays. inspect and exec
are served in a thread per connection meanwhile. `down`, SIGTERM or SIGINT
leave `with lab:` and the lab's own teardown removes what it built; the
record and socket go last. Processes started by exec are registered with
the lab (KeptLab.register), so teardown, or --cleanup after a SIGKILL, stops
them too.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from lab import records
from lab.host import Interrupted, LabError
from lab.kept import kept
from lab.kept.kept import send
from lab.processes import stop_process_group
from lab.protocol import KeptLab

FEW = 8                                 # names listed when a node is unknown


class Cancelled(BaseException):
    """The client of the running experiment asked to stop it (or went away)."""


@dataclass
class Task:
    op: str
    conn: socket.socket
    request: dict
    cancelled: bool = False
    done: bool = False


@dataclass
class KeptRun:
    """One experiment run on the kept lab, for inspect."""
    number: int
    command: List[str]
    started: float
    exit: Optional[int] = None
    results: Optional[str] = None
    seconds: Optional[float] = None


class _Frames:
    """A text stream whose writes go to a client as {"out"|"err": text}; a
    client gone makes writes vanish (its cancel stops the work)."""

    def __init__(self, conn, key):
        self.conn, self.key, self.gone = conn, key, False

    def write(self, text):
        if text and not self.gone:
            try:
                send(self.conn, **{self.key: text})
            except OSError:
                self.gone = True
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False


@dataclass
class Keeper:
    lab: KeptLab                         # a Lab, not yet started
    ready: Callable                      # ready(lab) -> (text, ok): once built
    experiment: Callable                 # experiment(lab, argv, cwd, number) -> (exit, folder)
    folder: str                          # the lab's folder (its log, controller log)
    experiments: List[KeptRun] = field(default_factory=list)

    def __post_init__(self):
        self.jobs: "queue.Queue[Task]" = queue.Queue()
        self.current: Optional[Task] = None
        self.going_down = False
        self.execs: List[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.nodes: dict = {}
        self.since = time.time()
        self.reach, self.reach_ok = "", True
        self.hosts_file = Path(self.folder) / "hosts"

    # --- life ------------------------------------------------------------------------

    def keep(self) -> int:
        """Claim the one kept lab, build it, serve until down (0) or a signal
        (Interrupted, after the teardown); the record and socket go last."""
        claim(self.folder, f"{self.lab.fabric.name} ({self.lab.fabric.source})")
        down: Optional[Task] = None
        try:
            signal.signal(signal.SIGUSR1, self._cancel_signal)
            removed = {}
            with self.lab:
                self.reach, self.reach_ok = self.ready(self.lab)
                self.nodes = self.lab.nodes()
                self._write_hosts()
                listener = self._listen()
                try:
                    down = self._serve()
                finally:
                    self._close(listener)
                    removed = self.lab.holdings()
            if down is not None:
                send_quietly(down.conn, out=removed_text(removed, self.lab))
                send_quietly(down.conn, exit=0)
            return 0
        finally:
            kept.remove_record()
            if down is not None:
                down.conn.close()

    def _listen(self) -> socket.socket:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        kept.SOCKET.unlink(missing_ok=True)
        old = os.umask(0o177)                        # made 0600: root only
        try:
            listener.bind(str(kept.SOCKET))
        finally:
            os.umask(old)
        os.chmod(kept.SOCKET, 0o600)
        listener.listen(16)
        kept.write_record(**{**(kept.read_record() or {}), "state": "up", "reach": self.reach,
                             "reach_ok": self.reach_ok,
                             "lab": self.lab.tag, "socket": str(kept.SOCKET)})
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        print(f"keeper   up: {self.reach}; socket {kept.SOCKET}", flush=True)
        return listener

    def _serve(self) -> Task:
        """Run experiments as they come; return the down request."""
        while True:
            try:
                job = self.jobs.get(timeout=1)
            except queue.Empty:
                continue
            if job.op == "down":
                return job
            self._run(job)

    def _close(self, listener) -> None:
        self.going_down = True
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        kept.SOCKET.unlink(missing_ok=True)
        kept.write_record(**{**(kept.read_record() or {}), "state": "down"})
        with self.lock:
            execs = list(self.execs)
        for proc in execs:
            stop_process_group(proc)

    # --- experiments (main thread) ---------------------------------------------------

    def _run(self, job: Task) -> None:
        argv, cwd = job.request.get("argv", []), job.request.get("cwd", "/")
        record = KeptRun(len(self.experiments) + 1, ["--lab", *argv], time.time())
        self.experiments.append(record)
        streams = sys.stdout, sys.stderr
        code = 130
        try:
            self.current = job
            sys.stdout, sys.stderr = _Frames(job.conn, "out"), _Frames(job.conn, "err")
            code, record.results = self.experiment(self.lab, argv, cwd, record.number)
        except Cancelled:
            self.lab.resync()
            sys.stderr.write("\ninterrupted (Ctrl-C): the experiment was stopped; "
                             "the lab stays up\n")
        except Interrupted:
            sys.stderr.write("\nthe keeper was stopped: the lab is going down\n")
            raise
        except Exception as exc:                  # noqa: BLE001 - a bug: the lab stays
            code = 1
            sys.stderr.write(f"error: the experiment failed: {type(exc).__name__}: {exc}\n")
            traceback.print_exc(file=streams[0])
        finally:
            self.current = None
            sys.stdout, sys.stderr = streams
            job.done = True
            record.exit, record.seconds = code, round(time.time() - record.started, 2)
            send_quietly(job.conn, exit=code)
            with contextlib.suppress(OSError):
                job.conn.shutdown(socket.SHUT_RDWR)       # wakes the thread watching it
            job.conn.close()
        print(f"keeper   experiment {record.number} ({' '.join(argv)}): exit {code}, "
              f"results {record.results}", flush=True)

    def _cancel_signal(self, signum, frame):
        job = self.current
        if job is not None and job.cancelled and not job.done:
            job.done = True                      # once: the unwinding is not cut
            raise Cancelled()

    # --- requests (a thread per connection) ------------------------------------------

    def _accept(self, listener) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return                           # the listener closed: going down
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn) -> None:
        handed_over = False
        try:
            reader = kept.Reader(conn)          # exec's stdin may follow at once
            request = reader.next() or {}
            op = request.get("op")
            if self.going_down:
                send(conn, error="the lab is going down")
            elif op == "inspect":
                send(conn, inspect=self.inspect())
            elif op == "exec":
                self._exec(conn, request, reader)
            elif op in ("run", "down"):
                handed_over = self._hand_over(Task(op, conn, request))
            else:
                send(conn, error=f"unknown request {op!r}: expected inspect, exec, run or down")
        except OSError:
            pass
        finally:
            if not handed_over:
                conn.close()

    def _hand_over(self, job: Task) -> bool:
        """Queue a run or down for the main thread; for a run, watch its
        connection: a cancel or the client gone stops it."""
        if job.op == "run" and (self.current is not None or not self.jobs.empty()):
            running = self.experiments[-1].command if self.experiments else []
            send(job.conn, error=f"an experiment is running ({' '.join(running)}): wait for "
                                 "it, or stop it with Ctrl-C where it runs")
            return False
        self.jobs.put(job)
        if job.op == "down" and self.current is not None:   # down stops the experiment
            self._cancel(self.current)
        if job.op == "run":
            for message in kept.messages(job.conn):
                if message.get("op") == "cancel":
                    break
            self._cancel(job)
        return True

    def _cancel(self, job: Task) -> None:
        if job.done:
            return
        job.cancelled = True
        while not job.done and self.current is not job:   # still queued: wait for its start
            time.sleep(0.05)
        if not job.done:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    def _exec(self, conn, request, reader) -> None:
        node, argv = request.get("node"), request.get("argv") or []
        if node not in self.nodes:
            names = sorted(self.nodes, key=node_order)
            send(conn, error=f"no node {node!r} in this lab: its nodes are "
                             f"{', '.join(names[:FEW])}" + (", ..." if len(names) > FEW else ""))
            return
        if not argv:
            send(conn, error="nothing to run: scripts/lab exec NODE -- CMD ...")
            return
        if not shutil.which(argv[0]):
            send(conn, err=f"error: {node} has no command {argv[0]!r} (not found on PATH)\n")
            send(conn, exit=127)
            return
        try:
            proc = subprocess.Popen(["mnexec", "-a", str(self.nodes[node]), *with_hosts(
                                        self.hosts_file, argv)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            send(conn, error=f"cannot run {argv[0]}: {exc.strerror}")
            return
        with self.lock:
            self.execs.append(proc)
        try:
            with contextlib.suppress(OSError):
                self.lab.register(proc.pid)
            send(conn, exit=forward(proc, conn, reader))
        finally:
            stop_process_group(proc)
            for stream in (proc.stdout, proc.stderr):
                stream.close()
            with self.lock:
                self.execs.remove(proc)

    def _write_hosts(self) -> None:
        """The lab's servers by name, for exec (with_hosts): the machine's
        own /etc/hosts, then each server's address."""
        try:
            own = Path("/etc/hosts").read_text()
        except OSError:
            own = "127.0.0.1\tlocalhost\n"
        lines = [f"{h.ip}\t{h.name}" for h in self.lab.fabric.endpoints]
        self.hosts_file.write_text(own.rstrip("\n") + "\n# the kept lab's servers "
                                   f"({self.lab.fabric.name})\n" + "\n".join(lines) + "\n")

    # --- inspect ---------------------------------------------------------------------

    def inspect(self) -> dict:
        lab, fabric = self.lab, self.lab.fabric
        controller = lab.controller
        running = self.current is not None
        return {
            "fabric": fabric.name, "source": fabric.source, "shape": fabric.shape(),
            "policy": fabric.policy, "datapath": lab.datapath, "folder": self.folder,
            "keeper": {"pid": os.getpid(), "log": f"{self.folder}/keeper.log"},
            "controller": controller and {"pid": controller.pid, "port": controller.port,
                                          "log": str(controller.log)},
            "since": self.since, "uptime_s": round(time.time() - self.since, 1),
            "reach": self.reach,
            "switches": [{"name": s.name, "role": s.role, "dpid": s.dpid,
                          "pid": self.nodes.get(s.name)} for s in fabric.switches],
            "servers": [{"name": h.name, "ip": h.ip, "mac": h.mac, "leaf": h.leaf,
                         **({"nv_ip": h.nv_ip} if h.nv_ip else {}),
                         "pid": self.nodes.get(h.name)} for h in fabric.endpoints],
            "links": [{"kind": l.kind, "a": l.a_intf, "b": l.b_intf,
                       "rate_mbit": l.spec.rate_mbit, "queue_packets": l.spec.queue_packets,
                       "delay_ms": l.spec.delay_ms, "loss_percent": l.spec.loss_percent}
                      for l in fabric.links],
            "experiments": [vars(e) for e in self.experiments],
            "running": bool(running)}


def claim(folder: str, fabric: str) -> None:
    """Make this process the one kept lab's keeper, or refuse (LabError)."""
    with records.names_lock():
        record = kept.read_record()
        if kept.keeper_alive(record) and record["pid"] != os.getpid():
            raise LabError(f"a lab is already up: {kept.running_text(record)}; "
                                f"`sudo scripts/lab down{kept.name_flag()}` takes it down")
        kept.write_record(**kept.own_record(os.getpid(), folder=folder, fabric=fabric,
                                            state="starting",
                                            log=f"{folder}/keeper.log"))


def with_hosts(hosts_file: Path, argv: List[str]) -> List[str]:
    """`argv` in a mount namespace of its own where /etc/hosts is the lab's
    (the machine's own file is not touched): node names resolve in exec."""
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts_file), *argv]


def forward(proc: subprocess.Popen, conn: socket.socket, reader: "kept.Reader") -> int:
    """Send what `proc` prints to `conn` until it exits, and what the
    client sends ({"op": "stdin", "data": base64} ..., then {"op": "stdin",
    "eof": true}) to its stdin; the client gone or cancelling stops it. Its
    exit status (130 when stopped). `reader`: the connection's, which
    may hold the first of them already."""
    streams = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
    feed = _StdinFeed(proc)
    while streams:
        # what the reader holds already first: select sees only what is yet to come
        ready = [conn] if reader.lines else select.select([*streams, conn], [], [])[0]
        if conn in ready and not _from_client(reader, feed):
            stop_process_group(proc)             # a cancel, or the client went away
            return 130
        for fd in ready:
            if fd is conn:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                del streams[fd]
                continue
            send(conn, **{streams[fd]: chunk.decode(errors="replace")})
    feed.close()
    return proc.wait()


def _from_client(reader: "kept.Reader", feed: "_StdinFeed") -> bool:
    """The messages the client sent to a running exec, to its stdin; False
    on a cancel or the connection closed."""
    while True:
        message = reader.next()
        if message is None or message.get("op") != "stdin":
            return False
        feed.put(None if message.get("eof") else base64.b64decode(message.get("data", "")))
        if not reader.lines:
            return True


class _StdinFeed:
    """What the client sends to an exec's stdin, written by a thread of its
    own: a command that does not read its stdin never holds up its output."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.queue = proc, queue.Queue()
        threading.Thread(target=self._write, daemon=True).start()

    def put(self, data: Optional[bytes]) -> None:
        self.queue.put(data)

    def close(self) -> None:
        self.queue.put(None)

    def _write(self) -> None:
        if self.proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while (data := self.queue.get()) is not None:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()


def send_quietly(conn, **message) -> None:
    with contextlib.suppress(OSError):
        send(conn, **message)


def removed_text(removed: dict, lab) -> str:
    return (f"down     removed {len(removed.get('bridges', []))} bridges, "
            f"{len(removed.get('interfaces', []))} interfaces and "
            f"{removed.get('processes', 0)} processes of lab {lab.tag} (teardown "
            f"{lab.timings.get('teardown_s', 0):.1f} s), its record and socket; "
            f"folder {lab.run_dir}\n")


def node_order(name: str):
    """h2 before h10: the name's letters, then its number."""
    head = name.rstrip("0123456789")
    return head, int(name[len(head):] or 0)
