"""A hybrid training step for the lab's ranks: tensor parallel inside the
servers, pipeline stages across them in the 1F1B schedule, data parallel
over the rest. Pure: the plan each rank runs (programs/stepper.py runs it
on the rank agents with real data) and its timeline given how long each
group of concurrent collectives takes (the flow-level simulator's replay).

Ranks are laid out as Megatron-LM lays them out, tensor parallel innermost:
rank = t + tp x (d + dp x s) for TP rank t, DP rank d and stage s, so a TP
group is `tp` consecutive ranks (GPUs of one server) and a stage is whole
servers.

Per micro-batch and layer a rank computes its forward pass in two halves
(attention, then the MLP), each followed by an AllReduce of the micro-batch's
activations (`activation` bytes) over its TP group, on the critical path as
in Megatron-LM; backward the same at twice the time. A stage sends its
output activations to the next stage's rank of the same (t, d) and receives
the gradients back (a Broadcast between the two: one way), in 1F1B order:
stage s runs min(p - s - 1, m) forwards, then alternates one forward and
one backward, then the remaining backwards. Once its last backward pass is
done, a rank AllReduces its gradients (`params` / (tp x pp) parameters) over
its DP group. A step ends when every collective on every rank has.

`waves` name the collectives that run at the same time by construction
(every TP group of a stage for the same layer; every rank of a stage sending
the same micro-batch; every DP group of a stage), replayed together so that
those sharing a server's NIC share it in the prediction as on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

from collectives import schedules
from collectives.registry import FLAT_RING
from sim.step_program import ProgramError, merged_schedule, walk

KEYS = ("tp", "pp", "dp", "micro_batches", "activation")


class HybridError(ValueError):
    """A hybrid layout the lab's ranks cannot run: one sentence."""


