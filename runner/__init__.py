"""The run orchestrator: one run from the command line to its tables, on
the top layer, whatever runs it.

- `entry`: the command (run_topology.py and the nccl-tests programs):
  flags, checks, which run, signals and closed pipes;
- `run_summary`: the typed `Summary` every run writes as summary.json;
- `sweeping`: a run's collective sweeps, as its front plans them (the
  default: the experiment, then each `--compare` algorithm; an nccl-tests
  program's: ncclperf/nccl_sweeps.py), then results.csv and the figures;
- `on_lab`: a run on a lab it builds, and the measurements any lab takes
  (a kept lab's experiments too);
- `simulated_runs`: a run on the flow-level simulator, no lab;
- `kept_runs`: the kept lab (--up, its keeper, --lab).

Lower layers run one thing each (runs/: a sweep on an engine; report/:
tables, CSV and figures from its record); only this package strings them
together.
"""
