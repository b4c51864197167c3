"""AllReduce on an emulated fabric: the same alpha-beta accounting the lab
prints as "meas/pred", read off the schedule that runs on the YAML's fabric
(its ranks, NICs shared or not, NVLink-class links), then calibrated on an
emulated run of that fabric:

    time = alpha x steps + kappa x (the bandwidth term at the configured rates),

fitted by least squares over the run's sizes. kappa is 1 when the links are
the only limit; 1/kappa is the efficiency the emulation reached.
"""

from __future__ import annotations

from planner.costmodel import fit_alpha_beta
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
    beta = metrics.beta_for_rate(fabric.spec["links"]["server_leaf"]["rate_mbit"], fabric.mtu)
    intra = fabric.spec["links"].get("intra_node")
    beta_intra = metrics.beta_for_rate(intra["rate_mbit"], fabric.mtu) if intra else None
    nic = {rank: (e.leaf, e.port) for rank, e in enumerate(fabric.endpoints)}   # rank -> its NIC
    costs = alphabeta.Costs(0.0, beta, beta_intra, nic.__getitem__)
    seconds = alphabeta.predict("allreduce", algorithm, n, count, costs, 0, local)
    sched = schedules.build("allreduce", algorithm, n, count, schedules.Layout(local=local))
    steps = alphabeta.schedule_cost(sched)["steps"]
    return {"steps": steps, "bandwidth_s": seconds}


def calibrate_from_run(fabric, runs) -> dict:
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
