"""ECN in the lab, where the fabric's network technology marks congestion
(RoCE and Spectrum-X: ECN with DCQCN, networks/) and the host's kernel can:
switch egress queues mark instead of dropping (the RED qdisc with `ecn`,
near a step at a threshold K, as DCTCP wants it) and the servers' TCP reacts
to the marks (DCTCP, the kernel's ECN-driven congestion control, the
closest thing a host's TCP has to DCQCN). A kernel without sch_red or
tcp_dctcp (this project's CI host has neither; Debian's has both, as the VM
test's) gets drop-tail queues and TCP without ECN, and the run says so:
never pretend. Linux lets a network namespace pick only the congestion
controls the host allows: scripts/setup.sh allows DCTCP where the kernel has
it (net.ipv4.tcp_allowed_congestion_control), choosing nothing.

The threshold: K frames of the queue (a fifth of it, at least two), the
marking probability 1 from K on, the queue's length as RED's limit.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

RED_PROBABILITY = 1.0          # from K on, every ECN-capable frame is marked


@dataclass(frozen=True)
class EcnPlan:
    """What the lab does about ECN: asked by the technology, and what this
    kernel lets it do (`marking`: RED at switch egress; `dctcp`: the servers).
    A lab on several machines (lab/cluster/) holds each machine's own plan in
    `machines` (name, marking, dctcp): every kernel decides for its own part,
    and `marking` and `dctcp` are then true only where all of them do it."""
    asked: bool
    marking: bool
    dctcp: bool
    machines: Tuple[Tuple[str, bool, bool], ...] = ()

    @property
    def note(self) -> Optional[str]:
        """One line for the run's output where ECN was asked, None where not."""
        if not self.asked:
            return None
        if self.marking and self.dctcp:
            every = " on every machine" if self.machines else ""
            return f"switch egress queues mark ECN (RED at K) and the servers run DCTCP{every}"
        if any(m or d for _, m, d in self.machines):
            return "asked by the network technology; " + "; ".join(
                f"{name} {part_note(m, d)}" for name, m, d in self.machines)
        missing = [what for what, have in (("sch_red", self.marking), ("tcp_dctcp", self.dctcp))
                   if not have]
        whose = "no machine's kernel has" if self.machines else "this kernel has no"
        return (f"asked by the network technology, but {whose} {' and no '.join(missing)}: "
                "queues drop at their tail and TCP runs without ECN (Debian's kernel has both: "
                "scripts/lab vm-test)")

    def to_dict(self) -> dict:
        out = {"asked": self.asked, "marking": self.marking, "dctcp": self.dctcp,
               "note": self.note}
        if self.machines:
            out["machines"] = [{"machine": name, "marking": m, "dctcp": d}
                               for name, m, d in self.machines]
        return out


def part_note(marking: bool, dctcp: bool) -> str:
    """What one machine's part of a lab does about ECN, in a few words."""
    if marking and dctcp:
        return "marks (RED at K) and runs DCTCP"
    if marking:
        return "marks (RED at K), but its servers have no tcp_dctcp"
    if dctcp:
        return "runs DCTCP, but its queues drop at their tail (no sch_red)"
    return "drops at its queues' tail, TCP without ECN (no sch_red and no tcp_dctcp)"


def combine(plans: Dict[str, dict]) -> EcnPlan:
    """The plan of a lab on several machines from each machine's own (its
    EcnPlan.to_dict, by the machine's name)."""
    parts = tuple((name, bool(p["marking"]), bool(p["dctcp"])) for name, p in plans.items())
    return EcnPlan(asked=any(p["asked"] for p in plans.values()),
                   marking=bool(parts) and all(m for _, m, _ in parts),
                   dctcp=bool(parts) and all(d for _, _, d in parts), machines=parts)


def asked(fabric) -> bool:
    """Whether the fabric's technology marks congestion with ECN (the file's
    `network.ecn` where it sets one)."""
    return bool(fabric.network_settings.get("ecn", fabric.network.ecn))


def plan(fabric) -> EcnPlan:
    if not asked(fabric):
        return EcnPlan(False, False, False)
    have = kernel_support()
    return EcnPlan(True, have["red"], have["dctcp"])


@lru_cache(maxsize=1)
def kernel_support() -> dict:
    """{"red": sch_red with ECN, "dctcp": DCTCP}, each tried in a throwaway
    network namespace (it vanishes with the command: nothing on the host is
    touched; a module the kernel loads on demand loads)."""
    if not shutil.which("unshare"):
        return {"red": False, "dctcp": False}
    red = subprocess.run(["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "red",
                          "limit", "60000", "min", "9000", "max", "18000", "avpkt", "1500",
                          "burst", "8", "probability", "0.1", "ecn"],
                         capture_output=True, check=False)
    dctcp = subprocess.run(["unshare", "--net", "sysctl", "-qw",
                            "net.ipv4.tcp_congestion_control=dctcp"],
                           capture_output=True, check=False)
    return {"red": red.returncode == 0, "dctcp": dctcp.returncode == 0}


def red_queue(intf: str, parent: str, handle: str, spec, frame: int) -> str:
    """A tc command (without 'tc') putting a RED queue that marks ECN at K
    under `parent`, the link's length in frames as its limit."""
    limit = spec.queue_packets * frame
    k = max(2, spec.queue_packets // 5) * frame
    burst = max(1, (2 * k + k + frame) // (3 * frame)) + 1
    return (f"qdisc replace dev {intf} parent {parent} handle {handle} red limit {limit} "
            f"min {k} max {k + frame} avpkt {frame} burst {burst} "
            f"bandwidth {spec.rate_mbit:g}mbit probability {RED_PROBABILITY:g} ecn")


def server_sysctls() -> List[str]:
    """What a server's namespace runs so that its TCP reacts to the marks."""
    return ["sysctl -qw net.ipv4.tcp_ecn=1", "sysctl -qw net.ipv4.tcp_congestion_control=dctcp"]
