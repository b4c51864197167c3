"""What moves across a fabric, and what it measures.

- registry.py: the names a user can ask for (collectives, algorithms, engines);
- schedules.py: collectives as plain data; executor.py: one rank's schedule on
  real buffers, every element checked; metrics.py: busbw, the alpha-beta model;
- experiment.py: the experiment, validated once; flags.py: run_topology.py's
  command line, checked by the experiment's own validators; sweep.py: a
  message-size sweep on any engine, measured;
- engines/: the replay engines behind one interface;
- programs/: what runs inside a server's network namespace;
- measure/: counters, the link monitor, probes, the fidelity verdict;
- report/: tables, CSV, console lines and figures;
- rate_calibration.py: which link rates this host can emulate.
"""
