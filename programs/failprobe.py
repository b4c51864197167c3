"""Probe flows around a link failure: UDP flows with chosen source ports, a
sequence-numbered packet on each every `interval` seconds; the receiver
records when each arrived.

    python -m programs.failprobe recv --port P --seconds T
    python -m programs.failprobe send --dst IP --port P --sports A:B --interval S --seconds T

The receiver prints one JSON line at the end: {"arrivals": {sport: [[seq, t],
...]}}; the sender {"sent": packets per flow}. Times are CLOCK_MONOTONIC, the
lab's clock. ECMP hashes each flow (its source port) onto a path; the flows
whose path crossed the failed link stop until the datapath or the controller
moves them (traffic/measure/failures.py reads the gaps).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

PACKET = struct.Struct("!I")
PAYLOAD = 64


def send(dst: str, port: int, sports, interval: float, seconds: float) -> dict:
    socks = []
    for sport in sports:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("0.0.0.0", sport))
        socks.append(s)
    pad = b"\0" * (PAYLOAD - PACKET.size)
    start = time.monotonic()
    seq = 0
    while time.monotonic() - start < seconds:
        for s in socks:
            try:
                s.sendto(PACKET.pack(seq) + pad, (dst, port))
            except OSError:          # no route for a moment: the packet is lost
                pass
        seq += 1
        delay = start + seq * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    return {"sent": seq, "start": start}


def receive(port: int, seconds: float) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.2)
    arrivals: dict = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, (_ip, sport) = s.recvfrom(2048)
        except socket.timeout:
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
    a = p.parse_args(argv)
    if a.mode == "send":
        lo, _, hi = a.sports.partition(":")
        out = send(a.dst, a.port, range(int(lo), int(hi or lo) + 1), a.interval, a.seconds)
    else:
        out = receive(a.port, a.seconds)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
