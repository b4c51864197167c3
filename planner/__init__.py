"""Capacity planning, closed-form: what a cluster of N GPUs costs in switches,
ports and cables under each network design, how long its training arithmetic
takes, and how long an AllReduce takes, by an alpha-beta cost model that can be
calibrated against an emulated run of a fabric. No root, no network, no graph:
it answers for 200,000 GPUs in well under a millisecond.

    python -m planner --gpus 200000 --radix 64
    python -m planner --gpus 200000 --radix 128 --nics-per-server 1 --json
    python -m planner --fabric topologies/multi-gpu.yaml --results results/<run>

The modules, each with one job:

- inputs: PlanError, the ranges of the inputs and their validators, parse_bytes.
- designs: full mesh, single switch, 2- and 3-tier Clos; plan() and min_radix()
  (the formulas are in its docstring).
- compute: the training arithmetic.
- costmodel: predict_allreduce, the plan's AllReduce priced by the
  simulator's closed forms (sim/closed_form.py: ring and hierarchical
  AllReduce seconds, re-exported here); the planner prices no collective
  itself.
- calibration: the AllReduce model read off a fabric's schedule, calibrated
  against an emulated run's results (fit_alpha_beta).
- report: the plan and the fabric predictions as text.
- cli: the command line (``python -m planner``).
"""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m planner...` outside .venv runs in .venv

from planner.calibration import (calibrate_from_run, fabric_model, fabric_predictions,
                                 fit_alpha_beta)
from planner.cli import main
from planner.costmodel import NVLINK_GBPS, Links, predict_allreduce
from planner.designs import DESIGNS, MAX_HOPS, Design, min_radix, plan
from planner.inputs import (MAX_GPUS, MAX_GPUS_PER_SERVER, MAX_RADIX, MIN_GPUS, MIN_RADIX,
                            PlanError, parse_bytes)
from planner.report import format_fabric, format_plan
from planner.compute import DAYS_PER_YEAR, SECONDS_PER_DAY, TrainingRun, training_arithmetic
from sim.closed_form import hierarchical_allreduce_seconds, ring_allreduce_seconds

__all__ = [
    "DAYS_PER_YEAR", "DESIGNS", "MAX_GPUS", "MAX_GPUS_PER_SERVER", "MAX_HOPS", "MAX_RADIX",
    "MIN_GPUS", "MIN_RADIX", "NVLINK_GBPS", "SECONDS_PER_DAY", "Design", "Links", "PlanError",
    "TrainingRun", "calibrate_from_run", "fabric_model", "fabric_predictions", "fit_alpha_beta",
    "format_fabric", "format_plan", "hierarchical_allreduce_seconds", "main", "min_radix",
    "parse_bytes", "plan", "predict_allreduce", "ring_allreduce_seconds", "training_arithmetic",
]
