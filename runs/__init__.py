"""A run: an experiment (which collective, sizes, what to measure) swept size
by size on an engine, emulated on a lab or simulated, and its run record.

- experiment.py: the experiment, validated once; flags.py: run_topology.py's
  command line, checked by the experiment's own validators; outputs.py: where
  a run writes, checked before anything is built;
- sweep.py: a message-size sweep on a live lab, measured; simulated.py: the
  same sweep simulated (--engine sim); beside.py: the simulation beside every
  emulated size;
- training.py: a training step replayed and measured, or simulated;
- rate_calibration.py: which link rates this host can emulate.
"""
