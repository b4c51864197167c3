"""Entering another network namespace for a moment, to make a socket there.

A socket belongs to the namespace it was created in, whichever namespace its
process moves to afterwards; so one process can own the sockets of many
endpoints (Mininet hosts) and drive them all. Python 3.12 has os.setns; on
3.11 the C library's setns(2) is called directly. Needs CAP_SYS_ADMIN (root).
"""

from __future__ import annotations

import contextlib
import ctypes
import os

CLONE_NEWNET = 0x40000000
SELF = "/proc/thread-self/ns/net"


def set_netns(fd: int) -> None:
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def inside(path: str):
    """Run the body with this thread in the network namespace at `path`
    (e.g. /proc/PID/ns/net); '' means the one it is in already."""
    if not path:
        yield
        return
    home = os.open(SELF, os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
        try:
            set_netns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            set_netns(home)
    finally:
        os.close(home)
