"""What a run leaves in summary.json (docs/output.md), typed: `Summary`.

Every run has the head (the fabric, how the run was asked for, where its
results are); a run on a lab adds what the lab did (datapath, OpenFlow,
timings, ECN, its machines, reachability); then what ran: collective
sweeps, a training step, an incast, iperf3's check. A part the run did not
produce stays `ABSENT` and is left out of the JSON, as in the run record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Dict, List, Optional

from report.console import network_summary
from runs.record import ABSENT, Maybe, RunRecord
from topologies.fabric import describe_links


@dataclass(kw_only=True)
class Summary:
    """One run's summary; the fields in summary.json's order."""
    fabric: str
    source: str
    shape: str
    links: Dict[str, str]               # each link class: its rate, queue, MTU, delay, loss
    policy: str
    network: dict                       # the network technology (report/write.py)
    warnings: List[str]
    provenance: Optional[dict]          # runs/provenance.py
    results: str                        # the run's folder
    # a lab's
    datapath: Maybe[str] = ABSENT
    openflow: Maybe[List[str]] = ABSENT
    timings: Maybe[dict] = ABSENT
    ecn: Maybe[dict] = ABSENT
    cluster: Maybe[dict] = ABSENT
    reachability: Maybe[dict] = ABSENT
    lab: Maybe[str] = ABSENT            # an experiment on a kept lab: the lab's folder
    # what ran
    collectives: Maybe[RunRecord] = ABSENT
    compared: Maybe[Dict[str, RunRecord]] = ABSENT
    step: Maybe[dict] = ABSENT
    incast: Maybe[dict] = ABSENT
    traffic: Maybe[dict] = ABSENT

    @classmethod
    def head(cls, fabric, run_dir: Path, provenance: Optional[dict]) -> "Summary":
        """The parts every run has."""
        return cls(fabric=fabric.name, source=fabric.source, shape=fabric.shape(),
                   links=describe_links(fabric), policy=fabric.policy,
                   network=network_summary(fabric), warnings=list(fabric.warnings),
                   provenance=provenance, results=str(run_dir))

    def swept(self, results: Dict[str, RunRecord], algorithm: str) -> None:
        """The sweeps' records: the experiment's, and each compared one's."""
        self.collectives = results[algorithm]
        compared = {a: r for a, r in results.items() if a != algorithm}
        if compared:
            self.compared = compared

    def to_dict(self) -> dict:
        """summary.json's document: every part produced, in the fields'
        order (run records as themselves: report/write.py writes them)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not ABSENT}

    def exit_status(self) -> int:
        """0 when every pair reached every other, no collective came out
        wrong and every incast flow ran; 1 otherwise."""
        reach = self.reachability or {"ok": 0, "total": 0}
        records = ([self.collectives] if self.collectives else []) + list(
            (self.compared or {}).values())
        wrong = [r["wrong"] for record in records for r in record.runs]
        wrong.append((self.step or {}).get("wrong"))
        lab_incast = (self.incast or {}).get("lab") or {}      # None: the packet engine's alone
        failed = [f for f in lab_incast.get("flows", []) if "error" in f]
        return 0 if reach["ok"] == reach["total"] and not any(wrong) and not failed else 1
