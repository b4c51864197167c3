"""A Debian root file system made once by debootstrap and cached beside a
stamp of what went into it: the test bed's machines (devtools/testbed.py) boot
from one, the VM test's disk image (devtools/vmtest.py) is made from another.

debootstrap runs in namespaces of its own (mount, PID, UTS, IPC), so that no
daemon a package's postinst starts outlives it and no mount leaks, into a
scratch directory beside the cached tree; only a whole build replaces the
cached tree, and the stamp is written last, so a tree whose stamp matches is
a finished build of exactly those settings. Also here, because both callers
need them for that: a quiet command runner whose failure is one sentence,
installing missing tools from apt, and deleting a tree without ever going
through a mount point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

# What makes a booted tree one particular machine (its Open vSwitch identity)
# or is not worth keeping in the cache.
MACHINE_FILES = ("etc/openvswitch/*conf.db*", "etc/openvswitch/system-id.conf",
                 "var/cache/apt/archives/*.deb", "var/log/openvswitch/*.log")


class CommandError(Exception):
    """A failure the user can act on, said in one sentence."""


def run(*cmd, check=True, **kw) -> subprocess.CompletedProcess:
    """Run a command quietly; on failure raise its last line of error as a CommandError."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]
        raise CommandError(f"`{' '.join(map(str, cmd[:4]))}` failed: {why}")
    return proc


def install_missing(tools: Dict[str, str], who: str, recommends: bool = True) -> None:
    """apt-get install the package of each tool ({tool: package}) not on PATH."""
    missing = [package for tool, package in tools.items() if not shutil.which(tool)]
    if not missing:
        return
    print(f"{who}: installing {' '.join(missing)}", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = "apt-get install -y -q" + ("" if recommends else " --no-install-recommends")
    run("sh", "-c", f"apt-get update -q && {install} {' '.join(missing)}", env=env)


def mounts_under(path: Path):
    """Mount points at or below `path` in this mount namespace, deepest first."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    inside = [p for p in points if p == str(path) or p.startswith(f"{path}/")]
    return sorted(set(inside), key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """rm -rf, but never through a mount point (a bind of the project, say)."""
    for point in mounts_under(path):
        run("umount", "-l", point, check=False)
    if mounts_under(path):
        raise CommandError(f"{path} still has mounts below it, so it was not deleted.")
    shutil.rmtree(path, ignore_errors=True)


def forget_machine(root: Path) -> None:
    """Delete what would make every machine booted from `root` the same one."""
    for pattern in MACHINE_FILES:
        for item in root.glob(pattern):
            item.unlink()


@dataclass(frozen=True)
class RootFS:
    """A cached root file system: where it lives (its stamp, scratch tree
    and build log beside it), what debootstrap puts in it, and the stamp
    text that says a finished build holds exactly that."""
    path: Path
    suite: str
    variant: str
    mirror: str
    packages: Tuple[str, ...]
    stamp_text: str
    needs: str = ""          # a file the tree must hold to count as built ("": the tree)

    @property
    def stamp(self) -> Path:
        return self.path.with_name(f"{self.path.name}.stamp")

    @property
    def log(self) -> Path:
        return self.path.with_name("build.log")

    def current(self) -> bool:
        """Built, and with exactly these settings."""
        return (self.path / self.needs).exists() and self.stamp.is_file() \
            and self.stamp.read_text() == self.stamp_text

    def build(self, furnish: Optional[Callable[[Path], None]] = None) -> float:
        """debootstrap into the scratch tree, `furnish` it, and put it in
        place of the cached one; returns the seconds it took."""
        started, scratch = time.monotonic(), self.path.with_name(f"{self.path.name}.new")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_tree(scratch)
        with open(self.log, "w") as out:
            proc = subprocess.run(
                ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--uts", "--ipc",
                 "--kill-child", "debootstrap", f"--variant={self.variant}",
                 f"--include={','.join(self.packages)}", self.suite, str(scratch), self.mirror],
                stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            remove_tree(scratch)
            raise CommandError(f"debootstrap failed (exit status {proc.returncode}): "
                               f"see {self.log}.")
        if furnish:
            furnish(scratch)
        self.stamp.unlink(missing_ok=True)
        remove_tree(self.path)
        scratch.rename(self.path)
        self.stamp.write_text(self.stamp_text)
        return time.monotonic() - started
