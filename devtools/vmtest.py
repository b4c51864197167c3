"""The VM test: `python -m devtools.vmtest [--keep-image] [--timeout S]` (`scripts/lab
vm-test`) runs the lab where the host cannot, with the kernel datapath and a
link with delay and loss, in a virtual machine made from Debian packages alone.

Why a VM: the development machines' kernel has no openvswitch module and no
sch_netem, and KVM guests hang there (no nested virtualisation); qemu without
KVM (TCG, slow but sure) boots Debian's own kernel, which has both.

Build (once, cached in /var/cache/fabric-lab/vm): debootstrap bookworm
(minbase) with the kernel, Open vSwitch, Mininet and everything
scripts/setup.sh lists, in namespaces of its own as for the test bed
(devtools/rootfs.py), into rootfs/ (rootfs.stamp: suite, mirror, packages);
then the guest's init script and fabric written in, an ext4 disk image made from the directory without
mounting anything (`mkfs.ext4 -d`), and the kernel and initrd copied out of
its /boot (vm.stamp: the root file system's stamp, a hash of the guest's
files, the image settings). A changed package list rebuilds everything; a
changed init script or fabric only remakes the image (seconds).

Boot: qemu -accel tcg, the kernel booted directly, the disk with snapshot=on
(the guest's writes go to a temporary overlay: the cached image stays clean)
and this project shared read-only over virtio-9p at its own path, so the
host's .venv (its python is /usr/bin/python3, Debian's 3.11 in both) works
inside. The guest's init (PID 1, no systemd) mounts what it needs, loads
openvswitch and sch_netem, starts Open vSwitch with ovs-ctl, runs
scripts/setup.sh (which then finds everything installed and the .venv
current: no network needed; the guest has none) and one short run_topology.py
with --datapath kernel, printing stage lines and the run's JSON between
marker lines on the serial console, then powers off. qemu runs in a session of
its own (a terminal's Ctrl-C reaches this process, which stops it) and dies
with this process even if that is killed outright (PR_SET_PDEATHSIG).

The host follows the console log (vm/console.log), noting when each stage
line appears, and judges: booted, set-up, run, datapath kernel, delay seen
in the idle latency, loss configured, all pairs reachable, #wrong 0. qemu is
killed in a `finally`, whatever happened: timeout, error or Ctrl-C. The
wait for the guest is bounded by its progress (qemu's CPU, the console
growing), not by the clock: under load the VM takes longer, and is let.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from lab.processes import cpu_seconds
from lab.progress_wait import wait_progressing
from devtools.rootfs import CommandError, RootFS, forget_machine, install_missing, run

CACHE = Path("/var/cache/fabric-lab/vm")
IMAGE = CACHE / "disk.img"
KERNEL = CACHE / "vmlinuz"
INITRD = CACHE / "initrd.img"
STAMP = CACHE / "vm.stamp"
CONSOLE = CACHE / "console.log"
ROOTFS = CACHE / "rootfs"
PROJECT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
VARIANT = "minbase"
IMAGE_SIZE = "4G"
MIRROR = os.environ.get("FABRIC_VM_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = ("linux-image-amd64", "openvswitch-switch", "mininet", "iproute2", "iputils-ping",
                 "ethtool", "iperf3", "iperf", "fping", "tcpdump", "procps", "kmod", "python3",
                 "python3-venv", "python-is-python3", "sudo", "make")
BUILD_VERSION = 1          # bump when the build's post-install steps or the guest's init change
MEMORY_MB = 3072
CPUS = 2
DEFAULT_TIMEOUT = 4 * 3600.0  # wall seconds: only against a hang the two below cannot see
QEMU_CPU_S = 3000.0     # qemu's CPU for boot, set-up and run: 120 s here, 200-250 s loaded
STALL_S = 300.0         # qemu using no CPU and the console silent this long: stopped
DELAY_MS = 5
LOSS_PERCENT = 1
MARK = "=== fabric-vm-test"
BEGIN = f"{MARK} result begin ==="
END = f"{MARK} result end ==="
GUEST_FABRIC = "/etc/fabric-vm/fabric.yaml"
FABRIC = f"""\
# The VM test's fabric (devtools/vmtest.py): small, with delay and loss on the
# server links, which need sch_netem: the host kernel has none, the VM's has.
name: vm-test-2x2
fabric:
  spines: 2
  leaves: 2
  servers_per_leaf: 1
