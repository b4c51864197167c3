"""What the fabric did while traffic ran, measured from outside the traffic:
link counters and queues, latency probes, cross traffic, and the fidelity
verdict (did the host keep up with the links it emulates)."""
