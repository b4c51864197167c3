"""Capacity planner: what a cluster of N GPUs costs in switches, ports and
cables under each network design, and how long its training arithmetic and an
AllReduce take. Closed-form arithmetic only: no root, no network, no graph, so
it answers for 200,000 GPUs in well under a millisecond.

    python -m topologies.planner --gpus 200000 --radix 64
    python -m topologies.planner --gpus 200000 --radix 128 --nics-per-server 1 --json

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

Training arithmetic
-------------------
One GPU at ``gpu_flops`` does ``gpu_flops * 86400`` FLOPs a day (2e15 FLOP/s:
about 1.7e20). A job of ``total_flops`` takes ``total_flops / gpu_flops``
seconds on one GPU (1e24: 5e8 s, about 15.8 years of 365.25 days) and
``total_flops / (gpu_flops * gpus * utilisation)`` on ``gpus`` GPUs, assuming
ideal linear scaling derated by ``utilisation``.

AllReduce (alpha-beta model)
----------------------------
A step costs alpha seconds of latency, a byte costs beta = 8 / (Gbit/s * 1e9
* efficiency) seconds.

- ring over n ranks, S bytes: ``2(n-1) alpha + 2(n-1)/n * S * beta``.
- hierarchical (NCCL-style) over m nodes of g GPUs: intra-node ReduceScatter
  ``(g-1) a_intra + (g-1)/g * S * b_intra``, then an inter-node ring
  AllReduce per rail on S/g bytes ``2(m-1) a_inter + 2(m-1)/m * (S/g) *
  b_inter``, then an intra-node AllGather costing the same as the
  ReduceScatter. With m = 1 only the intra parts remain; with g = 1 it is the
  flat ring.

`predict_allreduce` prices the flat ring at the scale-out link for every hop
(the design without scale-up) and the hierarchical one with NVLink inside the
server (``NVLINK_GBPS`` unless told otherwise). When a server has fewer NICs
than GPUs, the g/nics GPUs sharing a NIC share its rate: b_inter is multiplied
by g/nics.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "DESIGNS", "NVLINK_GBPS", "Design", "PlanError", "fit_alpha_beta", "format_plan",
    "hierarchical_allreduce_seconds", "main", "min_radix", "parse_bytes", "plan",
    "predict_allreduce", "ring_allreduce_seconds", "training_arithmetic",
]

DESIGNS = ("full-mesh", "single-switch", "clos-2", "clos-3")
MAX_HOPS = {"full-mesh": 0, "single-switch": 1, "clos-2": 3, "clos-3": 5}

SECONDS_PER_DAY = 86400.0
DAYS_PER_YEAR = 365.25
MIN_GPUS, MAX_GPUS = 2, 10_000_000
MIN_RADIX, MAX_RADIX = 4, 1024
MAX_GPUS_PER_SERVER = 72
# H100 SXM: 18 NVLink-4 links x 25 GB/s per direction = 450 GB/s = 3,600 Gbit/s.
NVLINK_GBPS = 3600.0


class PlanError(ValueError):
    """An input the planner cannot use: one sentence naming the parameter."""


# --- validation ---------------------------------------------------------------------

def _number(name, value, what="a number"):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and not math.isfinite(value)):
        raise PlanError(f"{name} must be {what}, got {value!r}")
    return value


def _whole(name, value, lo, hi, what=None):
    what = what or f"a whole number from {lo:,} to {hi:,}"
    _number(name, value, what)
    if isinstance(value, float):
        if not value.is_integer():
            raise PlanError(f"{name} must be {what}, got {value!r}")
        value = int(value)
    if not lo <= value <= hi:
        raise PlanError(f"{name} must be {what}, got {value!r}")
    return value


def _positive(name, value):
    what = "a number greater than 0"
    if _number(name, value, what) <= 0:
        raise PlanError(f"{name} must be {what}, got {value!r}")
    return float(value)


def _at_least_one(name, value):
    what = "a number of at least 1"
    if _number(name, value, what) < 1:
        raise PlanError(f"{name} must be {what}, got {value!r}")
    return float(value)


def _non_negative(name, value):
    what = "a number of at least 0"
    if _number(name, value, what) < 0:
        raise PlanError(f"{name} must be {what}, got {value!r}")
    return value


def _fraction(name, value):
    what = "a number greater than 0 and at most 1"
    if not 0 < _number(name, value, what) <= 1:
        raise PlanError(f"{name} must be {what}, got {value!r}")
    return float(value)


# --- training arithmetic ------------------------------------------------------------

def training_arithmetic(total_flops=1e24, gpu_flops=2e15, gpus=1, utilisation=1.0) -> dict:
    """How long `total_flops` take on one GPU and on `gpus` GPUs (ideal linear
    scaling derated by `utilisation`)."""
    total_flops = _positive("total_flops", total_flops)
    gpu_flops = _positive("gpu_flops", gpu_flops)
    gpus = _whole("gpus", gpus, 1, MAX_GPUS)
    utilisation = _fraction("utilisation", utilisation)
    seconds_one = total_flops / gpu_flops
    seconds_all = total_flops / (gpu_flops * gpus * utilisation)
    return {
        "total_flops": total_flops,
        "gpu_flops": gpu_flops,
        "flops_per_day": gpu_flops * SECONDS_PER_DAY,
        "seconds_one_gpu": seconds_one,
        "days_one_gpu": seconds_one / SECONDS_PER_DAY,
        "years_one_gpu": seconds_one / SECONDS_PER_DAY / DAYS_PER_YEAR,
        "gpus": gpus,
        "utilisation": utilisation,
        "seconds_all_gpus": seconds_all,
        "days_all_gpus": seconds_all / SECONDS_PER_DAY,
    }


# --- network designs ----------------------------------------------------------------

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


def _leaf_split(radix, oversubscription):
    """(down, up) ports of a leaf: d = floor(R*o/(1+o)), at least one port up."""
    down = math.floor(radix * oversubscription / (1.0 + oversubscription) + 1e-9)
    down = max(1, min(radix - 1, down))
    return down, radix - down


def _max_endpoints(name, radix, oversubscription):
    if name == "full-mesh":
        return radix + 1
    if name == "single-switch":
        return radix
    down, _ = _leaf_split(radix, oversubscription)
    if name == "clos-2":
        return radix * down
    if name == "clos-3":
        return radix * (radix // 2) * down
    raise PlanError(f"design must be one of {', '.join(DESIGNS)}, got {name!r}")


def _needed_radix(name, endpoints, oversubscription):
    """Smallest even radix >= 4 at which `name` holds `endpoints` (not capped at
    MAX_RADIX: a full mesh of 200,000 needs 199,999 ports whatever we allow)."""
    if name == "full-mesh":
        return max(MIN_RADIX, endpoints - 1 + (endpoints - 1) % 2)
    if name == "single-switch":
        return max(MIN_RADIX, endpoints + endpoints % 2)

    def fits(half):  # radix = 2 * half; max endpoints grow with the radix
        return _max_endpoints(name, 2 * half, oversubscription) >= endpoints

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
    gpus = _whole("gpus", gpus, MIN_GPUS, MAX_GPUS)
    gpus_per_server = _whole("gpus_per_server", gpus_per_server, 1, MAX_GPUS_PER_SERVER)
    nics_per_server = _whole("nics_per_server", nics_per_server, 1, gpus_per_server,
                             f"a whole number from 1 to gpus_per_server ({gpus_per_server})")
    oversubscription = _at_least_one("oversubscription", oversubscription)
    endpoints = math.ceil(gpus / gpus_per_server) * nics_per_server
    return _needed_radix(design, endpoints, oversubscription)


def _too_big(name, endpoints, radix, max_endpoints, ratio, needed):
    ways = [f"a higher radix ({needed:,})"]
    if _max_endpoints(name, radix, radix - 1) >= endpoints:   # all but one port down
        ways.append("more oversubscription")
    ways.append("another tier")
    return (f"{endpoints:,} endpoints exceed the largest {name} at radix {radix} and "
            f"{_ratio(ratio)} oversubscription ({max_endpoints:,} endpoints); it needs "
            + ", ".join(ways[:-1]) + f" or {ways[-1]}")


def _full_mesh(E, R, r):
    needed = _needed_radix("full-mesh", E, 1.0)
    fits = E - 1 <= R
    reason = "" if fits else (f"each endpoint would need {E - 1:,} ports; "
                              f"a port budget of {R} allows {R}")
    return Design("full-mesh", fits, reason, E, switches=0, switches_by_tier={},
                  switch_ports=0, cables=E * (E - 1) // 2, ports_per_endpoint=E - 1,
                  max_hops=MAX_HOPS["full-mesh"], bisection_gbps=(E // 2) * ((E + 1) // 2) * r,
                  oversubscription=1.0, max_endpoints=R + 1, needed_radix=needed)


def _single_switch(E, R, r):
    needed = _needed_radix("single-switch", E, 1.0)
    fits = E <= R
    reason = "" if fits else f"{E:,} endpoints need a {E:,}-port switch; the radix is {R}"
    return Design("single-switch", fits, reason, E, switches=1, switches_by_tier={"switch": 1},
                  switch_ports=E, cables=E, ports_per_endpoint=1,
                  max_hops=MAX_HOPS["single-switch"], bisection_gbps=(E // 2) * r,
                  oversubscription=1.0, max_endpoints=R, needed_radix=needed)


def _clos(name, E, R, r, o):
    d, u = _leaf_split(R, o)
    ratio = d / u
    leaves = math.ceil(E / d)
    leaf_up_cables = leaves * u
    if name == "clos-2":
        tiers = {"leaf": leaves, "spine": math.ceil(leaf_up_cables / R)}
        fabric_cables = leaf_up_cables
    else:
        aggs = math.ceil(leaf_up_cables / (R // 2))
        tiers = {"leaf": leaves, "agg": aggs, "core": math.ceil(aggs * (R // 2) / R)}
        fabric_cables = leaf_up_cables + aggs * (R // 2)
    max_endpoints = _max_endpoints(name, R, o)
    needed = _needed_radix(name, E, o)
    fits = E <= max_endpoints
    reason = "" if fits else _too_big(name, E, R, max_endpoints, ratio, needed)
    return Design(name, fits, reason, E, switches=sum(tiers.values()), switches_by_tier=tiers,
                  switch_ports=E + 2 * fabric_cables, cables=E + fabric_cables,
                  ports_per_endpoint=1, max_hops=MAX_HOPS[name],
                  bisection_gbps=(E // 2) * r / max(1.0, ratio), oversubscription=ratio,
                  max_endpoints=max_endpoints, needed_radix=needed)


def plan(gpus, radix=64, gpus_per_server=8, nics_per_server=8, link_gbps=400.0,
         oversubscription=1.0, *, gpu_flops=2e15, total_flops=1e24, utilisation=1.0) -> dict:
    """Switches, ports and cables of each design for `gpus`, and the training
    arithmetic. Raises PlanError on an input it cannot use."""
    gpus = _whole("gpus", gpus, MIN_GPUS, MAX_GPUS)
    radix = _whole("radix", radix, MIN_RADIX, MAX_RADIX,
                   f"an even whole number from {MIN_RADIX} to {MAX_RADIX:,} (ports per switch)")
    if radix % 2:
        raise PlanError(f"radix must be an even whole number from {MIN_RADIX} to {MAX_RADIX:,} "
                        f"(ports per switch), got {radix}")
    gpus_per_server = _whole("gpus_per_server", gpus_per_server, 1, MAX_GPUS_PER_SERVER)
    nics_per_server = _whole("nics_per_server", nics_per_server, 1, gpus_per_server,
                             f"a whole number from 1 to gpus_per_server ({gpus_per_server})")
    link_gbps = _positive("link_gbps", link_gbps)
    oversubscription = _at_least_one("oversubscription", oversubscription)
    training = training_arithmetic(total_flops, gpu_flops, gpus, utilisation)

    servers = math.ceil(gpus / gpus_per_server)
    E = servers * nics_per_server
    designs = [_full_mesh(E, radix, link_gbps), _single_switch(E, radix, link_gbps),
               _clos("clos-2", E, radix, link_gbps, oversubscription),
               _clos("clos-3", E, radix, link_gbps, oversubscription)]
    return {
        "inputs": {"gpus": gpus, "radix": radix, "gpus_per_server": gpus_per_server,
                   "nics_per_server": nics_per_server, "link_gbps": link_gbps,
                   "oversubscription": oversubscription, "gpu_flops": training["gpu_flops"],
                   "total_flops": training["total_flops"], "utilisation": training["utilisation"]},
        "servers": servers,
        "endpoints": E,
        "designs": designs,
        "training": training,
    }


# --- AllReduce: alpha-beta model ----------------------------------------------------

def ring_allreduce_seconds(n, size_bytes, alpha_s, beta_s_per_byte) -> float:
    """Ring AllReduce of `size_bytes` over `n` ranks: 2(n-1)a + 2(n-1)/n * S * b."""
    n = _whole("n", n, 1, 10 ** 12, "a whole number of at least 1")
    S = _non_negative("size_bytes", size_bytes)
    a = _non_negative("alpha_s", alpha_s)
    b = _non_negative("beta_s_per_byte", beta_s_per_byte)
    return 2 * (n - 1) * a + 2 * (n - 1) / n * S * b


def hierarchical_allreduce_seconds(nodes, gpus_per_node, size_bytes, alpha_intra, beta_intra,
                                   alpha_inter, beta_inter) -> float:
    """NCCL-style hierarchical AllReduce: intra-node ReduceScatter, an inter-node
    ring AllReduce per rail on S/g bytes, intra-node AllGather."""
    m = _whole("nodes", nodes, 1, 10 ** 12, "a whole number of at least 1")
    g = _whole("gpus_per_node", gpus_per_node, 1, 10 ** 6, "a whole number of at least 1")
    S = _non_negative("size_bytes", size_bytes)
    intra = (g - 1) * _non_negative("alpha_intra", alpha_intra) \
        + (g - 1) / g * S * _non_negative("beta_intra", beta_intra)
    inter = ring_allreduce_seconds(m, S / g, _non_negative("alpha_inter", alpha_inter),
                                   _non_negative("beta_inter", beta_inter))
    return intra + inter + intra


def fit_alpha_beta(points) -> tuple:
    """(alpha, beta) >= 0 minimising sum (seconds - steps*alpha - bytes*beta)^2
    over (steps, bytes, seconds) points.

    The 2x2 normal equations are solved on unit-norm columns; if that solution
    has a negative coefficient, the fit is redone with it at 0 (the best of
    the feasible candidates wins, which is the exact non-negative solution for
    two unknowns). When steps and bytes are proportional (one point, say) only
    their combination is determined and alpha = 0 is chosen."""
    pts = []
    for i, p in enumerate(points or ()):
        try:
            s, B, t = p
        except (TypeError, ValueError):
            raise PlanError(f"points[{i}] must be a (steps, bytes, seconds) triple, got {p!r}") from None
        pts.append((float(_non_negative(f"points[{i}] steps", s)),
                    float(_non_negative(f"points[{i}] bytes", B)),
                    float(_non_negative(f"points[{i}] seconds", t))))
    if not pts:
        raise PlanError("points must hold at least one (steps, bytes, seconds) triple")
    ss = sum(s * s for s, _, _ in pts)
    bb = sum(B * B for _, B, _ in pts)
    if ss == 0 and bb == 0:
        raise PlanError("points must have at least one point with steps or bytes above 0")
    sb = sum(s * B for s, B, _ in pts)
    st = sum(s * t for s, _, t in pts)
    bt = sum(B * t for _, B, t in pts)

    def sse(a, b):
        return sum((t - s * a - B * b) ** 2 for s, B, t in pts)

    candidates = []
    if ss > 0 and bb > 0:
        ns, nb = math.sqrt(ss), math.sqrt(bb)
        c = sb / (ns * nb)                      # cosine between the two columns
        det = 1.0 - c * c
        if det > 1e-12:                         # columns not (nearly) proportional
            ys, yb = st / ns, bt / nb
            x = (ys - c * yb) / det
            y = (yb - c * ys) / det
            a, b = x / ns, y / nb
            if a >= 0 and b >= 0:
                return a, b
    candidates.append((0.0, max(0.0, bt / bb) if bb > 0 else 0.0))   # alpha = 0 wins ties
    candidates.append((max(0.0, st / ss) if ss > 0 else 0.0, 0.0))
    tolerance = 1e-12 * sum(t * t for _, _, t in pts)     # rounding, not a better fit
    best, best_err = None, None
    for a, b in candidates:
        err = sse(a, b)
        if best is None or err < best_err - tolerance:
            best, best_err = (a, b), err
    return best


def predict_allreduce(plan_or_gpus, gradient_bytes, alpha_s=5e-6, link_gbps=None, intra_gbps=None,
                      efficiency=1.0, *, gpus_per_server=None, nics_per_server=None,
                      intra_alpha_s=None) -> dict:
    """Flat-ring and hierarchical AllReduce times of `gradient_bytes` over the GPUs
    of a plan (the dict `plan` returns) or over a GPU count.

    beta = 8 / (link_gbps * 1e9 * efficiency) for the scale-out link and
    8 / (intra_gbps * 1e9 * efficiency) inside a server (NVLINK_GBPS when not
    given); intra_alpha_s defaults to alpha_s. Arguments given explicitly win
    over the plan's inputs; without a plan, 8 GPUs and 8 NICs per server at
    400 Gbit/s."""
    if isinstance(plan_or_gpus, dict):
        inputs = plan_or_gpus.get("inputs", plan_or_gpus)
        gpus = inputs.get("gpus")
        if gpus_per_server is None:
            gpus_per_server = inputs.get("gpus_per_server")
        if nics_per_server is None:
            nics_per_server = inputs.get("nics_per_server")
        if link_gbps is None:
            link_gbps = inputs.get("link_gbps")
    else:
        gpus = plan_or_gpus
    gpus = _whole("gpus", gpus, 1, MAX_GPUS)
    g = _whole("gpus_per_server", 8 if gpus_per_server is None else gpus_per_server,
               1, MAX_GPUS_PER_SERVER)
    nics = _whole("nics_per_server", g if nics_per_server is None else nics_per_server, 1, g,
                  f"a whole number from 1 to gpus_per_server ({g})")
    link_gbps = _positive("link_gbps", 400.0 if link_gbps is None else link_gbps)
    intra_gbps = _positive("intra_gbps", NVLINK_GBPS if intra_gbps is None else intra_gbps)
    efficiency = _fraction("efficiency", efficiency)
    S = _non_negative("gradient_bytes", gradient_bytes)
    alpha = float(_non_negative("alpha_s", alpha_s))
    intra_alpha = float(_non_negative("intra_alpha_s",
                                      alpha if intra_alpha_s is None else intra_alpha_s))

    nodes = math.ceil(gpus / g)
    per_node = min(g, gpus)
    beta = 8.0 / (link_gbps * 1e9 * efficiency)
    beta_intra = 8.0 / (intra_gbps * 1e9 * efficiency)
    beta_inter = beta * per_node / min(nics, per_node)     # GPUs sharing a NIC share its rate
    ring = ring_allreduce_seconds(gpus, S, alpha, beta)
    hier = hierarchical_allreduce_seconds(nodes, per_node, S, intra_alpha, beta_intra, alpha, beta_inter)
    return {
        "gpus": gpus, "nodes": nodes, "gpus_per_node": per_node, "nics_per_node": min(nics, per_node),
        "gradient_bytes": S, "alpha_s": alpha, "intra_alpha_s": intra_alpha,
        "link_gbps": link_gbps, "intra_gbps": intra_gbps, "efficiency": efficiency,
        "beta_s_per_byte": beta, "intra_beta_s_per_byte": beta_intra,
        "inter_beta_s_per_byte": beta_inter,
        "ring_seconds": ring, "hierarchical_seconds": hier,
        "speedup": ring / hier if hier > 0 else 1.0,
    }


# --- the report ---------------------------------------------------------------------

def _count(n):
    return f"{int(n):,}"


def _num(x):
    """2.0e10 for big or tiny values, 40,000 or 12.5 otherwise."""
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1e7 or abs(x) < 1e-3:
        mantissa, exponent = f"{x:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    if x == int(x):
        return f"{int(x):,}"
    return f"{x:,.3g}" if abs(x) < 100 else f"{x:,.1f}"


def _ratio(x):
    return f"{x:.3g}:1"


def _duration(seconds):
    s = float(seconds)
    if s < 1e-3:
        return f"{s * 1e6:.3g} us"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    if s < 2 * 3600:
        return f"{s / 60:.3g} minutes"
    if s < 2 * SECONDS_PER_DAY:
        return f"{s / 3600:.3g} hours"
    days = s / SECONDS_PER_DAY
    if days < 2 * DAYS_PER_YEAR:
        return f"{days:,.1f} days"
    return f"{days / DAYS_PER_YEAR:,.1f} years ({days:,.0f} days)"


def _bytes(n):
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} B"


def _as_design(d):
    return d if isinstance(d, Design) else Design(**d)


def format_plan(plan_dict) -> str:
    """A human-readable report of what `plan` (or its JSON) returned."""
    inp = plan_dict["inputs"]
    designs = [_as_design(d) for d in plan_dict["designs"]]
    gpus, E = inp["gpus"], plan_dict["endpoints"]
    lines = [
        f"Plan for {_count(gpus)} GPUs: {_count(plan_dict['servers'])} servers x "
        f"{inp['gpus_per_server']} GPUs, {inp['nics_per_server']} scale-out NIC(s) per server "
        f"= {_count(E)} endpoints",
        f"Switch radix {inp['radix']}, links {_num(inp['link_gbps'])} Gbit/s, "
        f"requested oversubscription {_ratio(inp['oversubscription'])}",
        "",
    ]
    header = ("design", "fits", "switches", "switch ports", "cables", "ports/endpoint",
              "max hops", "bisection Tbit/s", "oversub")
    rows = [header] + [
        (d.name, "yes" if d.fits else "no", _count(d.switches), _count(d.switch_ports),
         _count(d.cables), _count(d.ports_per_endpoint), str(d.max_hops),
         _num(d.bisection_gbps / 1000.0), _ratio(d.oversubscription))
        for d in designs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [cell.rjust(w) for cell, w in zip(row[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    for d in designs:
        tiers = " + ".join(f"{_count(n)} {tier}" for tier, n in d.switches_by_tier.items())
        what = f"{d.name}: holds up to {_count(d.max_endpoints)} endpoints at radix {inp['radix']}"
        if tiers:
            what += f"; switches: {tiers}"
        if d.name == "full-mesh":
            what += f"; {_num(d.cables)} cables"
        if d.fits and d.needed_radix:
            what += f"; radix {_count(d.needed_radix)} would do"
        lines.append(what)
        if not d.fits:
            lines.append(f"    does not fit: {d.reason}")
    t = plan_dict["training"]
    lines += [
        "",
        f"Training {_num(t['total_flops'])} FLOPs:",
        f"  FLOP/s per GPU      {_num(t['gpu_flops'])}",
        f"  FLOPs per GPU-day   {_num(t['flops_per_day'])}",
        f"  on one GPU          {_duration(t['seconds_one_gpu'])}",
        f"  on {_count(t['gpus'])} GPUs".ljust(22) + f"{_duration(t['seconds_all_gpus'])} "
        f"({t['days_all_gpus']:.3g} days; ideal scaling at {t['utilisation']:.0%} utilisation)",
    ]
    ar = plan_dict.get("allreduce")
    if ar:
        lines += [
            "",
            f"AllReduce of {_bytes(ar['gradient_bytes'])} (alpha {_num(ar['alpha_s'] * 1e6)} us, "
            f"scale-out {_num(ar['link_gbps'])} Gbit/s, in-server {_num(ar['intra_gbps'])} Gbit/s):",
            f"  flat ring over {_count(ar['gpus'])} GPUs: {_duration(ar['ring_seconds'])}",
            f"  hierarchical, {_count(ar['nodes'])} servers x {ar['gpus_per_node']} GPUs: "
            f"{_duration(ar['hierarchical_seconds'])} ({ar['speedup']:.3g}x faster)",
        ]
    return "\n".join(lines)


# --- command line -------------------------------------------------------------------

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_bytes(text) -> int:
    """'1G' -> 1073741824, '512M', '64K', '1048576' (K/M/G/T are powers of 1024;
    a trailing B or iB is allowed: 1GiB)."""
    s = str(text).strip().upper()
    for tail in ("IB", "B"):
        if s.endswith(tail) and s[:-len(tail)][-1:] in ("K", "M", "G", "T"):
            s = s[:-len(tail)]
            break
    unit = s[-1] if s[-1:] in ("K", "M", "G", "T") else ""
    digits = s[:len(s) - len(unit)].strip()
    if not digits or not digits.replace(".", "", 1).isdigit() or len(digits) > 20:
        raise PlanError(f"gradient bytes must be a size such as 1048576, 512M or 1G, got {text!r}")
    value = float(digits) * _UNITS[unit]
    if not 1 <= value <= 1 << 50:
        raise PlanError(f"gradient bytes must be from 1 byte to 1 PiB, got {text!r}")
    return int(round(value))


# --- on an emulated fabric -------------------------------------------------------------
# The same alpha-beta accounting the lab prints as "meas/pred", read off the
# schedule that runs on the YAML's fabric (its ranks, NICs shared or not,
# NVLink-class links), then calibrated on an emulated run of that fabric:
# time = alpha x steps + kappa x (the bandwidth term at the configured rates),
# fitted by least squares over the run's sizes. kappa is 1 when the links are
# the only limit; 1/kappa is the efficiency the emulation reached.

def fabric_model(fabric, algorithm: str, size_bytes: int) -> dict:
    """Steps and bandwidth seconds of an AllReduce of `size_bytes` over every
    endpoint of `fabric` (a topologies.fabric.Fabric), at its configured rates."""
    from traffic import metrics as M
    from traffic import schedules as S
    n, local = len(fabric.servers), fabric.gpus_per_server
    count = S.round_count("allreduce", n, size_bytes // M.TYPE_SIZE)
    beta = M.beta_for_rate(fabric.spec["links"]["server_leaf"]["rate_mbit"], fabric.mtu)
    intra = fabric.spec["links"].get("intra_node")
    beta_intra = M.beta_for_rate(intra["rate_mbit"], fabric.mtu) if intra else None
    nic = {r: (h.leaf, h.port) for r, h in enumerate(fabric.servers)}
    seconds = M.predict_seconds("allreduce", algorithm, n, count, 0.0, beta, 0, local,
                                beta_intra, nic.__getitem__)
    steps = M.schedule_cost(S.build("allreduce", algorithm, n, count, local=local))["steps"]
    return {"steps": steps, "bandwidth_s": seconds}


def calibrate(fabric, runs) -> dict:
    """alpha and kappa from an emulated run's AllReduce sizes (summary.json's
    collectives.runs), with the fit's inputs."""
    points, used = [], []
    for r in runs:
        if r.get("collective") != "allreduce" or not r.get("time_s"):
            continue
        model = fabric_model(fabric, r["algorithm"], r["size_bytes"])
        points.append((model["steps"], model["bandwidth_s"], r["time_s"]))
        used.append({"algorithm": r["algorithm"], "size_bytes": r["size_bytes"],
                     "measured_s": r["time_s"], **model})
    if not points:
        raise PlanError("the results hold no AllReduce run to calibrate from")
    alpha, kappa = fit_alpha_beta(points)
    return {"alpha_s": alpha, "kappa": kappa, "points": used}


