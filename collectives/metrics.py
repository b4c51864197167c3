"""The numbers a training-infrastructure engineer reads, as pure functions.

Bandwidths follow nccl-tests (its doc/PERFORMANCE.md): ``algbw = size / time``
with `size` the "size" column (the whole buffer: count x type size, or for
AllGather, ReduceScatter and AllToAll the n blocks together), and
``busbw = algbw x factor(n)``, the factor making busbw comparable to the link
bandwidth whatever the collective.

`beta` (beta_for_rate) is seconds per payload byte on a server's link: the
shaped rate, less the TCP/IP/Ethernet headers every full segment carries. The
alpha-beta prediction that uses it is the simulator's (sim/alphabeta.py).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Dict, Iterable, List, Sequence

from collectives import schedules

TYPE_SIZE = 4                      # sizes are counted in float32 elements; a type's own
                                   # count is size / its itemsize (nccl_columns)


def nccl_columns(exp, n: int, count: int) -> dict:
    """nccl-tests' count, type, redop and root columns for a size of `count`
    float32-sized elements: count in the type's elements, per rank where the
    buffer is n blocks."""
    from collectives.datatypes import datatype
    from collectives.registry import EQUAL_BLOCKS, REDUCING, ROOTED
    dt = datatype(exp.datatype)
    elements = count * TYPE_SIZE // dt.size
    return {"count": elements // n if exp.collective in EQUAL_BLOCKS else elements,
            "type": dt.name, "redop": exp.op if exp.collective in REDUCING else "none",
            "root": exp.root if exp.collective in ROOTED else -1}
ETHERNET_HEADER, IP_TCP_HEADERS = 14, 52   # TCP with timestamps


# nccl-tests: busbw = algbw x factor(n)
BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def bus_factor(collective: str, n: int) -> float:
    return BUS_FACTOR[collective](n)


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    """GB/s as nccl-tests prints it (1e9 bytes per second)."""
    return size_bytes / seconds / 1e9 if seconds > 0 else 0.0


def busbw_gbps(collective: str, n: int, size_bytes: int, seconds: float) -> float:
    return algbw_gbps(size_bytes, seconds) * bus_factor(collective, n)


def payload_share(mtu: int) -> float:
    """The share of a link's bytes that is TCP payload, in full segments."""
    return (mtu - IP_TCP_HEADERS) / (mtu + ETHERNET_HEADER)


def beta_for_rate(rate_mbit: float, mtu: int = 1500) -> float:
    """Seconds per payload byte on a link shaped to `rate_mbit`."""
    return 1 / payload_share(mtu) / (rate_mbit * 1e6 / 8)


def traffic_split(sched: schedules.Schedule, server_of: Callable[[int], object]) -> Dict[str, int]:
    """Bytes the schedule sends between ranks of the same server (intra-node,
    over NVLink-class links) and between servers (inter-node, over the network)."""
    out = {"intra": 0, "inter": 0}
    for rank, ops in sched.items():
        for op in ops:
            if op.kind == "send":
                key = "intra" if server_of(op.peer) == server_of(rank) else "inter"
                out[key] += op.length * TYPE_SIZE
    return out


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100): the k-th smallest value, k =
    ceil(p/100 x count) at least 1, with p taken as the decimal it is written
    as (99.9 of 1,000 values is the 999th: in binary floating point
    99.9 / 100 x 1000 is 999.0000000000001); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = max(1, math.ceil(Fraction(str(float(p))) * len(ordered) / 100))
    return ordered[k - 1]


def latency_summary(rtts_s: Iterable[float]) -> Dict[str, float]:
    rtts = list(rtts_s)
    return {"samples": len(rtts),
            "p50_us": percentile(rtts, 50) * 1e6 if rtts else math.nan,
            "p99_us": percentile(rtts, 99) * 1e6 if rtts else math.nan,
            "max_us": max(rtts) * 1e6 if rtts else math.nan}


def imbalance(values: Sequence[float]) -> float:
    """max/mean of a leaf's uplink bytes: 1.0 is a perfect spread."""
    mean = sum(values) / len(values) if values else 0
    return max(values) / mean if mean else 0.0


def sweep_sizes(minbytes: int, maxbytes: int, stepfactor: float) -> List[int]:
    """nccl-tests' -b/-e/-f: sizes from min to max, multiplied by the factor."""
    if (minbytes < TYPE_SIZE or maxbytes < minbytes or not math.isfinite(stepfactor)
            or stepfactor <= 1 and maxbytes > minbytes):
        raise ValueError("expected 4 <= minbytes <= maxbytes and a step factor above 1")
    sizes, size = [], minbytes
    while size <= maxbytes:
        sizes.append(int(size))
        if stepfactor <= 1:
            break
        size *= stepfactor
    return sizes


UP_TIERS = ("leaf_spine", "spine_core")   # link kinds whose lower end picks among equal paths
IDLE_SHARE = 0.05                         # an up-link under this share of its switch's mean


def tier_report(fabric, links: dict) -> dict:
    """ECMP's spread per switch and tier: for each switch that sends up to
    a choice of next hops (leaves to spines or aggregation switches,
    aggregation switches to cores), max/mean of the bytes on its up-links
    (`links`: interface -> {"tx_bytes"}), and per tier the worst switch, the
    mean, and the up-links left idle (under IDLE_SHARE of their switch's
    mean). Idle links in an upper tier while the lower one spreads are hash
    polarisation: the tiers hash a flow alike."""
    role = {s.name: s.role for s in fabric.switches}
    ports: dict = {}
    for l in fabric.links:
        if l.kind in UP_TIERS and l.a in role and l.b in role:
            tier = f"{role[l.a]}->{role[l.b]}"
            ports.setdefault(tier, {}).setdefault(l.a, []).append(
                links.get(l.a_intf, {}).get("tx_bytes", 0))
    out = {}
    for tier, switches in ports.items():
        spread = {sw: imbalance(v) for sw, v in switches.items() if sum(v) > 0 and len(v) > 1}
        idle = sum(1 for v in switches.values() if sum(v) > 0
                   for x in v if x < IDLE_SHARE * sum(v) / len(v))
        busy = sum(len(v) for v in switches.values() if sum(v) > 0)
        worst = max(spread, key=spread.get, default=None)
        out[tier] = {"switches": {sw: round(x, 3) for sw, x in spread.items()},
                     "worst": worst and [worst, round(spread[worst], 3)],
                     "mean": round(sum(spread.values()) / len(spread), 3) if spread else None,
                     "idle_uplinks": idle, "uplinks": busy}
    return out
