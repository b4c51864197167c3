"""Limits the schema, the kinds of fabric and the checks of a whole fabric
share, of two sorts.

The model's: what a fabric file may describe at all, whatever runs it (the
flow-level simulator, `--engine sim`, takes real hardware at real scale).
The emulation's: what this host can build as a Mininet network, checked
(topologies/sanity.py `check_emulation`) only when a network is to be built.
And what names and addresses allow, which holds for both.
"""

IFNAME_MAX = 15          # Linux IFNAMSIZ - 1
MAX_PER_LEAF = 254       # endpoints homed on one leaf: the last octet of <net>.l.k

# --- the model: what a fabric file may describe ------------------------------------
MAX_ENDPOINTS = 200_000         # servers, or GPUs
MAX_SWITCHES = 100_000
MAX_LINKS = 1_000_000
MAX_RATE_MBIT = 100_000_000     # 100 Tbit/s: NVLink of 900 GB/s is 7,200,000 Mbit/s
MAX_GPUS = 16                   # GPUs per server, but for a rack-scale server.model:
MAX_RACK_GPUS = 72              # an NVL72 rack, one NVLink domain (topologies/hardware.py)

# --- the emulation: what this host can build ----------------------------------------
EMULATED_ENDPOINTS = 512        # beyond this a 2-core host spends minutes building
EMULATED_SWITCHES = 128
EMULATED_LINKS = 2048           # each a veth pair with a qdisc tree per end; the SuperPOD unit has 544
EMULATED_RATE_MBIT = 100_000    # HTB on veth pairs: 100 Gbit/s
EMULATED_QUEUE_BYTES = 2 << 30  # all queues together (each link has one per direction)
EMULATED_GPUS = 16              # GPUs per server: an NVSwitch node with a port per GPU

# --- what this host forwards: a warning, not a refusal --------------------------------
# One ovs-vswitchd thread forwards every frame at every switch it crosses
# (docs/limits.md); the default fabric's `--calibrate` ceiling on this 2-core host was
# 160 Mbit/s a link (docs/benchmarks.md): its 4 servers' links at 160 Mbit/s carry
# 8,875 9014-byte frames a second, each through 2 switches on average between ring
# neighbours (one leaf, or leaf-spine-leaf): 17,750 a second through switches. A
# fabric whose GPUs at their fastest links' rates would put more frames through its
# switches than about this is past what the host can emulate (topologies/sanity.py
# `host_ceiling`, `emulation_warning`).
HOST_SWITCH_FRAMES_PER_S = 18_000
# The estimate is good to about a factor of two either way, so it warns only past
# twice itself. Measured on this host (a run at the fabric's own rate, one AllReduce
# sweep; docs/limits.md has the table): leaf-spine-4x4 (estimate 14 Mbit/s) ran
# trustworthy at its 25, single-switch (27) at its 10, rail-optimized (2.7, its
# NVLink frames counted) kept its rates at its 4; leaf-spine-4x8 (4.5) fell 1.44x
# behind the simulator at its 10, multi-gpu (4.6, NVLink at 100 Mbit/s counted; out
# of its servers alone it was 160) UNTRUSTWORTHY at its 10 (2026-12-05). fat-tree-k4
# (5.4) was HOST-BOUND at its 5 (1.35x the simulator, ovs-vswitchd at 59% of its
# core) and trustworthy at 2.5: a shortfall frames do not explain, which this
# estimate does not warn of.
HOST_ESTIMATE_SLACK = 2