links:
  server_leaf:
    {{rate_mbit: 20, queue_packets: 100, delay_ms: {DELAY_MS}, loss_percent: {LOSS_PERCENT}}}
  leaf_spine:  {{rate_mbit: 20, queue_packets: 100}}
"""
RUN_ARGS = f"{GUEST_FABRIC} --datapath kernel -b 32K -e 32K -n 1 -w 0 --json --results /tmp/results"
INIT = f"""\
#!/bin/sh
# PID 1 of the fabric-lab test VM (devtools/vmtest.py): set up, one short run, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
export PYTHONDONTWRITEBYTECODE=1
stage() {{ echo "{MARK} stage $1 $(cut -d' ' -f1 /proc/uptime) ==="; }}
off() {{ sync; echo o > /proc/sysrq-trigger; sleep 30; }}
stage init
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts; mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mountpoint -q /run || mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
dmesg -n 1
hostname fabric-vm; ip link set lo up
modprobe 9pnet_virtio; modprobe 9p
mkdir -p {PROJECT}
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro project {PROJECT} \\
  || {{ echo "{MARK} error: the project did not mount over 9p ==="; off; }}
modprobe openvswitch && modprobe sch_netem || echo "{MARK} error: modprobe failed ==="
modprobe sch_red; modprobe tcp_dctcp
sysctl -q -w net.core.wmem_default=$((64 << 20))
mkdir -p /run/openvswitch /var/log/openvswitch
/usr/share/openvswitch/scripts/ovs-ctl start --system-id=random
stage setup
cd {PROJECT} && scripts/setup.sh
echo "{MARK} setup exit $? ==="
stage imports
.venv/bin/python -c 'import numpy, os_ken, mininet.net' 2>/tmp/import.err \\
  || echo "{MARK} error: the .venv does not import: $(tail -n 1 /tmp/import.err) ==="
stage run
.venv/bin/python run_topology.py {RUN_ARGS} >/tmp/run.json 2>/tmp/run.err
echo "{MARK} run exit $? ==="
stage done
tail -n 20 /tmp/run.err
for f in $(find /tmp/results -name '*.log' -size +0 | head -n 5); do
  echo "--- $f"; tail -n 5 "$f"
done
echo "{BEGIN}"; cat /tmp/run.json; echo "{END}"
mods=$(lsmod | grep -E '^(openvswitch|sch_netem|sch_red|tcp_dctcp) ' | cut -d' ' -f1 | tr '\\n' ' ')
echo "{MARK} modules: $mods ==="
off
"""


class VMTestError(CommandError):
    """A failure of the VM test the user can act on, said in one sentence."""


def setup_packages() -> tuple:
    """scripts/setup.sh's PACKAGES, so that set-up inside finds them all installed."""
    text = (PROJECT / "scripts" / "setup.sh").read_text()
    found = re.search(r"^PACKAGES=\(([^)]*)\)", text, re.M)
    return tuple(found.group(1).split()) if found else ()


def packages() -> tuple:
    return tuple(dict.fromkeys(BASE_PACKAGES + setup_packages()))


def base() -> RootFS:
    """The guest's root file system: Debian with the kernel and everything
    scripts/setup.sh installs (read when asked: setup.sh may change)."""
    return RootFS(ROOTFS, SUITE, VARIANT, MIRROR, packages(), stamp_text=(
        f"suite={SUITE} variant={VARIANT} mirror={MIRROR}\npackages={','.join(packages())}\n"))


