"""Cluster mode: one fabric spread over several machines. The head's lab
(cluster.py, a Lab whose nodes are on other machines), each machine's part
of it (machine.py, run there over ssh), the VXLAN tunnels for the links
that cross machines (tunnels.py), the run's TLS certificates
(certificates.py) and the preflight that says, one line per machine, which
cannot take part (cluster_preflight.py)."""
