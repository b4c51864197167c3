"""Probe flows around a link failure: UDP flows with chosen source ports, a
sequence-numbered packet on each every `interval` seconds; the receiver
records when each arrived.

    python -m programs.failprobe recv --port P --seconds T [--until-eof]
    python -m programs.failprobe send --dst IP --port P --sports A:B --interval S --seconds T

The receiver prints {"ready": true} once it listens, and one JSON line at
the end (after T seconds or, with --until-eof, once its stdin closes and the
socket has been quiet for a moment, whichever comes first: the lab closes it
when the sender is done, so a sender the host started late still has every
packet counted): {"arrivals": {sport: [[seq, t], ...]}}; the sender {"sent": seqs
per flow, "start": t, "stagger": s, "skipped": [[first seq, count], ...]}.
Seq k of the i-th flow is due at start + k x interval + i x stagger. A
sender the host kept from running past a whole tick skips the ticks it
missed (listed in "skipped") instead of sending them in a burst, which the
small first-served queue the probe leaves by (lab/shaping.py) would drop,
and which would sit at the wrong place in time. Packets are small (50-byte
frames) so that the probe stays within that queue's guaranteed rate
(traffic/measure/failures.py picks the interval). Times are
CLOCK_MONOTONIC, the lab's clock. ECMP hashes each flow (its source port)
onto a path; the flows whose path crossed the failed link stop until the
datapath or the controller moves them (traffic/measure/failures.py reads
the gaps).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import threading
import time
from typing import Optional

PACKET = struct.Struct("!I")
PAYLOAD = 8                  # the seq and padding: a 50-byte frame
QUIET_S = 0.2                # told to stop, the receiver ends after this long without a packet


def send(dst: str, port: int, sports, interval: float, seconds: float) -> dict:
    """Seq k of flow i leaves at start + k x interval + i x interval / flows:
    the flows take turns, so that together they sample the path every
    interval / flows (a stop shorter than an interval still costs some flow
    a packet) and never queue a burst."""
    socks = []
    for sport in sports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", sport))
        socks.append(s)
    pad = b"\0" * (PAYLOAD - PACKET.size)
    stagger = interval / len(socks)
    skipped = []
    start = time.monotonic()
    seq = 0
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) / interval)   # the tick it is now
        if due > seq:                # late past a whole tick: skip, don't burst
            skipped.append([seq, due - seq])
            seq = due
        for i, s in enumerate(socks):
            delay = start + seq * interval + i * stagger - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                s.sendto(PACKET.pack(seq) + pad, (dst, port))
            except OSError:          # no route for a moment: the packet is lost
                pass
        seq += 1
        delay = start + seq * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return {"sent": seq, "start": start, "stagger": stagger, "skipped": skipped}


def receive(port: int, seconds: float, stop: Optional[threading.Event] = None) -> dict:
    """Every packet's seq and arrival per flow, for `seconds` or until `stop`
    is set and then no packet came for QUIET_S (the last ones are in)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(QUIET_S)
    print(json.dumps({"ready": True}), flush=True)    # the sender may start
    arrivals: dict = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, (_ip, sport) = s.recvfrom(2048)
        except socket.timeout:
            if stop is not None and stop.is_set():
                break
            continue
        now = time.monotonic()
        if len(data) >= PACKET.size:
            arrivals.setdefault(str(sport), []).append([PACKET.unpack_from(data)[0], now])
    return {"arrivals": arrivals}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m programs.failprobe")
    p.add_argument("mode", choices=("send", "recv"))
    p.add_argument("--dst")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sports", default="42000:42007")
    p.add_argument("--interval", type=float, default=0.002)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--until-eof", action="store_true",
                   help="recv: stop once stdin closes (and the socket is quiet), at most --seconds")
    a = p.parse_args(argv)
    if a.mode == "send":
        lo, _, hi = a.sports.partition(":")
        out = send(a.dst, a.port, range(int(lo), int(hi or lo) + 1), a.interval, a.seconds)
    else:
        stop = threading.Event()
        if a.until_eof:
            threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
        out = receive(a.port, a.seconds, stop)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
