"""A test bed of machines on one host, for cluster mode (a fabric spread over
machines over ssh): `python -m devtools.testbed up N|down|status`.

A machine (m1..mN) is namespaces, not a virtual machine: `unshare --mount --net
--pid --uts --ipc --fork` runs a boot script as PID 1 of a new PID namespace.
In its private mount namespace it mounts an overlayfs (lower: the cached root
file system; upper, work: /run/fabric-lab/testbed/mN), /proc, /sys, the host's
/dev (/dev/net/tun: the userspace datapath's taps), fresh tmpfs on /run, /tmp
and /dev/shm and the project read-only at its own path (.venv included), then
chroots there, starts its own Open vSwitch (ovsdb-server by ovs-ctl,
ovs-vswitchd directly, as scripts/setup.sh does where ovs-ctl refuses) and
sshd, and stays as the reaper. Those mounts never reach the host's mount table
and vanish with the namespace; killing PID 1 kills the whole machine, and its
veth pair goes with its network namespace. eth0 (10.77.0.10+N/24, peer of host
veth fltb-mN, MTU 9050) sits on the host bridge fltb0 (10.77.0.1/24).

debootstrap (bookworm, minbase; devtools/rootfs.py) builds the root file system
once, in /var/cache/fabric-lab/testbed/rootfs (rootfs.stamp: the package list
and build settings; a change rebuilds it), with the ssh key pair that `up` names in
/etc/ssh/ssh_config.d/fabric-lab-testbed.conf. Each machine has its own ssh
host key (made once, in /var/cache/fabric-lab/testbed/host-keys; its sshd
offers only that one), and `up` writes a known_hosts of exactly those keys
(/var/cache/fabric-lab/testbed/known_hosts, on the host and in every
machine) that the snippet names: ssh to a machine checks its host key
(StrictHostKeyChecking yes), as cluster mode asks of real machines. record.json, rewritten as `up`
goes, names all it made (bridge, veths, each machine's PID 1 and unshare with
their start times: a reused pid is never signalled): `down`, and a failed
`up`'s roll-back, remove exactly that, even after its maker died.
net.core.wmem_default is not per network namespace here (read-only inside):
machines get the host's, which scripts/setup.sh raises to 64 MiB.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lab.processes import cpu_seconds, tree_cpu_seconds
from lab.progress_wait import CAP_S, STALL_S, wait_progressing
from lab.records import folder_lock, kill_if_same, pid_alive, start_time
from devtools.rootfs import CommandError, RootFS, forget_machine, install_missing, remove_tree, run

CACHE = Path("/var/cache/fabric-lab/testbed")
ROOTFS = CACHE / "rootfs"
KEY = CACHE / "id_ed25519"
HOST_KEYS = CACHE / "host-keys"
KNOWN_HOSTS = CACHE / "known_hosts"
STATE = Path("/run/fabric-lab/testbed")
RECORD = STATE / "record.json"
SNIPPET = Path("/etc/ssh/ssh_config.d/fabric-lab-testbed.conf")
PROJECT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
VARIANT = "minbase"
MIRROR = os.environ.get("FABRIC_TESTBED_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("openvswitch-switch", "openssh-server", "openssh-client", "mininet", "iproute2",
            "iputils-ping", "ethtool", "procps", "python3", "python3-venv", "iperf3", "iperf",
            "fping", "tcpdump", "kmod", "sudo", "python-is-python3", "git")
BUILD_VERSION = 1          # bump when the build's post-install steps change
BASE = RootFS(ROOTFS, SUITE, VARIANT, MIRROR, PACKAGES, needs="usr/sbin/sshd", stamp_text=(
    f"suite {SUITE}\nvariant {VARIANT}\nmirror {MIRROR}\nbuild {BUILD_VERSION}\n"
    f"packages {' '.join(PACKAGES)}\n"))
BRIDGE = "fltb0"
NET = "10.77.0"
MAX_MACHINES = 64
WIRE_MTU = 9050   # 9000-byte frames in VXLAN (+50); at 1500, OVS drops them ("Message too long")
SEND_BUFFER = 64 << 20
SSH_TRY_S = 30.0   # one ssh `true`; a slower one is tried again
SSHD_CONFIG = "# fabric lab test bed: root by key only; room for Mininet cluster's ssh\n" + "".join(
    f"{o}\n" for o in ("PermitRootLogin prohibit-password", "PasswordAuthentication no",
                       "KbdInteractiveAuthentication no", "UsePAM no", "UseDNS no",
                       "PermitTunnel yes", "MaxSessions 100", "MaxStartups 100"))
SSH_OPTIONS = ("User root", f"IdentityFile {KEY}", "IdentitiesOnly yes",
               "StrictHostKeyChecking yes", f"UserKnownHostsFile {KNOWN_HOSTS}",
               "BatchMode yes", "LogLevel ERROR")
HOST_KEY_CONFIG = ("# fabric lab test bed: this machine's own host key, no other\n"
                   "HostKey /etc/ssh/ssh_host_ed25519_key\n")
SNIPPET_TEXT = ("# fabric lab: written by `scripts/lab testbed up`, removed by `scripts/lab "
                f"testbed down`\nHost {NET}.*\n" + "".join(f"    {o}\n" for o in SSH_OPTIONS))
BOOT = """\
set -eu
R={dir}
mount -t overlay overlay -o lowerdir={rootfs},upperdir=$R/upper,workdir=$R/work $R/root
mount -t proc proc $R/root/proc
mount -t sysfs sysfs $R/root/sys
mount --rbind /dev $R/root/dev
mount -t tmpfs -o mode=1777 tmpfs $R/root/dev/shm
mount -t tmpfs -o mode=755 tmpfs $R/root/run
mount -t tmpfs -o mode=1777 tmpfs $R/root/tmp
mkdir -p $R/root{project} && mount -o bind,ro {project} $R/root{project}
hostname {name}
exec chroot $R/root /bin/sh /usr/local/sbin/fabric-testbed-init
"""
INIT = """\
# PID 1 of a fabric-lab test-bed machine: Open vSwitch, sshd, then reap orphans
# (SIGCHLD ignored: the kernel reaps them).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ip link set lo up
mkdir -p /run/sshd /run/openvswitch /var/log/openvswitch
/usr/share/openvswitch/scripts/ovs-ctl --no-ovs-vswitchd --system-id=random start
ovs-vswitchd unix:/run/openvswitch/db.sock -vconsole:emer -vsyslog:err -vfile:info \\
  --no-chdir --log-file=/var/log/openvswitch/ovs-vswitchd.log \\
  --pidfile=/run/openvswitch/ovs-vswitchd.pid --detach --monitor
