"""The flow-level simulator: the same schedules on the same fabric graph and
routes the controller computes, with no network built and no root needed.

- network.py: where a flow goes (the controller's plan, ECMP hashed per
  switch and flow with a seed) and the directed links it crosses;
- fairness.py: max-min fair rates of the flows sharing links (progressive
  filling);
- replay.py: a schedule replayed as connections moving pieces, each released
  when its dependencies are met, event by event;
- steps.py: the shortcut, step by step, for rank counts the replay cannot reach;
- phases.py, clos.py: hierarchical AllReduce phase by phase, on a Clos given
  by its shape alone (the planner's scale);
- closed_form.py: ring and hierarchical AllReduce priced in closed form
  (alpha-beta, the hierarchical pipelined as NCCL runs it) from a cluster's
  shape alone: what the planner prices with;
- training_step.py: a training step's closed forms: compute, gradient buckets
  and the collectives that average them, overlapped or not;
- parallel/: training with tensor, pipeline, data, context and expert
  parallelism: a model by its shape, a layout, its memory, its step priced
  with NCCL's collectives, the layout search, and published runs as the
  check;
- packets/: a packet-level engine of its own (slotted, compiled with numba)
  for what congestion does where it decides: drops and go-back-N, PFC and
  its victims, ECN and DCQCN, InfiniBand credits, adaptive routing;
- simulator.py: all of it as one object, `Simulator`: ranks on a network
  (a fabric file's or a Clos's), its seed and hop latency, how each
  collective is simulated (event by event or a shortcut), and what a caller
  hands it (NCCL's time, a schedule already built). Everything outside sim/
  that simulates calls it.

The engine that runs it in a sweep is traffic/engines/sim.py; the sweep
itself is runs/simulated.py.
"""