def fabric_predictions(fabric, sizes, algorithms, calibration=None, alpha_s=0.0) -> list:
    """Per size and algorithm: the model at the configured rates (with
    `alpha_s`), the calibrated prediction, and the measured time if the
    calibration run had that size."""
    measured = {(p["algorithm"], p["size_bytes"]): p["measured_s"]
                for p in (calibration or {}).get("points", ())}
    rows = []
    for size in sizes:
        for algorithm in algorithms:
            model = fabric_model(fabric, algorithm, size)
            row = {"size_bytes": size, "algorithm": algorithm, **model,
                   "model_s": alpha_s * model["steps"] + model["bandwidth_s"]}
            if calibration:
                row["calibrated_s"] = (calibration["alpha_s"] * model["steps"]
                                       + calibration["kappa"] * model["bandwidth_s"])
            if (algorithm, size) in measured:
                row["measured_s"] = measured[(algorithm, size)]
            rows.append(row)
    return rows


def format_fabric(fabric, rows, calibration=None, source="") -> str:
    f = fabric
    intra = f.spec["links"].get("intra_node")
    lines = [f"AllReduce on {f.name} ({f.shape()})",
             f"  NIC links {f.spec['links']['server_leaf']['rate_mbit']:g} Mbit/s"
             + (f", NVLink-class links {intra['rate_mbit']:g} Mbit/s" if intra else "")
             + f", MTU {f.mtu}"]
    if calibration:
        lines.append(f"  calibrated from {source or 'an emulated run'} over "
                     f"{len(calibration['points'])} size(s): alpha {calibration['alpha_s'] * 1e3:.2f} ms "
                     f"per step, bandwidth term x{calibration['kappa']:.2f}"
                     + (f" (efficiency {1 / calibration['kappa']:.0%})"
                        if calibration["kappa"] else ""))
    head = f"  {'size':>10}  {'algorithm':<13} {'steps':>5}  {'model s':>9}"
    if calibration:
        head += f"  {'calibrated s':>12}  {'measured s':>10}  {'meas/cal':>8}"
    lines.append(head)
    for r in rows:
        line = (f"  {_bytes(r['size_bytes']):>10}  {r['algorithm']:<13} {r['steps']:>5}  "
                f"{r['model_s']:9.3f}")
        if calibration:
            meas = r.get("measured_s")
            line += (f"  {r['calibrated_s']:12.3f}  "
                     + (f"{meas:10.3f}  {meas / r['calibrated_s']:8.2f}" if meas else
                        f"{'-':>10}  {'-':>8}"))
        lines.append(line)
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise PlanError(message)


