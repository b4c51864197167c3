"""What a run needs of a running lab, written down once: the engines, the
monitor, the prober, the failures and run_topology.py use these members and
nothing else. Lab (lab/lifecycle.py), ClusterLab (lab/cluster/cluster.py) and the
slice a machine builds for a cluster run (lab/cluster/machine.py) all provide it, by
extending Lab's one `start()` through its hooks (check, claim, build,
settle) instead of copying it.

A new kind of lab subclasses Lab and overrides the hooks and members it
must; tests/test_lab_protocol.py holds every kind to this protocol.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Protocol, runtime_checkable


@runtime_checkable
class RunningLab(Protocol):
    """A started lab, as runs use it."""
    fabric: object                    # topologies.fabric.Fabric: what was built
    run_dir: Path                     # where the lab's own files go
    datapath: Optional[str]           # "kernel", "user" (or per machine, "kernel/user")
    warnings: List[str]               # what about the host bends the figures
    ecn: object                       # lab/ecn.py EcnPlan: marking and DCTCP, asked and done
    timings: Dict[str, float]         # start's steps and the teardown, in seconds
    status: dict                      # the controller's (or spanning tree's) at readiness
    spread: bool                      # across several machines (cluster mode)

    @property
    def controlled(self) -> bool:
        """Whether an os-ken controller routes it (the policy says)."""

    def host(self, name: str):
        """The Mininet host (or a proxy with its pid) of a server."""

    def netns(self, server: str) -> str:
        """A path to the server's network namespace."""

    def popen(self, server: str, args: List[str], **kwargs) -> subprocess.Popen:
        """A process started in a server's namespace, tracked for teardown."""

    def set_link(self, a: str, b: str, up: bool, index: int = 0,
                 silent: bool = False) -> None:
        """Take a link between two nodes down or up (the `index`-th parallel one)."""

    def controller_status(self) -> dict:
        """The controller's last status (ports down, groups, adaptive placements)."""

    def wait_programmed(self, timeout: float = 60, until=lambda status: True) -> dict:
        """Wait until every switch is programmed and `until(status)` holds."""

    def counters(self, intfs) -> dict:
        """One monitor sample: bytes sent per interface, queues, CPU."""

    def hosts(self) -> List[str]:
        """The machines it runs on; none named when on this one alone."""

    def summary(self) -> Optional[dict]:
        """Its machines, controller and tunnels when spread; None otherwise."""

    def stop(self) -> None:
        """Tear down exactly what it started; safe to call twice."""
