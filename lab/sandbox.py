"""A lab's own corner of the host: a network namespace of its own, with its
own Open vSwitch daemons in it.

Everything the lab makes (bridges, the switches' veths, the servers'
namespaces and their veth ends, the controller's socket) lives there, so:

- labs never meet: two labs, or a lab kept up and the test suite, use the
  same switch names, addresses and OpenFlow port without seeing each other,
  and the host's own interfaces and Open vSwitch are never touched;
- nothing of the lab is in the host's namespace to be left behind. The
  namespace goes with the last process in it, every veth with it (a veth
  whose one end goes takes the other). Its processes die with the lab's
  process, even by SIGKILL (`die_with_parent`, their parent-death signal),
  and the lab's record names them for `--cleanup` besides.

The thread that enters the sandbox (the lab's) makes its sockets and starts
its processes there; another thread that must (the kept lab's, answering a
client; a monitor running tc) joins it with `join`. Entering saves where the
thread was, and leaving goes back there: sandboxes nest, last in first out.
(A pid namespace would end every process at once, but Mininet hands the
host's pids to commands run inside, which would read them as their own.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
OVS_SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
OVS_ENV = ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR")
_libc = ctypes.CDLL(None, use_errno=True)
_stack: List["Sandbox"] = []            # the sandboxes entered, innermost last
_stack_lock = threading.Lock()


class SandboxError(Exception):
    """The sandbox could not be made; the message says what failed."""


def _setns(path: str, flag: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, flag) != 0:
            err = ctypes.get_errno()
            raise SandboxError(f"setns({path}) failed: {os.strerror(err)}")
    finally:
        os.close(fd)


def die_with_parent() -> None:
    """A Popen preexec_fn: the child gets SIGKILL when the thread that started
    it ends (the lab's, so: when the lab's process dies, however)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _netns_inode(pid: "int | str") -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def in_namespace(inode: int, besides=()) -> List[int]:
    """The processes whose network namespace is `inode`, but `besides`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in besides:
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                    found.append(int(entry))
            except OSError:                     # gone meanwhile
                pass
    return found


def end_stragglers(inode: int, besides=(), patience: float = 5.0) -> List[int]:
    """Kill every process still in the lab's namespace but `besides`: only
    the lab starts processes in there, and one it did not track (a command
    Mininet ran, cut off mid-way by a stop signal: an ovs-vsctl whose
    database is gone waits for ever) would keep the namespace alive."""
    return _end(in_namespace(inode, besides), patience)


def carrying(rundir: str) -> List[int]:
    """The processes started with OVS_RUNDIR=`rundir` (a lab's sandbox's):
    every command the lab ran in there carries it, orphaned or not."""
    mark = f"OVS_RUNDIR={rundir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def end_carrying(rundir: str, patience: float = 5.0) -> List[int]:
    """For --cleanup after a lab killed outright: what it ran in its sandbox
    and did not hear of (its tracked processes died with it)."""
    return _end(carrying(rundir), patience)


def _end(pids: List[int], patience: float) -> List[int]:
    """SIGKILL them; wait until they are gone, at most `patience` seconds
    once they stop going."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    left, last, since = pids, len(pids), time.monotonic()
    while left and time.monotonic() - since < patience:
        time.sleep(0.01)
        left = [p for p in left if is_alive(p)]
        if len(left) < last:
            last, since = len(left), time.monotonic()
    return pids