/usr/sbin/sshd -E /var/log/sshd.log
exec python3 -c 'import signal; signal.signal(signal.SIGCHLD, signal.SIG_IGN); signal.pause()'
"""


class TestbedError(CommandError):
    """A failure of the test bed the user can act on, said in one sentence."""


def alive(pid: int, started: int) -> bool:
    """The recorded process (pid and start time) still runs: not gone, not
    reused by another process, not a zombie (killed, not yet reaped)."""
    return bool(started) and start_time(pid) == started and pid_alive(pid)


def link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def running(machine: dict) -> bool:
    """True while the machine's PID 1 or its unshare is still the recorded process."""
    return any(alive(machine.get(k, 0), machine.get(f"{k}_start")) for k in ("init", "unshare"))


def locked():
    """Serialise up and down, so two never work on the same record at once."""
    return folder_lock(STATE)


def load_record():
    with contextlib.suppress(OSError, ValueError):
        return json.loads(RECORD.read_text())


def save_record(record: dict) -> None:
    """Write the record so that readers never see half a file."""
    tmp = RECORD.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, RECORD)


def rootfs_current() -> bool:
    return BASE.current()


def furnish(root: Path) -> None:
    """What every machine shares beyond the packages: one Open vSwitch
    identity each (none in the tree), sshd's settings, the project's mount point."""
    forget_machine(root)
    (root / "etc/ssh/sshd_config.d/fabric-lab-testbed.conf").write_text(SSHD_CONFIG)
    (root / PROJECT.relative_to("/")).mkdir(parents=True, exist_ok=True)


def build_rootfs() -> None:
    install_missing({"debootstrap": "debootstrap"}, "testbed")
    print(f"testbed: building the machines' root file system once (minutes; log: {BASE.log})",
          flush=True)
    BASE.build(furnish)


def ensure_key() -> str:
    """The test bed's ssh key pair, made once; returns the public key."""
    if not KEY.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fabric-lab-testbed", "-f", KEY)
    return Path(f"{KEY}.pub").read_text()


def host_key(n: int) -> Path:
    """Machine n's ssh host key (made once); returns its private key's path."""
    key = HOST_KEYS / f"m{n}_ed25519"
    if not key.exists():
        HOST_KEYS.mkdir(mode=0o700, parents=True, exist_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fabric-lab-testbed m{n}",
            "-f", key)
    return key


