"""What a collective is, as plain data and pure functions, before any network:

- registry.py: the names a user can ask for (collectives, their algorithms,
  the engines that replay them, the data types and reduction ops);
- schedules.py: each collective and algorithm as a schedule: who sends which
  part of the buffer to whom, and what the receiver does with it;
- datatypes.py: nccl-tests' data types and reductions, bit-exact;
- executor.py: one rank's schedule run on real buffers, every element checked;
- metrics.py: algbw and busbw as nccl-tests defines them, the alpha-beta
  prediction of a schedule, percentiles and ECMP imbalance.
"""
