"""Training with real parallelism, priced: a transformer by its shape
(model.py), a layout of tensor, pipeline, data, context and expert
parallelism (layout.py), what a GPU holds for it (memory.py), its step
with every collective as NCCL runs it and the pipeline's bubble, MFU as the
published runs report it (step.py), and the search for the best layouts at
any GPU count (search.py). Checked against published training runs in
bench/training_bench.py.
"""

from sim.parallel.layout import Layout, LayoutError, check, pipeline_bubble, stage_layers
from sim.parallel.memory import check_fits, memory
from sim.parallel.model import MODELS, Model, from_params, model
from sim.parallel.search import search
from sim.parallel.step import step_time

__all__ = ["Layout", "LayoutError", "MODELS", "Model", "check", "check_fits", "from_params",
           "memory", "model", "pipeline_bubble", "search", "stage_layers", "step_time"]
