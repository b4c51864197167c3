"""nccl-tests' programs on the lab: all_reduce_perf, all_gather_perf,
reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf and
sendrecv_perf, with nccl-tests' flags and output, run by run_topology.py
(docs/nccl-tests.md)."""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m ncclperf...` outside .venv runs in .venv
