#!/usr/bin/env python3
"""Build a GPU-cluster fabric from YAML, replay NCCL collectives across it, measure, tear down.

    sudo python run_topology.py                       # ring AllReduce sweep on the default fabric
    sudo python run_topology.py topologies/leaf-spine-4x4.yaml -c allgather -b 64K -e 4M
    sudo python run_topology.py -c allreduce -a rhd --channels 4 --json > out.json
    sudo python run_topology.py --engine iperf3       # the same transfers as iperf3 flows
    sudo python run_topology.py --calibrate           # what link rates this host can emulate
    python run_topology.py --check topologies/my.yaml # validate only, no root needed
    sudo python run_topology.py --cli                 # then a Mininet prompt
    sudo python run_topology.py --step --bucket 1M    # a training step: compute + buckets
    sudo python run_topology.py --up                  # build the lab and keep it up (scripts/lab up)
    sudo python run_topology.py --lab -b 32K -e 1M    # an experiment on the lab that is up

A run: validate the YAML; start the os-ken ECMP controller; build the Mininet
network of Open vSwitch bridges; shape every link; wait until every switch is
programmed; ping all pairs; replay the collective for each message size
(nccl-tests' -b/-e/-f) with latency probes and link, queue and CPU sampling;
print an nccl-tests table and what the fabric did, with a fidelity verdict;
write everything to the results folder; tear everything down. Ctrl-C or
SIGTERM at any point tears down what was built and nothing else.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_early(signum, _frame):
    """A stop signal before any lab is started (importing, reading the YAML,
    checking): there is nothing to tear down, and no traceback to show."""
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    os.write(2, f"\ninterrupted ({name}): nothing had been built\n".encode())
    os._exit(130)


if __name__ == "__main__":
    # `sudo python run_topology.py` starts the system Python: hand over to .venv
    from toolkit.handover import hand_over_script
    hand_over_script(__file__)
    for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_sig, _interrupted_early)

try:
    from runner import entry
except ImportError as exc:  # pragma: no cover - only without the environment
    sys.exit(f"error: {exc.name} is not installed: run `sudo scripts/lab setup` first")


def main(argv=None) -> int:
    """The command: runner/entry.py's, with this script's --help."""
    return entry.main(argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
