"""The benchmarks: each one measures the fabric, the simulator, the planner
or the tests themselves side by side in one run and prints its figures
(docs/benchmarks.md). Run one from the repository's root as
`python -m bench.NAME`, or through `scripts/lab bench`; what they share
with the tests is in harness/."""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m bench...` outside .venv runs in .venv
