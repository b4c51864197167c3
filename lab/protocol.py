"""What a run needs of a running lab, written down once: the engines, the
monitor, the prober, the failures and run_topology.py use these members and
nothing else. Lab (lab/lifecycle.py), ClusterLab (lab/cluster/cluster.py) and the
slice a machine builds for a cluster run (lab/cluster/machine.py) all provide it, by
extending Lab's one `start()` through its hooks (check, claim, build,
settle) instead of copying it.

A new kind of lab subclasses Lab and overrides the hooks and members it
must; tests/test_lab_protocol.py holds every kind to this protocol.

Two more: `Controller`, what a lab is given to route its switches
(lab/controller_process.py: the os-ken process, or one running elsewhere),
and `KeptLab`, what the keeper of a kept lab (lab/kept/keeper.py) uses of
the Lab it owns between commands, and nothing else.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable, Dict, List, Optional, Protocol, runtime_checkable


@runtime_checkable
class Controller(Protocol):
    """The controller a lab's switches meet, handed to the lab as Mininet's
    `Mininet(controller=...)` is: the lab starts and stops it."""
    ip: str                           # where the switches find it
    port: Optional[int]               # its OpenFlow port, once started
    pid: Optional[int]                # its process here; None when it runs elsewhere
    log: Optional[Path]               # its log here; None when it runs elsewhere

    def start(self, spec: dict, run_dir: Path, verbose: bool = False,
              track: Callable[[subprocess.Popen], None] = ...) -> None:
        """Start it on a fabric's spec, its files in run_dir; wait until it listens."""

    def running(self) -> bool:
        """Whether its process here is alive."""

    def stop(self) -> None:
        """Stop what start started."""

    def status(self) -> dict:
        """Its last status (switches programmed, ports down, groups, adaptive placements)."""

    def wait_programmed(self, switches, timeout: float = 60,
                        until=lambda status: True) -> dict:
        """Wait until it has programmed every one of `switches` and `until(status)` holds."""


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
    multi_machine: bool               # across several machines (cluster mode)

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


@runtime_checkable
class KeptLab(RunningLab, Protocol):
    """A lab kept up between commands, as its keeper (lab/kept/keeper.py)
    uses it, beyond what runs use."""
    tag: str                          # its name in the records under /run/fabric-lab
    controller: Optional[Controller]  # what routes it (None: spanning tree)

    def __enter__(self) -> "KeptLab":
        """Start it (every kind: check, claim, controller, build, settle)."""

    def __exit__(self, *exc) -> bool:
        """Stop it."""

    def nodes(self) -> Dict[str, int]:
        """Every node, servers and switches, by name: the pid of its shell."""

    def register(self, pid: int) -> None:
        """A process started in one of its nodes from outside the lab (a
        kept lab's exec): stopped by its teardown, or by --cleanup after a
        SIGKILL, as its own are."""

    def resync(self) -> None:
        """Read the node shells an interruption cut in the middle of a
        command up to their prompt, ready for the next."""

    def holdings(self) -> dict:
        """What it holds now, which its teardown removes: its bridges,
        interfaces and the number of its processes alive."""
