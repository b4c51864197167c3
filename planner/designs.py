"""Network designs: what a cluster of N GPUs costs in switches, ports and
cables as a full mesh, a single switch, a 2-tier or a 3-tier Clos, and the
smallest switch radix at which each design holds it. Closed-form: nothing is
enumerated, so 200,000 or 10,000,000 GPUs take as long as 16.

Vocabulary
----------
GPUs sit in servers of ``gpus_per_server`` (scale-up: NVLink inside a server).
Each server has ``nics_per_server`` scale-out NICs; the network's *endpoints*
are those NICs, ``E = ceil(gpus / gpus_per_server) * nics_per_server``. Eight
GPUs behind one NIC means eight times fewer endpoints: that is what scale-up
buys the network. ``R`` is the switch radix (ports per switch), ``r`` the link
rate in Gbit/s, ``o`` the requested leaf oversubscription (downlink:uplink).

Designs
-------
full-mesh
    Every endpoint cabled to every other: ``E(E-1)/2`` cables, ``E-1`` ports per
    endpoint, no switches. It fits when ``E-1 <= R``, R standing in for the
    port budget of one endpoint. Bisection: the worst even cut severs
    ``floor(E/2) * ceil(E/2)`` links (``(E/2)^2`` for even E).
single-switch
    One switch with E ports, E cables, fits when ``E <= R``. Bisection
    ``floor(E/2) * r``.
clos-2 (leaf-spine, folded Clos)
    A leaf splits its R ports into ``d = floor(R*o/(1+o))`` down and
    ``u = R - d`` up (d = u = R/2 at o = 1: nonblocking). Leaves
    ``L = ceil(E/d)``, spines ``S = ceil(L*u/R)``. Every leaf reaches every
    spine and a spine port reaches one leaf, so at most R leaves: the largest
    clos-2 holds ``R*d`` endpoints (``R^2/2`` at o = 1; 2,048 at radix 64).
clos-3 (leaf-aggregation-core in pods)
    Leaves as above; aggregation switches have R/2 ports down and R/2 up,
    ``A = ceil(L*u/(R/2))``; cores ``C = ceil(A*(R/2)/R)``. R pods of R/2
    leaves: at most ``R*(R/2)*d`` endpoints (``R^3/4`` at o = 1; 65,536 at
    radix 64, with 2,048 leaves + 2,048 aggs + 1,024 cores).

For both Clos designs: cables = E + L*u (+ A*R/2 for clos-3), switch ports in
use = E + 2 * (switch-to-switch cables), bisection = ``floor(E/2) * r / max(1,
d/u)``. The *reported* oversubscription is the achieved ``d/u``, which can
differ slightly from the requested o because ports are whole (o = 2 at radix
64 gives 42 down, 22 up: 1.91). When E exceeds the largest count, the design
is marked ``fits=False`` with the reason, and the port arithmetic above is
still reported (it is what the design would need if switches had the ports
the formulas assume). ``needed_radix`` is the smallest even radix at which the
design holds E endpoints (with the same oversubscription). Max hops counts
switches on the longest endpoint-to-endpoint path: 0, 1, 3, 5.

Assumptions: identical links of rate r everywhere; one cable per switch-to-
switch link; ports are whole, switches are not shared between tiers; nothing
is said about optics, power or cable length.

Each design is a `Form` in FORMS: its hop count, its tiers when it is a Clos,
how many endpoints it holds and the smallest radix that holds them, and what
it counts. The kinds of fabric (topologies/kinds/) say which design each is
an instance of (``planner_design``): leaf-spine and rail-optimized are
clos-2, fat-tree clos-3, single-switch and full-mesh their namesakes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from planner import inputs as check
from planner.inputs import MAX_RADIX, MIN_RADIX, PlanError
from planner.report import ratio_text
from planner.compute import TrainingRun, training_arithmetic


@dataclass
class Design:
    """What one network design needs for the plan's endpoints (see the module
    docstring for the formulas)."""

    name: str
    fits: bool
    reason: str
    endpoints: int
    switches: int
    switches_by_tier: dict = field(default_factory=dict)
    switch_ports: int = 0
    cables: int = 0
    ports_per_endpoint: int = 1
    max_hops: int = 0
    bisection_gbps: float = 0.0
    oversubscription: float = 1.0
    max_endpoints: int = 0
    needed_radix: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def leaf_split(radix, oversubscription):
    """(down, up) ports of a leaf: d = floor(R*o/(1+o)), at least one port up."""
    down = math.floor(radix * oversubscription / (1.0 + oversubscription) + 1e-9)
    down = max(1, min(radix - 1, down))
    return down, radix - down


def max_endpoints_of(name, radix, oversubscription):
    if name not in FORMS:
        raise PlanError(f"design must be one of {', '.join(DESIGNS)}, got {name!r}")
    return FORMS[name].max_endpoints(radix, oversubscription)


def _needed_radix(name, endpoints, oversubscription):
    """Smallest even radix >= 4 at which `name` holds `endpoints` (not capped at
    MAX_RADIX: a full mesh of 200,000 needs 199,999 ports whatever we allow)."""
    closed_form = FORMS[name].needed_radix
    if closed_form is not None:
        return max(MIN_RADIX, closed_form(endpoints))

    def fits(half):  # radix = 2 * half; max endpoints grow with the radix
        return max_endpoints_of(name, 2 * half, oversubscription) >= endpoints

    hi = MIN_RADIX // 2
    while not fits(hi):
        hi *= 2
    lo = hi // 2  # fits(lo) is false, or lo is below the smallest radix
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return max(MIN_RADIX, 2 * hi)


def min_radix(design, gpus, gpus_per_server=8, nics_per_server=8, oversubscription=1.0) -> int:
    """Smallest even switch radix at which `design` holds the endpoints of `gpus`."""
    if design not in DESIGNS:
        raise PlanError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    gpus = check.whole("gpus", gpus, check.MIN_GPUS, check.MAX_GPUS)
    gpus_per_server = check.whole("gpus_per_server", gpus_per_server, 1, check.MAX_GPUS_PER_SERVER)
    nics_per_server = check.nics_per_server(nics_per_server, gpus_per_server)
    oversubscription = check.at_least_one("oversubscription", oversubscription)
    endpoints = math.ceil(gpus / gpus_per_server) * nics_per_server
    return _needed_radix(design, endpoints, oversubscription)


@dataclass(frozen=True)
class Form:
    """A design's closed form (see the module docstring)."""
    name: str
    max_hops: int                   # switches on the longest endpoint-to-endpoint path
    tiers: int                      # switch tiers of a Clos; 0: not a Clos
    max_endpoints: Callable         # (radix, oversubscription) -> endpoints it holds
    needed_radix: Optional[Callable]   # endpoints -> the smallest radix; None: searched
    count: Callable                 # (E, R, r, o) -> its Design


