"""GPU generations, one module each (volta.py, ampere.py, hopper.py,
blackwell.py, cdna3.py, cdna4.py): each registers its Generation, the
figures NCCL's (or RCCL's) model reads for it, with their sources beside
them, and defines the GPUs of that generation as sold (H100, H200, ...).
generation.py holds the Generation class, what each field means, the Gpu
class and the registry.

    from topologies.gpus import generation
    generation("hopper").per_channel_tree        # (38.7, 41.4, 36.0)

A new generation is one new module here (and its tests): the package
imports every module in it, each registers its generation with @register,
and a generation that leaves a field the model reads unset is refused with
one sentence naming it.
"""

from __future__ import annotations

from typing import Tuple

from registries import discover
from topologies.gpus.generation import REGISTRY, SCALEUP, Generation, Gpu, register

discover(__name__, __path__, skip=("generation",))

# the names, oldest first
GENERATIONS: Tuple[str, ...] = REGISTRY.names()


def generation(name: str) -> Generation:
    """The generation called `name`, or ValueError: one sentence naming those there are."""
    return REGISTRY.find(name)


__all__ = ["GENERATIONS", "Generation", "Gpu", "REGISTRY", "SCALEUP", "generation", "register"]
