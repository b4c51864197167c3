"""Latency probes: small timestamped UDP packets between two servers.

    python -m programs.probe echo --port 9000                 # in the far server
    python -m programs.probe ping --dst IP --port 9000        # in the near one

The pinger sends a probe every `--interval` seconds and prints one JSON line
per probe: {"t": send time, "rtt": seconds} or {"t": ..., "lost": true} after
`--timeout`. Probes share the fabric's queues with the collective, so their
round-trip time under load shows the queueing the collective causes. Times
are CLOCK_MONOTONIC, as the rank agents'.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time

PROBE = struct.Struct("!Qd")          # sequence number, send time


def echo(port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    print(json.dumps({"listening": port}), flush=True)
    while True:
        data, addr = s.recvfrom(2048)
        s.sendto(data, addr)


def ping(dst: str, port: int, interval: float, timeout: float, size: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((dst, port))
    pad = b"\0" * max(0, size - PROBE.size)
    sent = {}                               # seq -> send time
    seq, next_send = 0, time.monotonic()
    while True:
        now = time.monotonic()
        if now >= next_send:
            sent[seq] = now
            try:
                s.send(PROBE.pack(seq, now) + pad)
            except OSError:
                pass
            seq += 1
            next_send += interval
        for old in [k for k, t in sent.items() if now - t > timeout]:
            print(json.dumps({"t": sent.pop(old), "lost": True}), flush=True)
        ready, _, _ = select.select([s], [], [], max(0.0, next_send - time.monotonic()))
        if ready:
            try:
                data = s.recv(2048)
            except OSError:             # an ICMP error for an earlier probe
                continue
            k, t_sent = PROBE.unpack_from(data)
            if sent.pop(k, None) is not None:
                print(json.dumps({"t": t_sent, "rtt": time.monotonic() - t_sent}), flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m programs.probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--port", type=int, default=9000)
    g = sub.add_parser("ping")
    g.add_argument("--dst", required=True)
    g.add_argument("--port", type=int, default=9000)
    g.add_argument("--interval", type=float, default=0.01)
    g.add_argument("--timeout", type=float, default=1.0)
    g.add_argument("--size", type=int, default=64, help="UDP payload bytes")
    a = p.parse_args(argv)
    try:
        if a.cmd == "echo":
            echo(a.port)
        else:
            ping(a.dst, a.port, a.interval, a.timeout, a.size)
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
