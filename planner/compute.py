"""Training arithmetic: how long a training run's FLOPs take.

One GPU at ``gpu_flops`` does ``gpu_flops * 86400`` FLOPs a day (2e15 FLOP/s:
about 1.7e20). A job of ``total_flops`` takes ``total_flops / gpu_flops``
seconds on one GPU (1e24: 5e8 s, about 15.8 years of 365.25 days) and
``total_flops / (gpu_flops * gpus * utilisation)`` on ``gpus`` GPUs, assuming
ideal linear scaling derated by ``utilisation``.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner import inputs as check

SECONDS_PER_DAY = 86400.0
DAYS_PER_YEAR = 365.25


@dataclass(frozen=True)
class TrainingRun:
    """The training run a plan is for: its FLOPs, one GPU's FLOP/s, and the
    share of them the run reaches (`utilisation`)."""
    total_flops: float = 1e24
    gpu_flops: float = 2e15
    utilisation: float = 1.0


def training_arithmetic(total_flops=1e24, gpu_flops=2e15, gpus=1, utilisation=1.0) -> dict:
    """How long `total_flops` take on one GPU and on `gpus` GPUs (ideal linear
    scaling derated by `utilisation`)."""
    total_flops = check.positive("total_flops", total_flops)
    gpu_flops = check.positive("gpu_flops", gpu_flops)
    gpus = check.whole("gpus", gpus, 1, check.MAX_GPUS)
    utilisation = check.fraction("utilisation", utilisation)
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
