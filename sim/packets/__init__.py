"""A packet-level engine of the project's own, for congestion where it
decides: drops and go-back-N on lossy RoCE, PFC pauses and the victims of
their head-of-line blocking, ECN marking and DCQCN, InfiniBand's credits,
Spectrum-X's per-packet adaptive routing with reordering at the NIC, and
kernel TCP's windows, fast retransmits and timeouts on drop-tail queues.

- presets.py: the six technologies (roce-lossy, roce-pfc, roce-dcqcn,
  infiniband, spectrum-x, tcp), every number with its source;
- wiring.py: the scenarios' fabrics: hosts, switches, links and the
  equal-cost candidates per switch and destination;
- columns.py: the state arrays' columns (the compiled code's only structure);
- kernel.py: the slotted core: pipes, switch queues, admission, ECN, routing;
- linklevel.py: PFC pause and InfiniBand credits, and the wire;
- transports.py: the NICs: round robin over QPs, go-back-N or out-of-order
  placement, DCQCN's notification and reaction points;
- kerneltcp.py: the tcp preset's NICs: Linux's TCP sender with Reno and
  SACK recovery, and a receiver that holds out-of-order packets;
- engine.py: preset + wiring + flows in, a `Run` of counters out;
- scenarios.py: incast, AllToAll and the PFC victim, and their figures;
- summary.py: a run as per-flow throughput, queues, pauses, drops, marks;
- freshness.py: numba's cache dropped when any compiled module changed.

It runs compiled with numba (a requirement of the package) at tens of
millions of packet-hops a second; docs/packets.md has what it models, what it
leaves out, and how it compares with published results.
"""
