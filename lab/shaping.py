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

Pure TCP ACKs (under 128 bytes, the ACK flag alone) leave by a class of
their own that HTB serves first, as RoCE fabrics give ACKs and CNPs a
priority of their own. In one shared queue a ring's ACKs waited behind the
data going the other way, and TCP, clocked by its ACKs, ran a single-path
ring at 1.2x what its links allow; with their own class, at 1.02x. Data,
however small, ends a write with PSH and stays in the data class, so no
message overtakes bytes sent before it on another connection (iperf3's
end-of-test did, and cut its transfers short). UDP (the latency probes,
the generators) shares the data queue too: the probes still see the
queueing the collective causes. The failure probe's UDP flows (to ports
9296-9311) leave by the ACK class: they must show when a path stopped, and
a full data queue's drops would look like a stop. So do BFD's control
packets (UDP to 3784, with routing.bfd_ms): behind a full data queue a
session would time out on a link that works.
"""

from __future__ import annotations

from typing import List

from lab import ecn

ETHERNET_HEADER = 14
ACK_CLASS_BURST = 2000          # bytes: a few dozen ACKs back to back
ACK_CLASS_SHARE = 20            # the ACK class is guaranteed 1/20 of the rate, borrows the rest
SMALL_IP_LENGTH = 128           # IP packets shorter than this are "small"
TCP_ACK_ONLY = 0x10             # TCP flags of a pure ACK: no PSH, SYN, FIN or RST
WINDOW_FRAMES = 4               # a connection's window: at least this many frames,
WINDOW_RTT_S = 0.010            # and the fastest link's rate over this round trip
LONGEST_PATH_LINKS = 6          # server-leaf-agg-core-agg-leaf-server
DATA_CLASS, ACK_CLASS = "1:10", "1:5"    # each holds one pfifo (or netem) queue
FAILPROBE_PORTS = 9296          # UDP to 9296-9311, the failure probe's, leaves by the ACK class
BFD_PORT = 3784                 # BFD control packets (routing.bfd_ms): the ACK class too


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
    and the frame that empties it (HTB charges after sending), plus the ACK
    class's own small bucket."""
    return burst_bytes(rate_mbit, mtu) + frame_bytes(mtu) + ACK_CLASS_BURST


def window_bytes(rate_mbit: float, delay_ms: float, mtu: int) -> int:
    """What a connection may have unacknowledged: enough for `rate_mbit` over a
    round trip of WINDOW_RTT_S plus `delay_ms` on each link of the longest
    path both ways, and never under WINDOW_FRAMES frames. Loss-based TCP
    would otherwise keep every shaped queue full (32 frames of 9000 bytes are
    115 ms at 20 Mbit/s: at the scaled rates, a buffer far deeper in time
    than a real fabric's), and each dependent step of a pipelined collective
    would wait behind it."""
    rtt = WINDOW_RTT_S + 2 * LONGEST_PATH_LINKS * delay_ms / 1000
    return max(WINDOW_FRAMES * frame_bytes(mtu), int(rate_mbit * 1e6 / 8 * rtt))


def connection_windows(links, mtu: int) -> tuple:
    """(to a peer across the network, to a peer in the same server): the
    fastest NIC's window, and the fastest NVLink or PCIe link's (the NIC's
    when the servers have one GPU)."""
    delay = max(l.spec.delay_ms for l in links)
    nic = max(l.spec.rate_mbit for l in links if l.kind == "server_leaf")
    inside = [l.spec.rate_mbit for l in links if l.kind in ("intra_node", "pcie")]
    return (window_bytes(nic, delay, mtu),
            window_bytes(max(inside, default=nic), delay, mtu))