@dataclass
class HybridPlan:
    tp: int
    pp: int
    dp: int
    micro_batches: int
    layers: int
    fwd_s: float                       # one layer's forward pass for one micro-batch
    activation: int                    # bytes of a micro-batch's activations
    gradient_bytes: int                # a rank's gradients (its stage's share of the model)
    itemsize: int
    collectives: List[dict] = field(default_factory=list)
    tasks: Dict[int, List[dict]] = field(default_factory=dict)
    initial: Dict[int, List[int]] = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    def rank(self, t: int, d: int, s: int) -> int:
        return t + self.tp * (d + self.dp * s)

    @property
    def compute_s(self) -> float:
        """A rank's compute per step: its layers, forward and backward, each micro-batch."""
        return 3 * self.fwd_s * (self.layers // self.pp) * self.micro_batches


def check(par: dict, n: int, local: int, layers: int) -> None:
    """HybridError for a layout these ranks and layers cannot run."""
    tp, pp, dp, m = (par[k] for k in ("tp", "pp", "dp", "micro_batches"))
    if tp * pp * dp != n:
        raise HybridError(f"tp x pp x dp must be the {n} ranks, got {tp} x {pp} x {dp} = "
                          f"{tp * pp * dp}")
    if local % tp:
        raise HybridError(f"tp {tp} must divide the {local} GPUs of a server: tensor "
                          "parallelism stays inside a server")
    if pp > 1 and (tp * dp) % local:
        raise HybridError(f"a pipeline stage must be whole servers: tp x dp = {tp * dp} is "
                          f"not a multiple of the {local} GPUs of a server")
    if layers % pp:
        raise HybridError(f"pp {pp} must divide the {layers} layers")
    if m < 1:
        raise HybridError(f"micro_batches must be at least 1, got {m}")


def one_f_one_b(stage: int, pp: int, m: int) -> List[Tuple[str, int]]:
    """The order stage `stage` runs its micro-batches' passes in."""
    warm = min(pp - stage - 1, m)
    order = [("F", i) for i in range(warm)]
    for j in range(m - warm):
        order += [("F", warm + j), ("B", j)]
    return order + [("B", i) for i in range(m - warm, m)]


def plan_hybrid(par: dict, n: int, local: int, layers: int, fwd_s: float, params: int,
                itemsize: int = 4) -> HybridPlan:
    check(par, n, local, layers)
    p = HybridPlan(par["tp"], par["pp"], par["dp"], par["micro_batches"], layers, fwd_s,
                   par["activation"], params // (par["tp"] * par["pp"]) * itemsize, itemsize)
    ids: Dict[tuple, int] = {}
    for s in range(p.pp):
        for d in range(p.dp):
            for t in range(p.tp):
                _rank_tasks(p, ids, t, d, s)
    return p


def _collective(p: HybridPlan, ids: dict, key: tuple, kind: str, collective: str,
                members: List[int], nbytes: int, wave: tuple) -> int:
    """The id of the collective `key` names, made the first time."""
    if key not in ids:
        ids[key] = len(p.collectives)
        count = max(len(members), nbytes // p.itemsize // len(members) * len(members))
        p.collectives.append({"id": ids[key], "name": "-".join(map(str, key)), "kind": kind,
                              "collective": collective, "algorithm": FLAT_RING,
                              "members": members, "root": 0, "count": count,
                              "bytes": count * p.itemsize, "wave": wave})
    return ids[key]


def _rank_tasks(p: HybridPlan, ids: dict, t: int, d: int, s: int) -> None:
    me = p.rank(t, d, s)
    tasks, initial = [], []
    per_stage = p.layers // p.pp
    tp_group = [p.rank(x, d, s) for x in range(p.tp)]
    last = None                                        # the collective the next task waits on
    for pas, i in one_f_one_b(s, p.pp, p.micro_batches):
        fwd = pas == "F"
        src = s - 1 if fwd else s + 1                  # where this pass's input comes from
        if 0 <= src < p.pp:
            key = ("act" if fwd else "grad", i, src, s, t, d)
            wave = ("pp", fwd, i, src)
            cid = _collective(p, ids, key, "pp", "broadcast", [p.rank(t, d, src), me],
                              p.activation, wave)
            initial.append(cid)
            last = cid
        seconds = p.fwd_s / 2 * (1 if fwd else 2)
        order = range(per_stage) if fwd else reversed(range(per_stage))
        for layer in order:
            for half in (0, 1):
                releases = []
                if p.tp > 1:
                    wave = ("tp", s, i, layer, half, fwd)
                    releases = [_collective(p, ids, wave + (d,), "tp", "allreduce", tp_group,
                                            p.activation, wave)]
                tasks.append({"seconds": seconds, "needs": [last] if last is not None else [],
                              "releases": releases, "kind": "forward" if fwd else "backward",
                              "layer": s * per_stage + layer, "micro_batch": i})
                last = releases[0] if releases else last
        dst = s + 1 if fwd else s - 1
        if 0 <= dst < p.pp:
            key = ("act" if fwd else "grad", i, s, dst, t, d)
            cid = _collective(p, ids, key, "pp", "broadcast", [me, p.rank(t, d, dst)],
                              p.activation, ("pp", fwd, i, s))
            tasks.append({"seconds": 0.0, "needs": [last] if last is not None else [],
                          "releases": [cid], "kind": "send", "layer": -1, "micro_batch": i})
    if p.dp > 1:
        group = [p.rank(t, x, s) for x in range(p.dp)]
        cid = _collective(p, ids, ("dp", s, t), "dp", "allreduce", group, p.gradient_bytes,
                          ("dp", s))
        tasks.append({"seconds": 0.0, "needs": [last] if last is not None else [],
                      "releases": [cid], "kind": "gradients", "layer": -1, "micro_batch": -1})
    p.tasks[me], p.initial[me] = tasks, initial


def wave_schedule(p: HybridPlan, wave: tuple) -> schedules.Schedule:
    """Every collective of `wave` as one schedule over the global ranks (no
    data): what the simulator replays to price them together."""
    return merged_schedule([c for c in p.collectives if c["wave"] == wave])


def timeline(p: HybridPlan, seconds: Callable[[tuple], float]) -> dict:
    """The step as the plan runs it when each collective takes its wave's
    `seconds(wave)` from when its last member launched it (a Broadcast's
    receiver launches it at the start, so it starts when the sender does):
    sim/step_program.py's walk."""
    try:
        w = walk(p, lambda c: seconds(c["wave"]))
    except ProgramError as e:
        raise HybridError(str(e)) from None
    compute = max(w.compute.values())
    return {"step_s": w.step_s, "compute_s": compute, "exposed_s": w.step_s - compute,
            "finish": w.finish, "compute": w.spans, "launched": w.launches}
