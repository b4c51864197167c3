"""The Mininet CLI that `--cli` opens, driven as a user types into it: its own
commands (dpctl, iperf, iperfudp, link, pingall, pingpair, net, sh) work on
this lab's OpenFlow 1.5 switches and iperf3."""

import re

from harness.commands import run

COMMANDS = """\
dpctl dump-flows
dpctl dump-groups
pingall
iperf h1 h4
iperfudp 5M h1 h3
link leaf1 spine1 down
sh ip -br link show leaf1-eth3
pingall
link leaf1 spine1 up
sh ip -br link show leaf1-eth3
pingpair
net
iperf h1 nobody
exit
"""


def test_mininet_cli_commands_work_on_the_lab(tmp_path, clean_host):
    proc = run("--cli", "--no-traffic", "--results", str(tmp_path), input=COMMANDS, timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "version negotiation failed" not in out
    # dpctl speaks the switches' OpenFlow: flows and the ECMP select groups
    assert "cookie=0xfab1ab" in out and "type=select" in out
    # pingall, before, during and after a spine link is down: the fabric reroutes
    assert out.count("*** Results: 0% dropped (12/12 received)") == 2
    assert "*** Results: 0% dropped (2/2 received)" in out          # pingpair
    states = re.findall(r"leaf1-eth3@\S+\s+(\S+)", out)
    assert states == ["DOWN", "UP"], states
    # iperf and iperfudp return, and no link beats its 20 Mbit/s
    rates = [float(x) for x in re.findall(r"\*\*\* Results: \['([\d.]+) Mbits/sec'\]", out)]
    assert len(rates) == 2 and 0 < rates[0] <= 20.0 and 0 < rates[1] <= 5.5, rates
    assert "no such host: nobody" in out
    assert "leaf1-eth3:spine1-eth1" in out                          # net
    assert "teardown" in out and "Traceback" not in out


def test_the_prompt_opens_once_checked_and_no_sweep_runs(tmp_path, clean_host):
    """--cli opens the prompt after the checks, in place of the experiment
    (docs/running.md): nothing of a sweep before it, nor after `exit`."""
    proc = run("--cli", "--results", str(tmp_path), input="exit\n", timeout=240)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "12/12 server pairs reach each other" in out and "teardown" in out
    assert "# Collective test" not in out and "Avg bus bandwidth" not in out
