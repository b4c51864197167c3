"""What the tests and the benchmarks share: small fabrics written as a user
writes them, run_topology.py run as a child process the way a user runs it,
real labs that must leave the host as they found it, flow generators and
counters for checking where traffic went, failover cases, and what a run's
own figures decide. It sits on the top layer: it may import any package of
the product, and no product package imports it."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = REPO / "topologies"
