"""The Mininet CLI on a running lab, with Mininet's own commands working.

Stock Mininet assumes OpenFlow 1.0 switches and the iperf2 binary; this lab's
switches speak OpenFlow 1.3 and 1.5 and the lab ships iperf3. The CLI opened
here makes `dpctl`, `iperf`, `link`, `pingall` and the rest behave as a Mininet
user expects on this fabric.
"""

from __future__ import annotations

import signal

from mininet.cli import CLI


def open_cli(lab, stdin=None) -> None:
    """The Mininet prompt on `lab.net` until `exit`, Ctrl-D or end of input.
    Inside it, Ctrl-C interrupts the running command, as in Mininet."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        CLI(lab.net, stdin=stdin) if stdin is not None else CLI(lab.net)
    finally:
        signal.signal(signal.SIGINT, previous)