def is_alive(pid: int) -> bool:
    """Not a zombie (a killed child of ours that nobody waited for yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def current() -> Optional["Sandbox"]:
    """The innermost sandbox this process is in, if any."""
    with _stack_lock:
        return _stack[-1] if _stack else None


class Sandbox:
    """`enter()` makes the namespaces, moves the calling thread into them and
    starts Open vSwitch there (its files in `folder`); `leave()` ends them all
    and puts the thread back. `on_process` hears of every process started."""

    def __init__(self, folder: Path, logs: Path, on_process=lambda proc: None, ovs_options=(),
                 ovs_env=None, ovs_config=()):
        self.folder = Path(folder)                  # short: its sockets' paths have a limit
        self.logs = Path(logs)
        self.on_process = on_process
        self.ovs_options = list(ovs_options)       # more of ovs-vswitchd's command line
        self.ovs_env = dict(ovs_env or {})         # and of its environment
        self.ovs_config = list(ovs_config)         # ovs-vsctl arguments before any bridge
        self.holder: Optional[subprocess.Popen] = None   # keeps the namespace, gives its path
        self.daemons: Dict[str, subprocess.Popen] = {}
        self._back: Optional[int] = None            # fd of where the thread came from
        self._env: Dict[str, Optional[str]] = {}
        self._joined = set()                        # thread idents moved in
        self.inode: Optional[int] = None            # the namespace's, while it lives

    # --- in ----------------------------------------------------------------------

    def enter(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        # Its own session: a Ctrl-C at the terminal reaches the lab, which
        # then ends the sandbox in order; the parent-death signal ends it if
        # the lab is killed outright.
        self.holder = subprocess.Popen(
            ["unshare", "--net", "sleep", "infinity"], preexec_fn=die_with_parent,
            start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.on_process(self.holder)
        self._wait_unshared()
        self.inode = _netns_inode(self.holder.pid)
        self._back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        _setns(f"/proc/{self.holder.pid}/ns/net", CLONE_NEWNET)
        self._joined.add(threading.get_ident())
        with _stack_lock:
            _stack.append(self)
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True)
        self._set_env()
        self._start_ovs()

    def _wait_unshared(self) -> None:
        """Until the holder is in a namespace other than ours. Waits on the
        holder, not the clock."""
        ours = _netns_inode("thread-self")
        while True:
            if self.holder.poll() is not None:
                err = self.holder.stderr.read().decode(errors="replace").strip()
                raise SandboxError(f"unshare exited ({self.holder.returncode}): "
                                   f"{err or 'no output'}")
            try:
                if _netns_inode(self.holder.pid) != ours:
                    return
            except OSError:
                pass
            time.sleep(0.005)

    def _set_env(self) -> None:
        """Open vSwitch's tools (ours, Mininet's, a user's in the CLI) find
        this sandbox's daemons through these."""
        for key in OVS_ENV:
            self._env[key] = os.environ.get(key)
            os.environ[key] = str(self.folder)

    def _start_ovs(self) -> None:
        db, sock = self.folder / "conf.db", f"unix:{self.folder}/db.sock"
        db.unlink(missing_ok=True)
        subprocess.run(["ovsdb-tool", "create", str(db), str(OVS_SCHEMA)], check=True,
                       capture_output=True)
        common = ["-vconsole:off", "-vfile:info", "--no-chdir"]
        self._daemon("ovsdb-server", [
            "ovsdb-server", str(db), f"--remote=punix:{self.folder}/db.sock",
            f"--pidfile={self.folder}/ovsdb-server.pid",
            f"--log-file={self.logs}/ovsdb-server.log", *common])
        self._wait_socket(self.folder / "db.sock", "ovsdb-server")
        subprocess.run(["ovs-vsctl", "--no-wait", "init", *self.ovs_config], check=True,
                       capture_output=True)
        self._daemon("ovs-vswitchd", [
            "ovs-vswitchd", sock, f"--pidfile={self.folder}/ovs-vswitchd.pid",
            f"--log-file={self.logs}/ovs-vswitchd.log", *common, *self.ovs_options],
            env=dict(os.environ, **self.ovs_env))
        self._wait_socket(None, "ovs-vswitchd")

    def _daemon(self, name: str, args: List[str], env=None) -> None:
        with open(self.logs / f"{name}.out", "ab") as out:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True, preexec_fn=die_with_parent, env=env)
        self.daemons[name] = proc
        self.on_process(proc)

    def _wait_socket(self, path: Optional[Path], name: str) -> None:
        """Until the daemon answers: bounded by the daemon staying alive, not
        by the clock (a loaded host starts it slowly, but it starts)."""
        proc = self.daemons[name]
        while True:
            if proc.poll() is not None:
                raise SandboxError(f"{name} exited ({proc.returncode}) while starting: "
                                   f"see {self.logs}/{name}.log")
            if path is not None:
                if path.exists():
                    return
            elif any(p.name.startswith(f"{name}.") and p.name.endswith(".ctl")
                     for p in self.folder.iterdir()):
                return
            time.sleep(0.01)

    def vswitchd_pid(self) -> int:
        """ovs-vswitchd's pid as this host sees it (its pid file holds the
        sandbox's own numbering)."""
        proc = self.daemons.get("ovs-vswitchd")
        return proc.pid if proc is not None else 0

    # --- other threads -----------------------------------------------------------

    def join(self) -> None:
        """Move the calling thread in as well (once): its sockets and the
        processes it starts belong to the lab."""
        ident = threading.get_ident()
        if ident in self._joined or self.holder is None or self.holder.poll() is not None:
            return
        _setns(f"/proc/{self.holder.pid}/ns/net", CLONE_NEWNET)
        self._joined.add(ident)

    # --- out ---------------------------------------------------------------------

    def leave(self) -> None:
        """Let the namespace go and put the thread back where it was; safe
        however far `enter` got, and twice. The lab has ended its own
        processes first (their namespace goes with the last of them)."""
        if self.inode is not None:              # once: a freed inode may name another's later
            inode, self.inode = self.inode, None
            end_stragglers(inode, {os.getpid(), self.holder.pid})
        if self.holder is not None:
            if self.holder.poll() is None:
                self.holder.kill()
            self.holder.wait()
            if self.holder.stderr:
                self.holder.stderr.close()
        if self._back is not None:
            if _libc.setns(self._back, CLONE_NEWNET) != 0:
                raise SandboxError("going back to the host's network namespace failed: "
                                   f"{os.strerror(ctypes.get_errno())}")
            os.close(self._back)
            self._back = None
        with _stack_lock:
            if self in _stack:
                _stack.remove(self)
        for key, value in self._env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._env = {}