def image_stamp() -> str:
    """What the image is made of: the root file system, the guest's files, the settings."""
    guest = hashlib.sha256((INIT + FABRIC).encode()).hexdigest()[:16]
    return f"{base().stamp_text}size={IMAGE_SIZE} build={BUILD_VERSION} guest={guest}\n"


def image_current() -> bool:
    return all(p.exists() for p in (IMAGE, KERNEL, INITRD)) and \
        STAMP.exists() and STAMP.read_text() == image_stamp()


def ensure_tools() -> None:
    """qemu and debootstrap, from apt, when missing."""
    install_missing({"qemu-system-x86_64": "qemu-system-x86", "debootstrap": "debootstrap",
                     "mkfs.ext4": "e2fsprogs"}, "vm-test", recommends=False)


def build_rootfs() -> float:
    """debootstrap the root file system (devtools/rootfs.py); returns seconds."""
    rootfs = base()
    print(f"vm-test: debootstrap of the VM's root file system (minutes; log: {rootfs.log})",
          flush=True)
    return rootfs.build()


def furnish(root: Path) -> None:
    """What makes the root file system the test VM: its init, fabric, mount point."""
    forget_machine(root)
    init = root / "sbin/fabric-vm-init"
    init.write_text(INIT)
    init.chmod(0o755)
    (root / GUEST_FABRIC[1:]).parent.mkdir(parents=True, exist_ok=True)
    (root / GUEST_FABRIC[1:]).write_text(FABRIC)
    (root / PROJECT.relative_to("/")).mkdir(parents=True, exist_ok=True)
    (root / "etc/hostname").write_text("fabric-vm\n")
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n127.0.1.1\tfabric-vm\n")


def boot_file(root: Path, pattern: str) -> Path:
    found = sorted((root / "boot").glob(pattern))
    if not found:
        raise VMTestError(f"the root file system has no /boot/{pattern}: see {base().log}.")
    return found[-1]


def build_image() -> dict:
    """The root file system if stale, then the guest's files written into it and
    the disk image, kernel and initrd made from it; returns the seconds of each."""
    CACHE.mkdir(parents=True, exist_ok=True)
    took = {"debootstrap": build_rootfs() if not base().current() else 0.0}
    started = time.monotonic()
    furnish(ROOTFS)
    STAMP.unlink(missing_ok=True)
    shutil.copyfile(boot_file(ROOTFS, "vmlinuz-*"), KERNEL)
    shutil.copyfile(boot_file(ROOTFS, "initrd.img-*"), INITRD)
    new = CACHE / "disk.img.new"
    new.unlink(missing_ok=True)
    try:
        run("mkfs.ext4", "-q", "-F", "-L", "fabric-vm", "-d", str(ROOTFS), str(new), IMAGE_SIZE)
    except CommandError:
        new.unlink(missing_ok=True)
        raise
    new.rename(IMAGE)
    STAMP.write_text(image_stamp())
    took["image"] = time.monotonic() - started
    print(f"vm-test: image made in {took['image']:.0f} s ({IMAGE})", flush=True)
    return took


def qemu_command() -> list:
    """-cpu max: qemu64, TCG's default, lacks SSE4.2, below numpy 2's baseline (x86-64-v2)."""
    return ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", str(CPUS),
            "-m", str(MEMORY_MB),
            "-nographic", "-no-reboot", "-kernel", str(KERNEL), "-initrd", str(INITRD),
            "-append", "root=/dev/vda rw console=ttyS0 panic=-1 init=/sbin/fabric-vm-init",
            "-drive", f"file={IMAGE},if=virtio,format=raw,snapshot=on",
            "-virtfs", f"local,path={PROJECT},mount_tag=project,security_model=none,readonly=on",
            "-nic", "none"]


def stage_lines(text: str) -> dict:
    """Each stage line's name and the guest's uptime then."""
    return {m.group(1): float(m.group(2))
            for m in re.finditer(rf"^{MARK} stage (\w+) ([\d.]+) ===", text, re.M)}


