"""What moves across a live lab, and what it measures there.

- engines/: the replay engines behind one interface (rank agents, iperf3,
  Scapy RoCEv2, and the flow-level simulator for runs with no lab);
- measure/: the link monitor, latency probes, cross traffic, scheduled link
  failures, and the fidelity verdict (did the host keep up with its links).

The programs the engines start inside servers' namespaces are in programs/.
"""
