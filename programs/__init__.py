"""Programs that run inside a server's network namespace, one process each:
the rank agent (real data over TCP), the Scapy RoCEv2 sender, the latency
probe, flow generators with chosen ports, and the JSON-lines loop they share.
They import nothing of the lab: the lab starts them with `python -m`."""