def _cli_number(kind):
    def convert(text):
        try:
            value = float(text.replace(",", "").replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        if kind == "a whole number":
            if not math.isfinite(value) or not value.is_integer():
                raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}")
            return int(value)
        return value
    return convert


def _parser():
    whole, number = _cli_number("a whole number"), _cli_number("a number")
    p = _Parser(prog="python -m topologies.planner",
                description="Switches, ports, cables, training time and AllReduce time for "
                            "a GPU cluster under each network design (closed-form, no network built).")
    p.add_argument("--gpus", type=whole, help="GPUs in the cluster (2 to 10,000,000); "
                   "with --fabric or --results, the fabric's own count unless given")
    p.add_argument("--fabric", help="a fabric YAML: plan its GPU count and servers, and predict "
                   "AllReduce on it at its configured rates (its GPUs and NICs per server and "
                   "link rates replace --gpus-per-server, --nics-per-server, --link-gbps and "
                   "--intra-gbps)")
    p.add_argument("--results", help="a results folder of run_topology.py: calibrate the "
                   "AllReduce model on its runs (its fabric, unless --fabric is given)")
    p.add_argument("--radix", type=whole, default=64, help="ports per switch, even (default 64)")
    p.add_argument("--gpus-per-server", type=whole, default=8, help="scale-up domain size (default 8)")
    p.add_argument("--nics-per-server", type=whole, default=8,
                   help="scale-out NICs per server, the network's endpoints (default 8)")
    p.add_argument("--link-gbps", type=number, default=400.0, help="link rate, Gbit/s (default 400)")
    p.add_argument("--oversubscription", type=number, default=1.0,
                   help="leaf downlink:uplink ratio, 1 = nonblocking (default 1)")
    p.add_argument("--gpu-pflops", type=number, default=2.0, help="PFLOP/s per GPU (default 2)")
    p.add_argument("--flops", type=number, default=1e24, help="FLOPs of the training run (default 1e24)")
    p.add_argument("--utilisation", type=number, default=1.0,
                   help="fraction of peak FLOP/s achieved, 0 to 1 (default 1)")
    p.add_argument("--gradient-bytes", default="1G",
                   help="AllReduce size: 1048576, 512M, 1G (powers of 1024; default 1G)")
    p.add_argument("--alpha-us", type=number, default=5.0, help="per-step latency, us (default 5)")
    p.add_argument("--intra-gbps", type=number, default=NVLINK_GBPS,
                   help=f"in-server (NVLink) rate, Gbit/s (default {NVLINK_GBPS:,.0f})")
    p.add_argument("--json", action="store_true", help="print JSON instead of the report")
    return p


