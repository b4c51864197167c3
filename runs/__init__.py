"""A run: an experiment (which collective, sizes, what to measure) swept size
by size on an engine, emulated on a lab or simulated, and its run record.

- experiment.py: the experiment, validated once; flags.py: run_topology.py's
  command line, checked by the experiment's own validators; outputs.py: where
  a run writes, checked before anything is built;
- sweep.py: the one message-size loop, on a backend: measured.py (a live
  lab, with lab_parts.py alongside) or simulated.py (--engine sim); record.py:
  the run record it returns; beside.py: the simulation beside every emulated
  size;
- training.py: a training step replayed and measured, or simulated;
- rate_calibration.py: which link rates this host can emulate.
"""