def follow(proc: subprocess.Popen, cap_s: float) -> dict:
    """Wait for qemu to end (the guest powers off), noting when, in seconds
    after qemu started, each stage line first appeared on the console.
    Bounded by the guest's progress, not the clock: a loaded host hands
    qemu its CPU more slowly and the guest takes longer in wall time. It
    fails once qemu has used QEMU_CPU_S of CPU (the guest spins without
    finishing), when qemu used no CPU and the console did not grow for
    STALL_S (stopped), or after `cap_s`, only against a hang."""
    started, seen, used = time.monotonic(), {}, [0.0]

    def ended():
        gone = proc.poll() is not None           # first: the console read after is whole
        text = CONSOLE.read_text(errors="replace") if CONSOLE.exists() else ""
        for name in stage_lines(text):
            seen.setdefault(name, round(time.monotonic() - started, 1))
        return gone

    def progress():
        used[0] = max(used[0], cpu_seconds(proc.pid))           # 0 once reaped
        return used[0], CONSOLE.stat().st_size if CONSOLE.exists() else 0
    waited = wait_progressing(ended, progress, stall_s=STALL_S, cap_s=cap_s, interval=0.5,
                              spent=lambda: cpu_seconds(proc.pid) > QEMU_CPU_S)
    if not waited.ready:
        raise VMTestError(f"the VM did not finish: {waited.reason('qemu')}, "
                          f"{used[0]:.0f} s of qemu's CPU (last stage: "
                          f"{max(seen, key=seen.get) if seen else 'none'}; see {CONSOLE}).")
    seen["qemu_exit"] = round(time.monotonic() - started, 1)
    seen["qemu_cpu"] = used[0]
    return seen


def die_with_parent() -> None:
    """In qemu's child before exec: SIGKILL it should this process die, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)     # 1: PR_SET_PDEATHSIG


def boot(cap_s: float) -> dict:
    """Boot the VM, follow it to its end, and kill qemu on every way out."""
    with open(CONSOLE, "w") as log:
        proc = subprocess.Popen(qemu_command(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=die_with_parent)
    print(f"vm-test: booting qemu (TCG, pid {proc.pid}; console: {CONSOLE})", flush=True)
    try:
        return follow(proc, cap_s)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def result_json(text: str):
    """The run's JSON printed between the marker lines, or None."""
    if BEGIN not in text or END not in text:
        return None
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    start = body.find("{")
    try:
        return json.loads(body[start:].replace("\r", "")) if start >= 0 else None
    except json.JSONDecodeError:
        return None


def marker(text: str, name: str) -> str:
    found = re.search(rf"^{MARK} {name}:? (.*?) ===", text, re.M)
    return found.group(1).strip() if found else ""


def figures(summary: dict) -> dict:
    """The figures the verdict reads from the run's JSON."""
    coll = summary.get("collectives", {})
    reach = summary.get("reachability", {})
    runs = coll.get("runs", [])
    return {"datapath": summary.get("datapath"),
            "reachable": f"{reach.get('ok')}/{reach.get('total')}",
            "reach_ok": bool(reach.get("total")) and reach.get("ok") == reach.get("total"),
            "wrong": [r.get("wrong") for r in runs],
            "idle_p50_us": coll.get("idle_latency", {}).get("p50_us"),
            "idle_lost": coll.get("idle_latency", {}).get("lost"),
            "drops": sum(link.get("drops", 0) for r in runs
                         for link in r.get("links", {}).values()),
            "links": summary.get("links"), "ecn": summary.get("ecn") or {}}