def _clos_form(name, max_hops, tiers, max_endpoints) -> Form:
    return Form(name, max_hops, tiers, max_endpoints, None,
                lambda E, R, r, o: clos_design(name, E, R, r, o))


def _too_big(name, endpoints, radix, max_endpoints, ratio, needed):
    """Why a Clos does not hold the endpoints, and what would: more oversubscription
    is offered only where it can help."""
    ways = [f"a higher radix ({needed:,})"]
    if max_endpoints_of(name, radix, radix - 1) >= endpoints:   # all but one port down
        ways.append("more oversubscription")
    ways.append("another tier")
    return (f"{endpoints:,} endpoints exceed the largest {name} at radix {radix} and "
            f"{ratio_text(ratio)} oversubscription ({max_endpoints:,} endpoints); it needs "
            + ", ".join(ways[:-1]) + f" or {ways[-1]}")


def _full_mesh(E, R, r, o):
    needed = _needed_radix("full-mesh", E, 1.0)
    fits = E - 1 <= R
    reason = "" if fits else (f"each endpoint would need {E - 1:,} ports; "
                              f"a port budget of {R} allows {R}")
    return Design("full-mesh", fits, reason, E, switches=0, switches_by_tier={},
                  switch_ports=0, cables=E * (E - 1) // 2, ports_per_endpoint=E - 1,
                  max_hops=FORMS["full-mesh"].max_hops,
                  bisection_gbps=(E // 2) * ((E + 1) // 2) * r,
                  oversubscription=1.0, max_endpoints=R + 1, needed_radix=needed)


def _single_switch(E, R, r, o):
    needed = _needed_radix("single-switch", E, 1.0)
    fits = E <= R
    reason = "" if fits else f"{E:,} endpoints need a {E:,}-port switch; the radix is {R}"
    return Design("single-switch", fits, reason, E, switches=1, switches_by_tier={"switch": 1},
                  switch_ports=E, cables=E, ports_per_endpoint=1,
                  max_hops=FORMS["single-switch"].max_hops, bisection_gbps=(E // 2) * r,
                  oversubscription=1.0, max_endpoints=R, needed_radix=needed)


def clos_design(name, E, R, r, o):
    d, u = leaf_split(R, o)
    ratio = d / u
    leaves = math.ceil(E / d)
    leaf_up_cables = leaves * u
    if FORMS[name].tiers == 2:
        tiers = {"leaf": leaves, "spine": math.ceil(leaf_up_cables / R)}
        fabric_cables = leaf_up_cables
    else:
        aggs = math.ceil(leaf_up_cables / (R // 2))
        tiers = {"leaf": leaves, "agg": aggs, "core": math.ceil(aggs * (R // 2) / R)}
        fabric_cables = leaf_up_cables + aggs * (R // 2)
    max_endpoints = max_endpoints_of(name, R, o)
    needed = _needed_radix(name, E, o)
    fits = E <= max_endpoints
    reason = "" if fits else _too_big(name, E, R, max_endpoints, ratio, needed)
    return Design(name, fits, reason, E, switches=sum(tiers.values()), switches_by_tier=tiers,
                  switch_ports=E + 2 * fabric_cables, cables=E + fabric_cables,
                  ports_per_endpoint=1, max_hops=FORMS[name].max_hops,
                  bisection_gbps=(E // 2) * r / max(1.0, ratio), oversubscription=ratio,
                  max_endpoints=max_endpoints, needed_radix=needed)


def plan(gpus, radix=64, gpus_per_server=8, nics_per_server=8, link_gbps=400.0,
         oversubscription=1.0, *, training: TrainingRun = TrainingRun()) -> dict:
    """Switches, ports and cables of each design for `gpus`, and the training
    arithmetic of `training` on them. Raises PlanError on an input it cannot
    use."""
    gpus = check.whole("gpus", gpus, check.MIN_GPUS, check.MAX_GPUS)
    even = f"an even whole number from {MIN_RADIX} to {MAX_RADIX:,} (ports per switch)"
    radix = check.whole("radix", radix, MIN_RADIX, MAX_RADIX, even)
    if radix % 2:
        raise PlanError(f"radix must be {even}, got {radix}")
    gpus_per_server = check.whole("gpus_per_server", gpus_per_server, 1, check.MAX_GPUS_PER_SERVER)
    nics_per_server = check.nics_per_server(nics_per_server, gpus_per_server)
    link_gbps = check.positive("link_gbps", link_gbps)
    oversubscription = check.at_least_one("oversubscription", oversubscription)
    arithmetic = training_arithmetic(training.total_flops, training.gpu_flops, gpus,
                                     training.utilisation)

    servers = math.ceil(gpus / gpus_per_server)
    E = servers * nics_per_server
    designs = [form.count(E, radix, link_gbps, oversubscription) for form in FORMS.values()]
    return {
        "inputs": {"gpus": gpus, "radix": radix, "gpus_per_server": gpus_per_server,
                   "nics_per_server": nics_per_server, "link_gbps": link_gbps,
                   "oversubscription": oversubscription, "gpu_flops": arithmetic["gpu_flops"],
                   "total_flops": arithmetic["total_flops"],
                   "utilisation": arithmetic["utilisation"]},
        "servers": servers,
        "endpoints": E,
        "designs": designs,
        "training": arithmetic,
    }


FORMS = {form.name: form for form in (
    Form("full-mesh", 0, 0, lambda R, o: R + 1, lambda E: E - 1 + (E - 1) % 2, _full_mesh),
    Form("single-switch", 1, 0, lambda R, o: R, lambda E: E + E % 2, _single_switch),
    _clos_form("clos-2", 3, 2, lambda R, o: R * leaf_split(R, o)[0]),
    _clos_form("clos-3", 5, 3, lambda R, o: R * (R // 2) * leaf_split(R, o)[0]))}
DESIGNS = tuple(FORMS)
MAX_HOPS = {name: form.max_hops for name, form in FORMS.items()}
