"""The ECMP controller, as a thin os-ken shim over three pure parts.

- routes: path computation. The forwarding plan of every switch, as plain
  data, from the fabric and the set of ports that are down.
- ofmsg: message building. The OpenFlow messages that turn what a switch holds
  into its plan, built and never sent.
- core: the state manager. Which switches are connected, which ports are
  down, what each switch holds and which barrier it owes; switch events in,
  (switch, message) pairs out, and the status the lab reads.
- app: the os-ken shim, the one place that sends. It turns os-ken events into
  calls of the core, sends what comes back, and writes the status file (status).

Everything but app runs and is tested without a switch or privileges; the
controller imports nothing of the lab.
"""
