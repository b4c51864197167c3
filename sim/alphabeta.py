"""The alpha-beta cost of a collective, read off the schedule that actually
runs: ``alpha x steps + beta x bytes``, where `steps` is the number of
dependent steps of the algorithm and `bytes` the most any rank must send or
receive. For a ring AllReduce that is the textbook 2(n-1) alpha + 2(n-1)/n S
beta (Thakur et al. 2005, Patarasuk & Yuan 2009); for the other algorithms
it is the same accounting, applied to what they move.

Every sweep prints it beside the measured (or simulated) time ("meas/pred");
the closed forms (sim/closed_form.py) are the same model where a schedule
is too large to build, and tests/test_alphabeta.py holds the two together:
the same ring, and the hierarchical AllReduce's phases summing to what is
read here off the lab's schedule, whose phases run one after the other
(the closed form prices it pipelined, as NCCL runs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from collectives import schedules
from collectives.registry import FOLDING
from collectives.metrics import TYPE_SIZE


def schedule_cost(sched: schedules.Schedule, algorithm: str = "") -> Dict[str, int]:
    """The algorithm's steps (each waits on the one before), and the most
    elements any rank sends or receives. Sending and receiving overlap, and
    so do the steps of a pipelined algorithm; phases that cannot overlap
    (`serial_phase`) add up instead: in rhd over a rank count that is not a
    power of two, a rank that folds in a neighbour receives its whole buffer,
    then exchanges, then hands the result back, one after the other."""
    steps = len({op.round for ops in sched.values() for op in ops})
    phase_of = serial_phase(algorithm, sched)
    most = 0
    for rank, ops in sched.items():
        per_phase: Dict[int, List[int]] = {}
        for op in ops:
            if op.kind in ("send", "recv"):
                way = per_phase.setdefault(phase_of(op.round), [0, 0])
                way[op.kind == "recv"] += op.length
        most = max(most, sum(max(ways) for ways in per_phase.values()))
    return {"steps": steps, "max_rank_elements": most}


def serial_phase(algorithm: str, sched: schedules.Schedule) -> Callable[[int], int]:
    """The phase of a step, for phases that run one after the other: rhd's
    fold-in (its first step), exchange, and fold-out (its last step)."""
    used = {op.round for ops in sched.values() for op in ops}
    if algorithm not in FOLDING or 0 not in used:          # a power of two: no fold
        return lambda step: 0
    last = max(used)
    return lambda step: 0 if step == 0 else 2 if step == last else 1


@dataclass(frozen=True)
class Costs:
    """What the model charges: `alpha` seconds a dependent step, `beta`
    seconds a byte on a rank's NIC, `beta_intra` a byte to a peer in the
    same server (None: every byte at beta), and the NIC each rank sends and
    receives by (`nic_of(rank)`; None: a NIC of its own)."""
    alpha: float
    beta: float
    beta_intra: Optional[float] = None
    nic_of: Optional[Callable[[int], object]] = None


def predict(collective: str, algorithm: str, n: int, count: int, costs: Costs,
            root: int = 0, local: int = 1) -> float:
    """alpha x steps + beta x bytes. With multi-GPU servers (`local` > 1) and
    `costs.beta_intra` given, a rank's bytes to peers in its own server cost
    beta_intra each, and its bytes to other servers cost beta on its NIC,
    counting every rank that shares the NIC (`costs.nic_of`); the phases of
    a rank add up, and the slowest rank sets the time."""
    sched = schedules.build(collective, algorithm, n, count, schedules.RankLayout(root, local=local))
    return predict_schedule(sched, schedule_cost(sched, algorithm), costs, local)


def predict_schedule(sched: schedules.Schedule, cost: Dict[str, int], costs: Costs,
                     local: int = 1) -> float:
    """`predict`, of a schedule already built (unsplit) and its `schedule_cost`."""
    alpha, beta, beta_intra = costs.alpha, costs.beta, costs.beta_intra
    if local == 1 or beta_intra is None:
        return alpha * cost["steps"] + beta * cost["max_rank_elements"] * TYPE_SIZE
    nic_of = costs.nic_of or (lambda r: r)
    intra: Dict[int, List[int]] = {r: [0, 0] for r in sched}
    nic: Dict[object, List[int]] = {}
    for rank, ops in sched.items():
        for op in ops:
            if op.kind not in ("send", "recv"):
                continue
            way = 0 if op.kind == "send" else 1
            if op.peer // local == rank // local:
                intra[rank][way] += op.length * TYPE_SIZE
            else:
                nic.setdefault(nic_of(rank), [0, 0])[way] += op.length * TYPE_SIZE
    worst = max(max(intra[r]) * beta_intra + max(nic.get(nic_of(r), [0, 0])) * beta
                for r in sched)
    return alpha * cost["steps"] + worst
