"""The experiment: which collective to replay, how, over which sizes, and
what to measure alongside. Written in a fabric's ``experiment:`` section,
overridden by command-line flags, and validated once, here: the YAML against
its schema (each mistake a FabricError naming file and key), then the whole
experiment against the fabric it runs on (ranks, servers, probe endpoints).
The names it accepts come from traffic/registry.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, List, Optional

from topologies.schema import (FabricError, choice, endpoint_pair, integer, normalise, number,
                               optional, size)
from traffic import metrics as M
from traffic.registry import (ALGORITHMS, ALL_ALGORITHMS, COLLECTIVES, ENGINES,
                              default_algorithm)

SCHEMA = {
    "collective": (optional(choice(*COLLECTIVES)), None),
    "algorithm": (optional(choice(*ALL_ALGORITHMS)), None),
    "engine": (optional(choice(*ENGINES)), None),
    "minbytes": (optional(size(4, 1 << 30)), None),
    "maxbytes": (optional(size(4, 1 << 30)), None),
    "stepfactor": (optional(number(1, 1024, "x")), None),
    "iters": (optional(integer(1, 1000)), None),
    "warmup": (optional(integer(0, 100)), None),
    "root": (optional(integer(0, 4095)), None),
    "channels": (optional(integer(1, 16)), None),
    "piece_bytes": (optional(size(64, 1 << 26)), None),
    "probe": (optional(endpoint_pair), None),
    "cross": (optional(endpoint_pair), None),
}
FIELDS = tuple(SCHEMA)          # what the YAML section and the flags may set


@dataclass
class Experiment:
    collective: str = "allreduce"
    algorithm: str = "ring"
    engine: str = "agents"
    minbytes: int = 32 * 1024
    maxbytes: int = 2 * 1024 * 1024
    stepfactor: float = 4
    iters: int = 5
    warmup: int = 1
    root: int = 0
    channels: int = 1
    piece_bytes: int = 64 * 1024
    probe: List[str] = field(default_factory=list)     # [src, dst]; default first and last rank
    ranks: List[str] = field(default_factory=list)     # endpoints in rank order; default all
    idle_seconds: float = 1.5                          # idle-latency measurement first
    cross: List[str] = field(default_factory=list)     # [src, dst]: iperf3 cross traffic

    def check(self, n_ranks: int, local: int = 1) -> None:
        """Raise ValueError with one sentence for an impossible experiment."""
        if self.collective not in COLLECTIVES:
            raise ValueError(f"unknown collective {self.collective!r}; "
                             f"expected one of {', '.join(COLLECTIVES)}")
        if self.algorithm not in ALGORITHMS[self.collective]:
            raise ValueError(f"no {self.algorithm!r} algorithm for {self.collective}; expected "
                             f"one of {', '.join(ALGORITHMS[self.collective])}")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; expected one of {', '.join(ENGINES)}")
        if n_ranks < 2:
            raise ValueError("a collective needs at least 2 ranks (servers)")
        for name, pair in (("probe", self.probe), ("cross traffic", self.cross)):
            if pair and len(set(pair)) != 2:
                raise ValueError(f"{name} needs two different servers, got {','.join(pair)}")
        limit = ENGINES[self.engine].max_ranks
        if limit and n_ranks > limit:
            raise ValueError(f"the {self.engine} engine numbers queue pairs for at most "
                             f"{limit} ranks")
        self._check_counts()
        self._check_ranks(n_ranks, local)
        M.sweep_sizes(self.minbytes, self.maxbytes, self.stepfactor)

    def _check_counts(self) -> None:
        if not 1 <= self.channels <= 16:
            raise ValueError(f"channels must be 1 to 16, got {self.channels}")
        if self.warmup < 0 or self.iters < 1:
            raise ValueError("expected at least 1 timed iteration and no negative warm-up")
        if self.piece_bytes < 64:
            raise ValueError(f"piece size must be at least 64 bytes, got {self.piece_bytes}")

    def _check_ranks(self, n_ranks: int, local: int) -> None:
        if self.algorithm == "hierarchical" and local == 1:
            raise ValueError("hierarchical AllReduce needs servers with several GPUs "
                             "(server.gpus), ranks in whole servers; with one GPU per server "
                             "it is the ring")
        if self.algorithm == "hierarchical" and n_ranks % local:
            raise ValueError(f"hierarchical AllReduce needs whole servers: {n_ranks} ranks "
                             f"are not a multiple of {local} GPUs per server")
        if not 0 <= self.root < n_ranks:
            raise ValueError(f"root {self.root} is not a rank (0..{n_ranks - 1})")


def experiment_from(fabric, flags: Optional[dict] = None,
                    compare: Iterable[str] = ()) -> Optional[Experiment]:
    """The fabric's experiment section, checked, then overridden by `flags`
    (field -> value; None means not given) and checked again. A mistake in the
    YAML is a FabricError naming file and key; one in the flags a ValueError
    naming the flag. None for a fabric with one endpoint: nothing to replay."""
    values = experiment_section(fabric)
    n, local = len(fabric.endpoints), fabric.gpus_per_server
    if n < 2:
        if values:
            raise FabricError(fabric.source, "experiment", "a collective needs at least 2 "
                              "servers, and this fabric has one")
        return None
    if "collective" in values and "algorithm" not in values:
        values["algorithm"] = default_algorithm(values["collective"])
    try:
        Experiment(**values).check(n, local)
    except ValueError as exc:
        raise FabricError(fabric.source, "experiment", str(exc)) from None
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    if "collective" in given and "algorithm" not in given:
        given["algorithm"] = default_algorithm(given["collective"])
    exp = Experiment(**{**values, **given})
    exp.check(n, local)
    _check_flag_endpoints(fabric, exp)
    for algorithm in compare:
        try:
            replace(exp, algorithm=algorithm).check(n, local)
        except ValueError as exc:
            raise ValueError(f"--compare {algorithm}: {exc}") from None
    return exp


def experiment_section(fabric) -> dict:
    """The keys the fabric's experiment section sets, each checked against
    the schema and its endpoints against the fabric: what a fabric file must
    get right even where no experiment runs (the planner reads such files)."""
    section = normalise(fabric.spec.get("experiment"), SCHEMA, "experiment", fabric.source)
    values = {k: v for k, v in section.items() if v is not None}
    _check_endpoints(fabric, values)
    return values


def _check_endpoints(fabric, values: dict) -> None:
    names = {h.name for h in fabric.endpoints}
    for key in ("probe", "cross"):
        missing = [p for p in values.get(key, ()) if p not in names]
        if missing:
            raise FabricError(fabric.source, f"experiment.{key}", (
                f"expected servers of this fabric, but there is no {missing[0]!r} "
                f"(servers are {fabric.endpoints[0].name}..{fabric.endpoints[-1].name})"))


def _check_flag_endpoints(fabric, exp: Experiment) -> None:
    names = {h.name for h in fabric.endpoints}
    for flag, pair in (("--probe", exp.probe), ("--cross", exp.cross)):
        if pair and not set(pair) <= names:
            raise ValueError(f"{flag} {','.join(pair)}: not servers of this fabric "
                             f"({fabric.endpoints[0].name}..{fabric.endpoints[-1].name})")
