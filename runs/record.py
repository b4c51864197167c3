"""The run record: what one collective sweep (runs/sweep.py) leaves, whatever
replayed it, as `summary.json` shows it under `collectives` (docs/output.md).

- `RunRecord`: the record's parts, in the order summary.json shows them (its
  fields' order is that order). The sweep loop makes the parts every run has;
  a backend's `finish` adds its own (a dict of these fields' names), and a
  part it does not produce stays `ABSENT`: left out of the JSON, where a part
  it produced as None stays, as null. `to_dict()` is the one serialisation;
- `SizeRecord`: one size's record (the entries of `runs`, plain dicts), the
  keys it may have; which it has depends on the backend and its parts.

    record = RunRecord.from_parts(common, backend.finish(...))
    record.runs[0]["busbw_gbps"], record.fidelity["trustworthy"]
    json.dumps(record.to_dict())
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Dict, List, Optional, TypedDict, TypeVar, Union


class Absent(enum.Enum):
    """A part of the record no backend produced: not in the JSON, and false."""
    ABSENT = "absent"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent.ABSENT
T = TypeVar("T")
Maybe = Union[T, Absent]        # a part a backend may not produce


class SizeRecord(TypedDict, total=False):
    """One size of a sweep. Every backend: nccl-tests' columns and the
    alpha-beta prediction (runs/sweep.py size_record). Then what the backend
    and, on a lab, its parts (runs/lab_parts.py) add."""
    # what ran, and nccl-tests' columns
    collective: str
    algorithm: str
    engine: str
    ranks: int
    size_bytes: int                     # the whole buffer
    elements: int                       # float32-sized elements in the buffer
    count: int                          # elements of the type; per rank where the buffer is n blocks
    type: str
    redop: str
    root: int
    iterations: int                     # the timed ones
    time_s: float                       # their mean
    time_min_s: float
    times_s: List[float]                # each timed iteration's (nccl-tests' -I 1)
    algbw_gbps: float
    busbw_gbps: float
    busbw_over_link: float
    wrong: Optional[int]                # None: the engine checks no data
    bad_chunk_elements: Optional[int]
    predicted_s: float                  # the alpha-beta model
    auto: dict                          # -a auto: {"nccl": ring|tree, "predicted_s": per candidate}
    measured_over_predicted: Optional[float]
    # the fabric during the size: links, queues, ECMP, CPU (Links; the simulator's own)
    links: Dict[str, dict]              # per sending interface
    ecmp_imbalance: Dict[str, float]    # per leaf: max/mean of its uplinks' bytes
    cpu_busy_pct: float
    ovs_core_pct: float
    machines: List[dict]                # a cluster run: each machine's CPU and core
    wire_bytes: Dict[str, int]          # put on NVLink-class links / on links into servers
    latency: dict                       # the probe under load (Latency): p50, p99, max, lost
    # what the engine counted, summed over the timed iterations
    frames_sent: int
    frames_lost: int
    retransmits: int
    scale_up_bytes: int
    pieces: int
    reordered: int
    unsettled: int                        # agents: spreaders' moves with bytes unacknowledged
    # whether it is a figure to quote (traffic/measure/fidelity.py size_flags)
    flags: List[str]
    method: str                         # the simulator's, for this size (sim/simulator.py)
    shaper_unpaid_bound_s: float
    serialisation_s: float
    payload_bytes: Dict[str, int]       # the schedule's payload inside / between servers
    # the simulation beside it (Simulation, runs/beside.py)
    simulated_s: Optional[float]
    measured_over_simulated: Optional[float]
    simulated_seed: int
    simulated_link_bytes: Dict[str, int]
    simulated_spread: dict
    simulated_path_error: float
    simulation_error: str


@dataclass(kw_only=True)
class RunRecord:
    """One sweep's record; the fields in summary.json's order."""
    experiment: dict                    # the experiment as run (runs/experiment.py, as a dict)
    ranks: List[str]
    gpus_per_server: int                # of the ranks' servers when ranks are whole servers; 1 else
    probe: Maybe[List[str]] = ABSENT    # the latency probe's [src, dst]
    idle_latency: Maybe[dict] = ABSENT
    alpha_s: float                      # the model's one-way latency
    beta_s_per_byte: float              # the model's time per payload byte on a NIC link
    link_rate_mbit: float               # the NIC link's rate
    runs: List[SizeRecord]              # a record per size, smallest first
    simulated: Maybe[dict] = ABSENT     # a simulated run: its seed and latency per hop
    fidelity: Maybe[dict] = ABSENT      # the verdict
    uplink_tx_bytes: Maybe[Dict[str, Dict[str, int]]] = ABSENT     # per leaf, per uplink
    tiers: Maybe[dict] = ABSENT         # ECMP's spread per tier over the whole sweep
    cross_traffic: Maybe[Optional[dict]] = ABSENT
    timeline: Optional[dict] = None     # the last iteration, when the engine recorded one
    failures: Maybe[Optional[List[dict]]] = ABSENT
    routing: Maybe[dict] = ABSENT
    figures: Maybe[List[str]] = ABSENT  # the PNGs written (report/write.py)

    @classmethod
    def from_parts(cls, common: dict, parts: dict) -> "RunRecord":
        """The record from what the sweep loop made (`common`) and a backend's
        `finish` (`parts`, which wins where both name a field). ValueError,
        one sentence, for a name that is no field of the record."""
        unknown = sorted(set(parts) - set(FIELDS))
        if unknown:
            raise ValueError(f"a backend's finish returned {', '.join(unknown)}, which the run "
                             "record has no field for (runs/record.py RunRecord)")
        return cls(**{**common, **parts})

    def to_dict(self) -> dict:
        """The record as summary.json holds it: every part produced (None
        too), in the fields' order; the size records themselves, not copies."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not ABSENT}


FIELDS = tuple(f.name for f in fields(RunRecord))