def checks(fig: dict) -> list:
    """(holds, what) for each thing the verdict asks. The idle probe's path
    crosses two delayed server links each way: its round trip holds 4 x delay."""
    shaped = str((fig["links"] or {}).get("server_leaf", ""))
    netem = f"{DELAY_MS} ms delay" in shaped and f"{LOSS_PERCENT}% loss" in shaped
    p50, floor = fig["idle_p50_us"], 4 * DELAY_MS * 1000
    seen = isinstance(p50, (int, float)) and p50 >= floor
    latency = f"idle latency p50 {p50 / 1000:.1f} ms" if isinstance(p50, (int, float)) else \
        "no idle latency measured"
    return [(fig["datapath"] == "kernel", f"datapath {fig['datapath']}"),
            (netem, f"netem on the server links: {shaped or 'none'}"),
            (seen, f"delay seen: {latency} (>= {floor / 1000:.0f} ms: 2 links x {DELAY_MS} ms, "
                   "both ways)"),
            (fig["reach_ok"], f"reachability {fig['reachable']}"),
            (fig["ecn"].get("marking") is True and fig["ecn"].get("dctcp") is True,
             f"ECN marking and DCTCP (RoCE's, the default technology): {fig['ecn'] or 'none'}"),
            (bool(fig["wrong"]) and not any(fig["wrong"]), f"#wrong {fig['wrong']}")]


def verdict(seen: dict, text: str) -> int:
    """Print what the VM did and return the exit status: 0 only if all held."""
    def span(a, b):
        return f"{seen[b] - seen[a]:.0f} s" if a in seen and b in seen else "?"
    print(f"vm-test: booted in {seen['init']:.0f} s" if "init" in seen else
          "vm-test: the guest's init never ran", flush=True)
    print(f"vm-test: set-up {span('setup', 'imports')} (exit {marker(text, 'setup exit') or '?'}),"
          f" the .venv's imports {span('imports', 'run')}, "
          f"run {span('run', 'done')} (exit {marker(text, 'run exit') or '?'}), "
          f"qemu ended at {seen.get('qemu_exit', 0):.0f} s, "
          f"having used {seen.get('qemu_cpu', 0):.0f} s of CPU")
    print(f"vm-test: modules loaded: {marker(text, 'modules') or 'none'}")
    errors = re.findall(rf"^{MARK} error: (.*?) ===", text, re.M)
    summary = result_json(text)
    if summary is None:
        why = errors[0] if errors else "the run printed no JSON result"
        print(f"vm-test: FAILED: {why} (see {CONSOLE}).", file=sys.stderr)
        return 1
    fig = figures(summary)
    results = checks(fig)
    for ok, what in results:
        print(f"vm-test: {'ok  ' if ok else 'FAIL'} {what}")
    print(f"vm-test: loss seen: {fig['idle_lost']} idle probes lost, {fig['drops']} drops "
          "counted on the links during the run (random at 1%: may be 0)")
    failed = [what for ok, what in results if not ok] + errors
    if failed:
        print(f"vm-test: FAILED: {failed[0]} (see {CONSOLE}).", file=sys.stderr)
        return 1
    print("vm-test: passed: kernel datapath, netem delay and loss, ECN marking and DCTCP, all "
          "pairs reachable, #wrong 0")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.vmtest", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep-image", action="store_true",
                        help="use the cached image even if its stamp is stale")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"wall seconds past which the VM is stopped even while it "
                             f"still makes progress (default {DEFAULT_TIMEOUT:.0f}; it is "
                             f"stopped sooner once it stalls {STALL_S:.0f} s or spins past "
                             f"{QEMU_CPU_S:.0f} s of qemu's CPU)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGHUP):      # as Ctrl-C: the `finally` stops qemu
        signal.signal(sig, signal.default_int_handler)
    try:
        if os.geteuid() != 0:
            raise VMTestError("the VM test needs root (debootstrap, apt): run it with sudo.")
        ensure_tools()
        have = IMAGE.exists() and KERNEL.exists() and INITRD.exists()
        built = {} if image_current() or (args.keep_image and have) else build_image()
        seen = boot(args.timeout)
        status = verdict(seen, CONSOLE.read_text(errors="replace"))
    except CommandError as error:
        print(f"vm-test: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("vm-test: interrupted; qemu was stopped.", file=sys.stderr)
        return 130
    print(f"vm-test: total {time.monotonic() - started:.0f} s" + (
        f" (debootstrap {built['debootstrap']:.0f} s, image {built['image']:.0f} s)" if built
        else " (cached image)"))
    return status


if __name__ == "__main__":
    sys.exit(main())
