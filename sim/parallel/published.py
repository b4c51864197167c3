"""Published training runs, the check on step.py: each run's model, GPUs
and layout as its paper gives them, and the utilisation it reports.

The achieved compute efficiency (the share of the GPU's peak its matrix
multiplications reach) is set once, from CALIBRATION_RUN, and every other
run is predicted with it, never fitted per run. `EFFICIENCY` is that
figure, rounded; tests/test_parallel_training.py derives it again.

Sources:

- SC21: Narayanan et al., "Efficient Large-Scale Language Model Training
  on GPU Clusters Using Megatron-LM", SC21, Table 1 (weak scaling on
  Selene's DGX A100 80GB, 8 x 200 Gbit/s HDR InfiniBand per server; full
  activation recomputation; the percentage of peak counts the recomputed
  forward pass: HFU).
- K22: Korthikanti et al., "Reducing Activation Recomputation in Large
  Transformer Models", 2022, Table 3 and the MFU/HFU table of Megatron-LM's
  README (sequence parallelism and selective recomputation, data parallel
  size 1, A100 80GB).
- Llama 3: "The Llama 3 Herd of Models", 2024, Table 4 (H100 80GB, 400
  Gbit/s RoCE per GPU, BF16 MFU; TP 8, PP 16, sequence 8,192, a batch of
  16M tokens). The paper does not give its interleaving depth: these runs
  are shown with v = 2 and are not among those the check counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from sim.parallel.layout import Layout
from sim.parallel.model import Model, model
from sim.parallel.step import step_time
from topologies.hardware import SERVERS, Server


@dataclass(frozen=True)
class Run:
    name: str
    source: str
    model: Model
    layout: Layout
    server: Server
    kind: str                  # "mfu" or "hfu": what the paper reports
    published: float
    counted: bool = True       # the layout is fully published: the check counts it


A100, H100 = SERVERS["dgx-a100"], SERVERS["hgx-h100"]


def _sc21(name, dp, batch, hfu):
    lay = {"gpt-145b": (8, 8), "gpt-310b": (8, 16), "gpt-530b": (8, 35), "gpt-1t": (8, 64)}[name]
    return Run(f"SC21 {name[4:].upper()} on {lay[0] * lay[1] * dp:,}", "SC21 Table 1",
               model(name), Layout(tp=lay[0], pp=lay[1], dp=dp, global_batch=batch, zero=0,
                                   recompute="full"), A100, "hfu", hfu)


def _k22(name, pp, batch, mfu):
    return Run(f"K22 {name[4:].upper()} on {8 * pp:,}", "K22 Table 3", model(name),
               Layout(tp=8, pp=pp, dp=1, global_batch=batch, zero=0, recompute="selective"),
               A100, "mfu", mfu)


def _llama(dp, mfu):
    return Run(f"Llama 3 405B on {8 * 16 * dp:,}", "Llama 3 Table 4", model("llama3-405b"),
               Layout(tp=8, pp=16, dp=dp, vp=2, global_batch=2048, zero=1,
                      recompute="selective"), H100, "mfu", mfu, counted=False)


CALIBRATION_RUN = "SC21 1T on 3,072"
RUNS: List[Run] = [
    _sc21("gpt-1t", 6, 3072, 0.52),
    _sc21("gpt-530b", 9, 2520, 0.52),
    _sc21("gpt-310b", 15, 2160, 0.50),
    _sc21("gpt-145b", 24, 2304, 0.47),
    _k22("gpt-22b", 1, 4, 0.415),
    _k22("gpt-175b", 8, 64, 0.514),
    _k22("gpt-530b", 35, 280, 0.560),
    _k22("gpt-1t", 64, 512, 0.563),
    _llama(64, 0.43),
    _llama(128, 0.41),
]
EFFICIENCY = 0.669           # calibrate() on CALIBRATION_RUN, to three places
TOLERANCE = 0.15             # the issue's: within 15% of the published figure


def predicted(run: Run, efficiency: float = EFFICIENCY) -> dict:
    return step_time(run.model, run.layout, run.server, efficiency)


def calibrate(name: str = CALIBRATION_RUN) -> float:
    """The efficiency at which the run's predicted utilisation is its
    published one (bisection: utilisation grows with efficiency)."""
    run = next(r for r in RUNS if r.name == name)
    low, high = 0.05, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        if predicted(run, mid)[run.kind] < run.published:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def compare(efficiency: float = EFFICIENCY) -> List[dict]:
    """Each run: published and predicted utilisation, their ratio, and
    whether it is within TOLERANCE."""
    rows = []
    for run in RUNS:
        f = predicted(run, efficiency)
        ratio = f[run.kind] / run.published
        rows.append({"run": run.name, "source": run.source, "layout": run.layout.name(),
                     "gpus": run.layout.gpus, "gpu": run.server.gpu.name, "kind": run.kind,
                     "published": run.published, "predicted": f[run.kind], "ratio": ratio,
                     "within": abs(ratio - 1) <= TOLERANCE, "counted": run.counted,
                     "calibration": run.name == CALIBRATION_RUN,
                     "bubble_share": f["bubble_share"], "tp_share": f["tp_s"] / f["step_s"],
                     "step_s": f["step_s"]})
    return rows