def _jsonable(result):
    out = dict(result)
    out["designs"] = [_as_design(d).to_dict() for d in result["designs"]]
    return out


def main(argv=None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:      # --help
        return exc.code if isinstance(exc.code, int) else 0
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        fabric, calibration, source = _fabric_inputs(args)
        if args.gpus is None:
            if fabric is None:
                raise PlanError("--gpus is required (or a --fabric or --results to take it from)")
            args.gpus = len(fabric.servers)
        gpu_flops = _positive("gpu_pflops", args.gpu_pflops) * 1e15
        result = plan(args.gpus, args.radix, args.gpus_per_server, args.nics_per_server,
                      args.link_gbps, args.oversubscription, gpu_flops=gpu_flops,
                      total_flops=args.flops, utilisation=args.utilisation)
        alpha_us = _non_negative("alpha_us", args.alpha_us)
        result["allreduce"] = predict_allreduce(result, parse_bytes(args.gradient_bytes),
                                                alpha_s=alpha_us * 1e-6, intra_gbps=args.intra_gbps)
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = format_plan(result)
    if fabric is not None:
        sizes = _fabric_sizes(fabric, calibration, args)
        algorithms = ["ring"] + (["hierarchical"] if fabric.gpus_per_server > 1 else [])
        rows = fabric_predictions(fabric, sizes, algorithms, calibration,
                                  alpha_s=args.alpha_us * 1e-6)
        result["fabric"] = {"name": fabric.name, "calibration": calibration, "predictions": rows}
        text += "\n\n" + format_fabric(fabric, rows, calibration, source)
    if args.json:
        print(json.dumps(_jsonable(result), indent=2))
    else:
        print(text)
    return 0


def _fabric_inputs(args):
    """The fabric (from --fabric, else the results folder's own fabric.json),
    the calibration from --results, and its source. The fabric also sets the
    servers' GPUs and NICs and the link rates of the plan."""
    from topologies.fabric import FabricError, load_fabric, parse_fabric
    fabric = calibration = None
    source = ""
    try:
        if args.fabric:
            fabric = load_fabric(args.fabric)
        if args.results:
            folder = Path(args.results)
            try:
                summary = json.loads((folder / "summary.json").read_text())
                runs = (summary.get("collectives") or {}).get("runs") or []
                if fabric is None:          # the fabric the run built, checked as a YAML is
                    fabric = parse_fabric((folder / "fabric.json").read_text(),
                                          str(folder / "fabric.json"))
            except (OSError, ValueError, AttributeError) as exc:
                raise PlanError(f"--results {folder}: expected a results folder of "
                                f"run_topology.py with summary.json and fabric.json ({exc})") from None
            other = {r.get("ranks") for r in runs} - {len(fabric.servers), None}
            if other:
                raise PlanError(f"--results {folder}: its runs had {other.pop()} ranks and "
                                f"{fabric.name} has {len(fabric.servers)}: not the same fabric")
            try:
                calibration = calibrate(fabric, runs)
            except (KeyError, TypeError, ValueError) as exc:
                if isinstance(exc, PlanError):
                    raise
                raise PlanError(f"--results {folder}: a run in summary.json cannot be "
                                f"modelled ({type(exc).__name__}: {exc})") from None
            source = str(folder)
    except FabricError as exc:
        raise PlanError(str(exc)) from None
    if fabric is not None:
        args.gpus_per_server = fabric.gpus_per_server
        args.nics_per_server = fabric.spec["server"]["nics"]
        args.link_gbps = fabric.spec["links"]["server_leaf"]["rate_mbit"] / 1e3
        intra = fabric.spec["links"].get("intra_node")
        if intra:
            args.intra_gbps = intra["rate_mbit"] / 1e3
    return fabric, calibration, source


def _fabric_sizes(fabric, calibration, args):
    if calibration:
        return sorted({p["size_bytes"] for p in calibration["points"]})
    return [parse_bytes(args.gradient_bytes)]


if __name__ == "__main__":
    sys.exit(main())
