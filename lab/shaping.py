"""How a link is shaped, and what that shaping lets through unpaid.

Pure arithmetic and tc command lines, no system calls: the lab builds links
with `tc_commands`, and the fidelity verdict (traffic/measure/fidelity.py)
reads `unpaid_bytes` to know which message sizes the shaper cannot resolve.

HTB charges a frame after it has left: a class whose bucket is full sends at
once, then owes the frame's time. An idle link therefore passes its bucket
(the burst) plus one more frame without the serialisation a real link would
charge. At the scaled rates a host can emulate, one 9000-byte frame is
milliseconds (3.6 ms at 20 Mbit/s), so a collective whose steps move a few
frames each would read faster than its links; the verdict flags such sizes
instead of quoting them.
"""

from __future__ import annotations

from typing import List

ETHERNET_HEADER = 14


def frame_bytes(mtu: int) -> int:
    """The largest frame HTB sees on a link of this MTU."""
    return mtu + ETHERNET_HEADER


def burst_bytes(rate_mbit: float, mtu: int) -> int:
    """The HTB bucket: ~1 ms at line rate, never below one full frame: small
    enough to keep the rate honest, large enough not to starve on timer
    granularity."""
    return max(frame_bytes(mtu), int(rate_mbit * 1e6 / 8 / 1000))


def unpaid_bytes(rate_mbit: float, mtu: int) -> int:
    """What an idle shaped link passes before charging any time: the bucket,
    and the frame that empties it (HTB charges after sending)."""
    return burst_bytes(rate_mbit, mtu) + frame_bytes(mtu)


def tc_commands(intf: str, spec, mtu: int) -> List[str]:
    """tc commands (without the leading 'tc') that shape one interface's
    egress: HTB for the rate, a pfifo child for the queue (netem instead when
    the link asks for delay or loss)."""
    rate = f"{spec.rate_mbit:g}mbit"
    frame, burst = frame_bytes(mtu), burst_bytes(spec.rate_mbit, mtu)
    cmds = [f"qdisc replace dev {intf} root handle 1: htb default 1",
            f"class add dev {intf} parent 1: classid 1:1 htb rate {rate} ceil {rate} "
            f"burst {burst}b cburst {burst}b quantum {frame}"]
    if spec.needs_netem:
        cmds.append(f"qdisc add dev {intf} parent 1:1 handle 10: netem "
                    f"limit {spec.queue_packets} delay {spec.delay_ms:g}ms "
                    f"loss {spec.loss_percent:g}%")
    else:
        cmds.append(f"qdisc add dev {intf} parent 1:1 handle 10: pfifo limit {spec.queue_packets}")
    return cmds
