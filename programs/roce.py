"""The Scapy engine: a collective's transfers as RoCEv2 packets.

RoCEv2 is InfiniBand's transport over UDP/IP: UDP destination port 4791, the
source port carrying per-queue-pair entropy for ECMP, then the Base Transport
Header (opcode, destination QP, packet sequence number) and the payload, closed
by an invariant CRC. Scapy builds exactly that (scapy.contrib.roce); this
engine builds every frame of a rank's sends with it before the clock starts,
then sends them on a raw socket, paced at the server link's rate, as RDMA NICs
pace. It moves no real data and does no retransmission: it is for packet-level
detail (what the fabric does with RoCE-shaped flows, what a capture shows),
not for bulk transfer: Scapy builds about 1,000 frames per second on a
2-core host (each with its invariant CRC).

One process per rank, driven like the rank agents with JSON lines:

    {"cmd": "setup", "transfers": [[step, src, dst, bytes], ...], "channels": C,
     "rate_mbit": R}                              -> {"event": "setup_done", "frames": N}
    {"cmd": "step", "step": k}                    -> {"event": "step_done", "sent", "expected",
                                                       "received", "t0", "t1"}

A transfer of the schedule becomes `channels` queue pairs, each its own UDP
source port; QP numbers encode sender, step and channel so the receiver can
count what arrived for the step. Under the spray policy (`"spray": K` in the
setup) a queue pair's packets take K source ports in turn, as a NIC spraying
over entropy values would, and the receiver counts the packets that arrive
after a later one of the same queue pair (`reordered`).
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass

from programs.jsonlines import serve

ROCE_PORT = 4791
MTU_PAYLOAD = 1024                 # RoCE path MTU
LOSS_IDLE_S = 5.0                  # nothing new for this long: the rest of a step was lost
                                   # (a stalled sender on a slow host is not a loss)
OP_SEND_FIRST, OP_SEND_MIDDLE, OP_SEND_LAST, OP_SEND_ONLY = 0x00, 0x01, 0x02, 0x04
ETH_P_ALL = 0x0003


def qp_number(src: int, step: int, channel: int) -> int:
    return ((src & 0xFF) << 16) | ((step & 0xFFF) << 4) | (channel & 0xF)


def source_port(src: int, dst: int, channel: int) -> int:
    """RoCEv2 puts flow entropy in the UDP source port (0xC000-0xFFFF)."""
    return 0xC000 | (((src * 131 + dst * 31 + channel * 7) * 2654435761) >> 8 & 0x3FFF)


@dataclass(frozen=True)
class QueuePair:
    """One queue pair as its packets carry it: the MAC and IP addresses of its
    two ends, the UDP source port (its ECMP entropy) and the destination QP
    number."""
    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    sport: int
    qpn: int


def build_frames(qp: QueuePair, nbytes, mtu=MTU_PAYLOAD, spray=0):
    """The frames of one RDMA SEND of `nbytes` on `qp`, as bytes; `spray`
    > 0: packet k leaves from source port qp.sport + k mod spray."""
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    count = max(1, -(-nbytes // mtu))
    frames = []
    for psn in range(count):
        size = min(mtu, nbytes - psn * mtu) if nbytes else 0
        if count == 1:
            op = OP_SEND_ONLY
        else:
            op = OP_SEND_FIRST if psn == 0 else OP_SEND_LAST if psn == count - 1 else OP_SEND_MIDDLE
        pkt = (Ether(src=qp.src_mac, dst=qp.dst_mac) /
               IP(src=qp.src_ip, dst=qp.dst_ip, flags="DF") /
               UDP(sport=0xC000 | (qp.sport + psn % spray) & 0x3FFF if spray else qp.sport,
                   dport=ROCE_PORT) /
               BTH(opcode=op, dqpn=qp.qpn, psn=psn & 0xFFFFFF,
                                                       ackreq=int(psn == count - 1)) /
               Raw(b"\0" * size))
        frames.append(bytes(pkt))
    return frames


def parse_qpn(frame: bytes, my_ip: bytes):
    """(destination QP, PSN) of a RoCEv2 frame for `my_ip` (packed IPv4), or None."""
    if (len(frame) < 46 or frame[12:14] != b"\x08\x00" or frame[23] != 17
            or frame[30:34] != my_ip):
        return None
    ihl = (frame[14] & 0x0F) * 4
    udp = 14 + ihl
    if struct.unpack_from("!H", frame, udp + 2)[0] != ROCE_PORT:
        return None
    return (struct.unpack_from("!I", frame, udp + 8 + 4)[0] & 0xFFFFFF,
            struct.unpack_from("!I", frame, udp + 8 + 8)[0] & 0xFFFFFF)


class RoceRank:
    def __init__(self, rank, intf, macs, addresses):
        self.rank, self.intf, self.macs, self.addresses = rank, intf, macs, addresses
        self.my_ip = socket.inet_aton(addresses[rank])
        self.raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.raw.bind((intf, 0))
        self.raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        # a UDP socket on 4791 keeps the kernel from answering with port-unreachables
        self.sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sink.bind(("0.0.0.0", ROCE_PORT))
        self.counts, self.highest, self.reordered = {}, {}, 0
        self.lock = threading.Lock()
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self):
        while True:
            frame, addr = self.raw.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            got = parse_qpn(frame, self.my_ip)
            if got is not None:
                qpn, psn = got
                with self.lock:
                    self.counts[qpn] = self.counts.get(qpn, 0) + 1
                    if psn < self.highest.get(qpn, -1):
                        self.reordered += 1
                    else:
                        self.highest[qpn] = psn

    def setup(self, transfers, channels, rate_mbit, spray=0):
        self.rate_bps = rate_mbit * 1e6
        self.frames, self.expected = {}, {}
        for step, src, dst, nbytes in transfers:
            per = -(-nbytes // channels // 4) * 4     # BTH payloads are whole 4-byte words
            for ch in range(channels):
                share = min(per, nbytes - ch * per)
                if share <= 0:
                    continue
                qpn = qp_number(src, step, ch)
                if src == self.rank:
                    qp = QueuePair(self.macs[src], self.macs[dst], self.addresses[src],
                                   self.addresses[dst], source_port(src, dst, ch), qpn)
                    self.frames.setdefault(step, []).append(build_frames(qp, share, spray=spray))
                if dst == self.rank:
                    self.expected.setdefault(step, {})[qpn] = max(1, -(-share // MTU_PAYLOAD))
        return sum(len(f) for fl in self.frames.values() for f in fl)

    def reset(self):
        """Forget what arrived: a new iteration starts (QP numbers repeat)."""
        with self.lock:
            self.counts.clear()
            self.highest.clear()
            self.reordered = 0

    def step(self, step, timeout=30.0):
        t0 = time.monotonic()
        sent = 0
        # round-robin over the QPs of the step, paced at the link rate
        queues = [list(f) for f in self.frames.get(step, [])]
        budget_t = t0
        while any(queues):
            for q in queues:
                if q:
                    frame = q.pop(0)
                    self.raw.send(frame)
                    sent += 1
                    # A sender the host held up does not burst to catch up (a
                    # NIC's pacer would not, and the burst overflows the
                    # shaped link's queue): the budget restarts from now.
                    budget_t = max(budget_t, time.monotonic()) + len(frame) * 8 / self.rate_bps
                    delay = budget_t - time.monotonic()
                    if delay > 0.001:
                        time.sleep(delay)
        want = self.expected.get(step, {})
        deadline = time.monotonic() + timeout
        idle_since, last_total = time.monotonic(), -1
        while time.monotonic() < deadline:
            with self.lock:
                got = {q: min(self.counts.get(q, 0), n) for q, n in want.items()}
            total = sum(got.values())
            if total == sum(want.values()):
                break
            if total != last_total:
                idle_since, last_total = time.monotonic(), total
            elif time.monotonic() - idle_since > LOSS_IDLE_S:
                break                                  # the rest was lost
            time.sleep(0.001)
        return {"event": "step_done", "sent": sent, "expected": sum(want.values()),
                "received": sum(got.values()) if want else 0, "t0": t0, "t1": time.monotonic(),
                "reordered": self.reordered}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m programs.roce", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--intf", required=True)
    p.add_argument("--addresses", required=True)
    p.add_argument("--macs", required=True)
    a = p.parse_args(argv)

    def reset(rank, _msg):
        rank.reset()
        return {"event": "reset_done"}

    return serve(a.rank, lambda: RoceRank(a.rank, a.intf, a.macs.split(","),
                                          a.addresses.split(",")), {
        "setup": lambda rank, m: {"event": "setup_done", "frames": rank.setup(
            m["transfers"], m["channels"], m["rate_mbit"], m.get("spray", 0))},
        "reset": reset,
        "step": lambda rank, m: rank.step(m["step"]),
    })

if __name__ == "__main__":
    sys.exit(main())
