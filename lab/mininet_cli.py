"""The Mininet CLI on a running lab, with Mininet's own commands working.

Stock Mininet assumes OpenFlow 1.0 switches and an iperf2 whose server prints
a line per connection; this lab's switches speak OpenFlow 1.3 and 1.5
(FabricSwitch.dpctl in lab/mininet_build.py asks for the right version) and
iperf 2.1 prints nothing for Mininet's telnet probe, so Mininet's `iperf`
waits for ever. The CLI opened here runs `iperf` and `iperfudp` with iperf3
instead (a one-shot server it starts and stops itself, never `killall`), and
keeps `dpctl`, `link`, `pingall` and the rest as Mininet has them.
"""

from __future__ import annotations

import json
import signal
import subprocess

from mininet.cli import CLI
from mininet.log import error, output

from lab.host import LabError
from lab.processes import CheckError, stop_process
from lab.reachability import wait_listening

IPERF_PORT = 5099          # apart from the engines' and the iperf check's ports
IPERF_SECONDS = 5          # Mininet's default


class FabricCLI(CLI):
    """Mininet's CLI with `iperf` and `iperfudp` measured by iperf3."""

    prompt = "mininet> "

    def __init__(self, lab, **kwargs):
        self.lab = lab
        super().__init__(lab.net, **kwargs)

    def do_link(self, line):
        """Bring a link up or down, and wait until the controller has moved
        traffic accordingly (Mininet returns at once, before it has).
        Usage: link end1 end2 [up/down]"""
        super().do_link(line)
        args = line.split()
        if len(args) != 3 or args[2] not in ("up", "down") or not self.lab.controlled:
            return
        switches = {s.name for s in self.lab.fabric.switches}
        ports = {f"{node}:{port}" for l in self.lab.fabric.links if {l.a, l.b} == set(args[:2])
                 for node, port in ((l.a, l.a_port), (l.b, l.b_port)) if node in switches}
        down = args[2] == "down"
        try:
            self.lab.wait_programmed(timeout=30, until=lambda st: (
                ports <= set(st.get("down_ports", ())) if down
                else not ports & set(st.get("down_ports", ()))))
        except LabError as exc:
            error(f"*** the controller did not follow: {exc}\n")

    def do_iperf(self, line):
        """Measure TCP bandwidth between two hosts (default: first and last).
        Usage: iperf [host1 host2]"""
        hosts = self._two_hosts(line.split(), "iperf [host1 host2]")
        if hosts:
            self._measure(hosts, udp_bw=None)

    def do_iperfudp(self, line):
        """Measure UDP bandwidth at a rate between two hosts.
        Usage: iperfudp bw [host1 host2]   (bw such as 10M)"""
        args = line.split()
        if not args:
            error("usage: iperfudp bw [host1 host2]\n")
            return
        hosts = self._two_hosts(args[1:], "iperfudp bw [host1 host2]")
        if hosts:
            self._measure(hosts, udp_bw=args[0])

    def _two_hosts(self, names, usage):
        if not names:
            return [self.mn.hosts[0].name, self.mn.hosts[-1].name]
        if len(names) != 2:
            error(f"usage: {usage}\n")
            return None
        missing = [n for n in names if n not in self.mn.nameToNode]
        if missing:
            error(f"no such host: {missing[0]}\n")
            return None
        return names

    def _measure(self, hosts, udp_bw):
        client, server = hosts
        kind = "UDP" if udp_bw else "TCP"
        output(f"*** Iperf: testing {kind} bandwidth between {client} and {server} \n")
        try:
            rates = iperf_pair(self.lab, client, server, udp_bw)
        except CheckError as exc:
            error(f"*** iperf failed: {exc}\n")
            return
        output(f"*** Results: {rates} (what {server} received: the sender's own "
               "count would include what its socket still held)\n")


def iperf_pair(lab, client: str, server: str, udp_bw=None,
               seconds: int = IPERF_SECONDS) -> list:
    """What `server` received from `client`, as Mininet prints a rate,
    measured with iperf3: a one-shot server this function starts and stops."""
    args = ["-p", str(IPERF_PORT)]
    proc = lab.popen(server, ["iperf3", "-s", "-1", *args],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # iperf3 takes its control connection over TCP, for UDP tests too
        wait_listening(lab, server, IPERF_PORT, proc)
        extra = ["-u", "-b", udp_bw] if udp_bw else []
        ip = lab.net.get(server).IP()
        out = lab.net.get(client).cmd(" ".join(
            ["iperf3", "-c", ip, *args, "-t", str(seconds), "-J", *extra]))
    finally:
        stop_process(proc, grace=2, ask=False)
    return _rates(out)


def _rates(text: str) -> list:
    try:
        end = json.loads(text[text.index("{"):])["end"]
        got = end.get("sum_received") or end["sum"]
    except (ValueError, KeyError) as exc:
        raise CheckError(f"unreadable iperf3 output ({exc.__class__.__name__}): "
                         f"{text.strip()[:120]}") from None
    return [_mbits(got["bits_per_second"])]


def _mbits(bps: float) -> str:
    return f"{bps / 1e6:.1f} Mbits/sec"


def open_cli(lab, stdin=None) -> None:
    """The Mininet prompt on the lab until `exit`, Ctrl-D or end of input.
    Inside it, Ctrl-C interrupts the running command, as in Mininet."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        FabricCLI(lab, stdin=stdin) if stdin is not None else FabricCLI(lab)
    finally:
        signal.signal(signal.SIGINT, previous)