def known_hosts(count: int) -> str:
    """known_hosts naming machines 1..count, by address and by name, with their keys."""
    lines = []
    for n in range(1, count + 1):
        kind, key = Path(f"{host_key(n)}.pub").read_text().split()[:2]
        lines.append(f"{NET}.{10 + n},m{n} {kind} {key}\n")
    return "".join(lines)


def write_known_hosts(count: int) -> str:
    text = known_hosts(count)
    KNOWN_HOSTS.write_text(text)
    return text


def prepare(n: int, count: int, pubkey: str) -> Path:
    """The machine's directories and the files that make it itself, written into
    its upper directory before the overlay is mounted; the key pair, ssh
    snippet and known_hosts too, so that machines ssh to each other as
    cluster mode does."""
    name, mdir = f"m{n}", STATE / f"m{n}"
    for sub in ("work", "root", f"upper{PROJECT}", "upper/root"):
        (mdir / sub).mkdir(mode=0o700 if sub == "upper/root" else 0o755, parents=True,
                           exist_ok=True)
    hosts = "".join(f"{NET}.{10 + i}\tm{i}\n" for i in range(1, count + 1))
    files = {"etc/hostname": f"{name}\n", "root/.ssh/authorized_keys": pubkey,
             "etc/hosts": f"127.0.0.1\tlocalhost\n{NET}.1\ttestbed-host\n{hosts}",
             "usr/local/sbin/fabric-testbed-init": INIT, str(SNIPPET)[1:]: SNIPPET_TEXT,
             str(KEY)[1:]: KEY.read_text(), str(KNOWN_HOSTS)[1:]: KNOWN_HOSTS.read_text(),
             "etc/ssh/ssh_host_ed25519_key": host_key(n).read_text(),
             "etc/ssh/ssh_host_ed25519_key.pub": Path(f"{host_key(n)}.pub").read_text(),
             "etc/ssh/sshd_config.d/fabric-lab-hostkey.conf": HOST_KEY_CONFIG}
    for path, text in files.items():
        (mdir / "upper" / path).parent.mkdir(parents=True, exist_ok=True)
        (mdir / "upper" / path).write_text(text)
    for secret in (str(KEY)[1:], "etc/ssh/ssh_host_ed25519_key"):
        (mdir / "upper" / secret).chmod(0o600)
    (mdir / "boot.sh").write_text(BOOT.format(dir=mdir, rootfs=ROOTFS, project=PROJECT,
                                              name=name))
    return mdir


def last_words(console: Path) -> str:
    """The last line a machine wrote to its console, for an error message."""
    lines = console.read_text(errors="replace").split("\n") if console.exists() else []
    return ([line.strip() for line in lines if line.strip()] or ["(no output)"])[-1]


def child_of(proc: subprocess.Popen, console: Path) -> int:
    """The child of unshare (the machine's PID 1), once it exists: waited
    for while unshare works (its CPU), however loaded the host."""
    def child():
        if proc.poll() is not None:
            raise TestbedError(f"a machine failed to start: {last_words(console)}")
        with contextlib.suppress(OSError):
            kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            return int(kids[0]) if kids else None
    waited = wait_progressing(child, lambda: cpu_seconds(proc.pid), stall_s=STALL_S,
                              cap_s=CAP_S, interval=0.02)
    if waited.ready:
        return waited.value
    raise TestbedError(f"a machine failed to start: {waited.reason('unshare')}; "
                       f"{last_words(console)}")