def queue_commands(intf: str, spec, drop: bool = False, ecn_frame: int = 0) -> List[str]:
    """The queues of an interface's two classes: a pfifo of the link's
    length each (netem, with the same delay and loss, when the link asks for
    delay or loss; the data class a RED queue marking ECN, `ecn_frame` its
    frame's bytes, where the lab marks: lab/ecn.py); `drop`: queues of no
    frames, so that every frame is lost while the carrier stays up (a silent
    failure, --fail ...:silent)."""
    cmds = []
    for cls in (DATA_CLASS, ACK_CLASS):
        handle = cls.split(":")[1] + ":"
        if drop:             # no handle: a netem queue cannot become a pfifo in place
            cmds.append(f"qdisc replace dev {intf} parent {cls} pfifo limit 0")
        elif spec.needs_netem:
            cmds.append(f"qdisc replace dev {intf} parent {cls} handle {handle} netem "
                        f"limit {spec.queue_packets} delay {spec.delay_ms:g}ms "
                        f"loss {spec.loss_percent:g}%")
        elif ecn_frame and cls == DATA_CLASS:
            cmds.append(ecn.red_queue(intf, cls, handle, spec, ecn_frame))
        else:
            cmds.append(f"qdisc replace dev {intf} parent {cls} handle {handle} pfifo "
                        f"limit {spec.queue_packets}")
    return cmds


def tc_commands(intf: str, spec, mtu: int, marks: bool = False) -> List[str]:
    """tc commands (without the leading 'tc') that shape one interface's
    egress: an HTB class for the link's rate, split into a data class (1:10,
    the default) and a first-served class for small TCP packets (1:5), each
    with a pfifo queue of the link's length (netem instead, with the same
    delay and loss for both, when the link asks for delay or loss; `marks`:
    the data class's queue marks ECN, lab/ecn.py)."""
    mbit = spec.rate_mbit
    frame, burst = frame_bytes(mtu), burst_bytes(mbit, mtu)
    ack_mbit = mbit / ACK_CLASS_SHARE
    cmds = [f"qdisc replace dev {intf} root handle 1: htb default 10",
            f"class add dev {intf} parent 1: classid 1:1 htb rate {mbit:g}mbit ceil {mbit:g}mbit "
            f"burst {burst}b cburst {burst}b quantum {frame}",
            f"class add dev {intf} parent 1:1 classid 1:10 htb rate {mbit - ack_mbit:g}mbit "
            f"ceil {mbit:g}mbit burst {burst}b cburst {burst}b quantum {frame} prio 1",
            f"class add dev {intf} parent 1:1 classid 1:5 htb rate {ack_mbit:g}mbit "
            f"ceil {mbit:g}mbit burst {ACK_CLASS_BURST}b cburst {ACK_CLASS_BURST}b "
            f"quantum {frame} prio 0"]
    cmds += queue_commands(intf, spec, ecn_frame=frame if marks else 0)
    # the failure probe's flows (traffic/measure/failures.py) watch the path,
    # not the queue: a full data queue's drops would read as a failure
    cmds.append(f"filter add dev {intf} parent 1: protocol ip prio 2 u32 "
                f"match u8 0x45 0xff at 0 match ip protocol 17 0xff "
                f"match u16 0x{FAILPROBE_PORTS:04x} 0xfff0 at 22 flowid {ACK_CLASS}")
    cmds.append(f"filter add dev {intf} parent 1: protocol ip prio 3 u32 "
                f"match u8 0x45 0xff at 0 match ip protocol 17 0xff "
                f"match u16 0x{BFD_PORT:04x} 0xffff at 22 flowid {ACK_CLASS}")
    # IPv4 without options (0x45), TCP, shorter than SMALL_IP_LENGTH, flags ACK alone
    cmds.append(f"filter add dev {intf} parent 1: protocol ip prio 1 u32 "
                f"match u8 0x45 0xff at 0 match ip protocol 6 0xff "
                f"match u16 0x0000 0x{0x10000 - SMALL_IP_LENGTH:04x} at 2 "
                f"match u8 0x{TCP_ACK_ONLY:02x} 0xff at {20 + 13} flowid {ACK_CLASS}")
    return cmds


def link_commands(intf: str, spec, up: bool, silent: bool = False,
                  ecn_frame: int = 0) -> List[str]:
    """Shell commands that take one end of a link down or up: its carrier
    (`ip link`), or, `silent`, its queues (tc), the carrier left up (and
    back as they were: `ecn_frame` where the queue marks ECN)."""
    if silent:
        return ["tc " + c for c in queue_commands(intf, spec, drop=not up, ecn_frame=ecn_frame)]
    return [f"ip link set dev {intf} {'up' if up else 'down'}"]
