"""The running lab: a fabric built for real on this host.

Everything here needs root and Open vSwitch: the life cycle of a lab (start,
readiness, teardown; lifecycle.py), the controller it is handed
(controller_process.py), the Mininet build (topology, switch class, link
shaping), the host operations (preflight, the record of what a lab owns, the
clean-up after a lab that died), and the checks made on a live lab (all-pairs
reachability). What runs and a keeper may use of a lab is protocol.py.
Cluster mode, one fabric over several machines, is lab/cluster/; a lab kept
up between commands, lab/kept/. The fabric itself comes from `topologies`,
as plain data.
"""

from toolkit.handover import hand_over_module

hand_over_module(__name__)  # `python -m lab...` outside .venv runs in .venv