def launch(mdir: Path) -> dict:
    """Start the machine: unshare runs boot.sh as PID 1 of new namespaces
    (--kill-child: should unshare die, so does the machine)."""
    log = open(mdir / "console.log", "w")
    with log:
        proc = subprocess.Popen(
            ["unshare", "--mount", "--net", "--pid", "--uts", "--ipc", "--fork", "--kill-child",
             "--propagation", "private", "/bin/sh", str(mdir / "boot.sh")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    launched = time.monotonic()
    try:
        init = child_of(proc, mdir / "console.log")
    except TestbedError:
        proc.kill()
        raise
    return {"launched": launched, "unshare": proc.pid, "unshare_start": start_time(proc.pid),
            "init": init, "init_start": start_time(init)}


def wire(machine: dict) -> None:
    """Its veth: the host end on the bridge, the other end its eth0."""
    host_end, peer, pid = machine["veth"], f"fltbp-{machine['name']}", str(machine["init"])
    run("ip", "link", "add", host_end, "mtu", str(WIRE_MTU), "type", "veth", "peer", "name", peer,
        "mtu", str(WIRE_MTU))
    run("ip", "link", "set", host_end, "master", BRIDGE, "up")
    run("ip", "link", "set", peer, "netns", pid)
    inside = ("nsenter", "-t", pid, "-n", "ip")
    run(*inside, "link", "set", peer, "name", "eth0")
    run(*inside, "addr", "add", f"{machine['address']}/24", "dev", "eth0")
    run(*inside, "link", "set", "eth0", "up")
    run(*inside, "route", "add", "default", "via", f"{NET}.1")


def wait_for_ssh(machines) -> dict:
    """Seconds from each machine's launch until it answers `true` over ssh.
    Bounded by the machines' progress (the CPU of each one's whole process
    tree: its boot script, Open vSwitch, sshd), not the clock: a loaded host
    boots them slower, and is let."""
    ready = {}
    ssh = ["ssh", "-F", "none", "-o", "ConnectTimeout 2"] + [f"-o{o}" for o in SSH_OPTIONS]

    def all_answer():
        for m in machines:
            if m["name"] in ready:
                continue
            if not alive(m["init"], m["init_start"]):
                raise TestbedError(f"machine {m['name']} died while booting: "
                                   f"{last_words(STATE / m['name'] / 'console.log')}")
            with contextlib.suppress(subprocess.TimeoutExpired):     # tried again
                if run(*ssh, m["address"], "true", check=False, timeout=SSH_TRY_S).returncode == 0:
                    ready[m["name"]] = time.monotonic() - m["launched"]
        return len(ready) == len(machines)

    waited = wait_progressing(
        all_answer, lambda: (len(ready), sum(tree_cpu_seconds(m["init"]) for m in machines)),
        stall_s=STALL_S, cap_s=CAP_S, interval=0.2)
    if not waited.ready:
        late = [m["name"] for m in machines if m["name"] not in ready]
        raise TestbedError(f"sshd of {', '.join(late)} did not answer: "
                           f"{waited.reason('the machines')}.")
    return ready


def check_free(count: int) -> None:
    """Refuse names that something else on the host already uses."""
    for name in [BRIDGE] + [f"fltb{p}-m{n}" for n in range(1, count + 1) for p in ("", "p")]:
        if link_exists(name):
            raise TestbedError(f"interface {name} already exists and is not the test bed's: "
                               "remove it first.")


def make_bridge(record: dict) -> None:
    record["bridge"] = BRIDGE          # recorded first: check_free showed the name was free
    save_record(record)
    run("ip", "link", "add", BRIDGE, "mtu", str(WIRE_MTU), "type", "bridge")
    run("ip", "addr", "add", f"{NET}.1/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def make_machine(record: dict, n: int, count: int, pubkey: str) -> dict:
    """Start machine n and wire it; the record names each piece as it is made."""
    name = f"m{n}"
    machine = {"name": name, "address": f"{NET}.{10 + n}", "veth": f"fltb-{name}",
               "dir": str(STATE / name)}
    record["machines"].append(machine)
    save_record(record)
    mdir = prepare(n, count, pubkey)
    machine.update(launch(mdir))
    machine["mounts"] = [f"{mdir}/root{p}" for p in
                         ("", "/proc", "/sys", "/dev", "/dev/shm", "/run", "/tmp", str(PROJECT))]
    save_record(record)
    try:
        wire(machine)
    except CommandError:
        if alive(machine["init"], machine["init_start"]):
            raise
        raise TestbedError(f"machine {name} died while booting: "
                           f"{last_words(mdir / 'console.log')}") from None
    return machine


def write_snippet(record: dict) -> None:
    record["ssh_snippet"] = str(SNIPPET)
    save_record(record)
    SNIPPET.parent.mkdir(parents=True, exist_ok=True)
    SNIPPET.write_text(SNIPPET_TEXT)
    main_config = Path("/etc/ssh/ssh_config")
    if main_config.exists() and "ssh_config.d" not in main_config.read_text():
        print(f"testbed: warning: {main_config} does not include ssh_config.d/*.conf, so plain "
              f"`ssh {NET}.11` will not use {SNIPPET}", file=sys.stderr)


def check_send_buffer(machine: dict) -> None:
    """The userspace datapath's send buffer (see scripts/setup.sh), as a machine sees it."""
    value = run("nsenter", "-t", str(machine["init"]), "-n", "cat",
                "/proc/sys/net/core/wmem_default", check=False).stdout.strip()
    if value.isdigit() and int(value) < SEND_BUFFER:
        print(f"testbed: warning: the machines' net.core.wmem_default is {value}: raise the "
              "host's (sudo scripts/lab setup)", file=sys.stderr)


def up(count: int) -> None:
    if not 1 <= count <= MAX_MACHINES:
        raise TestbedError(f"the number of machines must be between 1 and {MAX_MACHINES}.")
    started = time.monotonic()
    with locked():
        record = load_record()
        if record and any(running(m) for m in record["machines"]):
            raise TestbedError(f"the test bed is already up with {len(record['machines'])} "
                               f"machines: run `scripts/lab testbed down` first.")
        if record:
            print("testbed: removing what a test bed that died left behind", flush=True)
            if teardown(record):
                raise TestbedError("a dead test bed's remains would not go: see `status`.")
        check_free(count)
        if not rootfs_current():
            build_rootfs()
        pubkey = ensure_key()
        write_known_hosts(count)
        record = {"owner": os.getpid(), "bridge": None, "machines": [], "ssh_snippet": None}
        try:
            save_record(record)
            make_bridge(record)
            for n in range(1, count + 1):
                make_machine(record, n, count, pubkey)
            write_snippet(record)
            ready = wait_for_ssh(record["machines"])
        except BaseException:
            teardown(record)
            raise
    check_send_buffer(record["machines"][0])
    for m in record["machines"]:
        print(f"{m['name']}  {m['address']}  ssh ready in {ready[m['name']]:.1f} s "
              f"(init pid {m['init']})")
    print(f"testbed: {count} machines up in {time.monotonic() - started:.1f} s; "
          f"try `ssh {NET}.11 hostname`")


def kill_machine(machine: dict) -> None:
    """SIGKILL the machine's PID 1 (the kernel then kills its whole PID namespace),
    and its unshare, each only if it is still the process that was recorded."""
    for key in ("init", "unshare"):
        if alive(machine.get(key, 0), machine.get(f"{key}_start")):
            kill_if_same(machine[key], machine[f"{key}_start"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and running(machine):
        time.sleep(0.05)


def teardown(record: dict) -> list:
    """Remove what the record names, last made first; returns what could not be
    removed, and then keeps the record so that `down` can be tried again."""
    left, snippet = [], Path(record.get("ssh_snippet") or "/nonexistent")
    if snippet.exists() and "fabric lab" in snippet.read_text():
        snippet.unlink()
    for machine in reversed(record.get("machines", [])):
        kill_machine(machine)
        if running(machine):
            left.append(f"machine {machine['name']} (pid {machine.get('init')}) still runs")
            continue
        if link_exists(machine["veth"]):
            run("ip", "link", "del", machine["veth"], check=False)
        try:
            remove_tree(Path(machine["dir"]))
        except CommandError as error:
            left.append(str(error))
    if record.get("bridge") and link_exists(record["bridge"]):
        run("ip", "link", "del", record["bridge"], check=False)
    if not left:
        RECORD.unlink(missing_ok=True)
    return left


def down() -> None:
    started = time.monotonic()
    with locked():
        record = load_record()
        if record is None:
            print("testbed: the test bed is not up: nothing to remove.")
            return
        left = teardown(record)
    if left:
        raise TestbedError("down left something behind: " + "; ".join(left) + ".")
    print(f"testbed: {len(record['machines'])} machines, their veths, {BRIDGE} and the ssh "
          f"snippet removed in {time.monotonic() - started:.1f} s")


def status() -> int:
    """What is up, from the record; exit status 1 when a recorded machine died."""
    record = load_record()
    print(f"root file system {ROOTFS}: {'built' if rootfs_current() else 'not built or stale'}")
    if record is None:
        print("testbed: not up")
        return 0
    states = [running(m) for m in record["machines"]]
    for m, ok in zip(record["machines"], states):
        print(f"{m['name']}  {m['address']}  {'up' if ok else 'DEAD'}  init pid {m.get('init')}"
              f"  veth {m['veth']}")
    print(f"bridge {BRIDGE}: {'present' if link_exists(BRIDGE) else 'missing'}; "
          f"ssh snippet: {record.get('ssh_snippet')}")
    return 0 if all(states) else 1


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if args == ["status"]:
            return status()
        if os.geteuid() != 0:
            raise TestbedError("the test bed needs root (namespaces, mounts, links): "
                               "run it with sudo.")
        if len(args) == 2 and args[0] == "up" and args[1].isdigit():
            up(int(args[1]))
        elif args == ["down"]:
            down()
        else:
            print("usage: python -m devtools.testbed up N | down | status", file=sys.stderr)
            return 2
    except CommandError as error:
        print(f"testbed: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("testbed: interrupted; what was made was removed.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
