"""AllReduce on an emulated fabric: the same alpha-beta accounting the lab
prints as "meas/pred", read off the schedule that runs on the YAML's fabric
(its ranks, NICs shared or not, NVLink-class links), then calibrated on an
emulated run of that fabric:

    time = alpha x steps + kappa x (the bandwidth term at the configured rates),

fitted by least squares over the run's sizes (`fit_alpha_beta`). kappa is 1
when the links are the only limit; 1/kappa is the efficiency the emulation
reached.

The fit lives here, not beside the closed forms in sim/: it prices no
collective, it estimates the model's two parameters from measured times,
and calibrating against a run is the planner's (`--results`); nothing in
the simulator fits.
"""

from __future__ import annotations

import math

from planner import inputs as check
from planner.inputs import PlanError


def fabric_model(fabric, algorithm: str, size_bytes: int) -> dict:
    """Steps and bandwidth seconds of an AllReduce of `size_bytes` over every
    endpoint of `fabric` (a topologies.fabric.Fabric), at its configured rates."""
    # Imported here, not at the top: a plan without a fabric needs nothing of the lab.
    from collectives import metrics
    from sim import alphabeta
    from collectives import schedules
    n, local = len(fabric.endpoints), fabric.gpus_per_server
    count = schedules.round_count("allreduce", n, size_bytes // metrics.TYPE_SIZE)
    beta = metrics.beta_for_rate(fabric.nic_rate_mbit, fabric.mtu)
    intra = fabric.link_classes.get("intra_node")
    beta_intra = metrics.beta_for_rate(intra.rate_mbit, fabric.mtu) if intra else None
    nic = {rank: (e.leaf, e.port) for rank, e in enumerate(fabric.endpoints)}   # rank -> its NIC
    costs = alphabeta.Costs(0.0, beta, beta_intra, nic.__getitem__)
    seconds = alphabeta.predict("allreduce", algorithm, n, count, costs, 0, local)
    sched = schedules.build("allreduce", algorithm, n, count, schedules.RankLayout(local=local))
    steps = alphabeta.schedule_cost(sched)["steps"]
    return {"steps": steps, "bandwidth_s": seconds}


def calibrate_from_run(fabric, runs) -> dict:
    """alpha and kappa from an emulated run's AllReduce sizes (summary.json's
    collectives.runs), with the fit's inputs. Sizes the run's verdict
    flagged as not to quote (too small for the link's rate, faster than the
    link, behind the simulator) are left out and listed under `skipped`: a
    fit to them would carry their error."""
    points, used, skipped = [], [], []
    for r in runs:
        if r.get("collective") != "allreduce" or not r.get("time_s"):
            continue
        if r.get("flags"):
            skipped.append({"algorithm": r["algorithm"], "size_bytes": r["size_bytes"],
                            "flags": list(r["flags"])})
            continue
        model = fabric_model(fabric, r["algorithm"], r["size_bytes"])
        points.append((model["steps"], model["bandwidth_s"], r["time_s"]))
        used.append({"algorithm": r["algorithm"], "size_bytes": r["size_bytes"],
                     "measured_s": r["time_s"], **model})
    if not points:
        raise PlanError("the results hold no AllReduce run to calibrate from" + (
            f": all {len(skipped)} of its sizes are flagged as not to quote "
            f"({', '.join(sorted({f for s in skipped for f in s['flags']}))}); "
            "calibrate on a run with larger sizes" if skipped else ""))
    alpha, kappa = fit_alpha_beta(points)
    return {"alpha_s": alpha, "kappa": kappa, "points": used, "skipped": skipped}


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


def _fit_points(points) -> list:
    """(steps, bytes, seconds) as floats, each checked."""
    pts = []
    for i, p in enumerate(points or ()):
        try:
            s, B, t = p
        except (TypeError, ValueError):
            raise PlanError(f"points[{i}] must be a (steps, bytes, seconds) triple, got {p!r}") from None
        pts.append((float(check.non_negative(f"points[{i}] steps", s)),
                    float(check.non_negative(f"points[{i}] bytes", B)),
                    float(check.non_negative(f"points[{i}] seconds", t))))
    if not pts:
        raise PlanError("points must hold at least one (steps, bytes, seconds) triple")
    return pts


def fit_alpha_beta(points) -> tuple:
    """(alpha, beta) >= 0 minimising sum (seconds - steps*alpha - bytes*beta)^2
    over (steps, bytes, seconds) points.

    The 2x2 normal equations are solved on unit-norm columns; if that solution
    has a negative coefficient, the fit is redone with it at 0 (the best of
    the feasible candidates wins, which is the exact non-negative solution for
    two unknowns). When steps and bytes are proportional (one point, say) only
    their combination is determined and alpha = 0 is chosen."""
    pts = _fit_points(points)
    ss = sum(s * s for s, _, _ in pts)
    bb = sum(B * B for _, B, _ in pts)
    if ss == 0 and bb == 0:
        raise PlanError("points must have at least one point with steps or bytes above 0")
    sb = sum(s * B for s, B, _ in pts)
    st = sum(s * t for s, _, t in pts)
    bt = sum(B * t for _, B, t in pts)

    def sse(a, b):
        return sum((t - s * a - B * b) ** 2 for s, B, t in pts)

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
    candidates = [(0.0, max(0.0, bt / bb) if bb > 0 else 0.0),       # alpha = 0 wins ties
                  (max(0.0, st / ss) if ss > 0 else 0.0, 0.0)]
    tolerance = 1e-12 * sum(t * t for _, _, t in pts)     # rounding, not a better fit
    best, best_err = None, None
    for a, b in candidates:
        err = sse(a, b)
        if best is None or err < best_err - tolerance:
            best, best_err = (a, b), err
    return best
