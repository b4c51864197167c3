"""The packet engine's front: a preset, a wiring and a list of flows in; the
state arrays laid out (columns.py), the compiled slots run (kernel.py), and
the counters handed back as a `Run`.

Units: the slot is one MTU frame's wire time at the line rate, in integer
picoseconds (4096 B + 82 B of RoCE/Ethernet overhead at 400 Gbit/s: 83,560
ps); delays, timers and sizes are rounded to slots and whole packets once,
here, so the compiled core is all integers but for DCQCN's rates.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from sim.packets import kernel
from sim.packets import columns as lo
from sim.packets.presets import ADAPTIVE, CREDITS, DMODK, KERNEL_TCP, LOSSY, PFC, Preset
from sim.packets.wiring import Wiring

FOREVER = 1 << 40       # a flow's size when it sends for the whole run


@dataclass
class Run:
    """What a run counted. Per-flow and per-link arrays are the engine's own
    matrices (columns in columns.py), in the order the flows were given."""
    preset: Preset
    wiring: Wiring
    flows: np.ndarray
    links: np.ndarray
    totals: np.ndarray
    slot_ps: int
    slots: int
    payload_bytes: int
    wire_bytes: int
    wall_s: float
    in_network: int
    rates: Optional[np.ndarray] = None     # per-flow floats (DCQCN's rates, TCP's RTTs)
    feedback_slots: int = 0                # the fixed delay of NAKs, CNPs and TCP ACKs

    @property
    def seconds(self) -> float:
        return self.slots * self.slot_ps * 1e-12


def slot_ps(p: Preset) -> int:
    wire = p.value("mtu_bytes") + p.value("header_bytes")
    return int(round(wire * 8 / p.value("link_gbps") * 1000))


def to_slots(ns: float, slot: int) -> int:
    return int(math.ceil(ns * 1000 / slot))


def link_delays(p: Preset, w: Wiring, slot: int) -> np.ndarray:
    """Serialisation (one slot) + cable + the sending switch's latency. The
    latter two are rounded up to whole slots, but to the nearest under
    kernel TCP, whose slow links' slots (242 us at 50 Mbit/s) would
    otherwise add a slot of nanoseconds' propagation to every hop."""
    out = np.zeros(len(w.links), dtype=np.int64)
    for i, (src, _) in enumerate(w.links):
        cable = p.value("fabric_cable_m" if w.fabric_link[i] else "host_cable_m")
        ns = cable * p.value("ns_per_m") + (p.value("switch_latency_ns")
                                            if src >= w.n_hosts else 0.0)
        out[i] = 1 + (round(ns * 1000 / slot) if p.transport == KERNEL_TCP
                      else to_slots(ns, slot))
    return out


def parameters(p: Preset, slot: int, feedback_slots: int) -> np.ndarray:
    if p.reorder_at_nic and p.flow_control == LOSSY:
        # the out-of-order receiver counts packets and keeps no bitmap: it
        # could not tell a resent packet from a new one
        raise ValueError(f"preset {p.name}: out-of-order placement at the NIC is modelled"
                         f" on lossless fabrics only, not with {LOSSY}")
    P = np.zeros(lo.P_COLUMNS, dtype=np.float64)
    P[lo.P_FC] = {LOSSY: lo.FC_LOSSY, PFC: lo.FC_PFC, CREDITS: lo.FC_CREDITS}[p.flow_control]
    P[lo.P_ROUTE] = {DMODK: lo.RT_DMODK, ADAPTIVE: lo.RT_ADAPTIVE}.get(p.routing, lo.RT_ECMP)
    P[lo.P_ECN], P[lo.P_DCQCN], P[lo.P_OOO] = p.ecn, p.dcqcn, p.reorder_at_nic
    P[lo.P_CTRL] = feedback_slots
    if p.transport == KERNEL_TCP:
        return tcp_parameters(p, slot, P)
    us = 1e6 / slot
    get = p.params.get
    if p.flow_control != CREDITS:
        wire = p.value("mtu_bytes") + p.value("header_bytes")
        P[lo.P_LOSSY_ALPHA] = p.value("lossy_dt_alpha")
        P[lo.P_PFC_ALPHA] = p.value("pfc_dt_alpha")
        P[lo.P_HYST] = p.value("pfc_hysteresis_pkts")
        P[lo.P_RTO] = p.value("rto_us") * us
        P[lo.P_NAKINT] = p.value("nak_interval_us") * us
    if p.ecn:
        P[lo.P_KMIN] = get("ecn_kmin_bytes").value / wire
        P[lo.P_KMAX] = get("ecn_kmax_bytes").value / wire
        P[lo.P_PMAX] = p.value("ecn_pmax")
    if p.dcqcn:
        line = p.value("link_gbps") * 1e3
        P[lo.P_G] = p.value("g")
        P[lo.P_RAI] = p.value("rate_ai_mbps") / line
        P[lo.P_RHAI] = p.value("rate_hai_mbps") / line
        P[lo.P_MINRATE] = p.value("min_rate_mbps") / line
        P[lo.P_TRATE] = p.value("rate_timer_us") * us
        P[lo.P_TALPHA] = p.value("alpha_timer_us") * us
        P[lo.P_BC] = p.value("byte_counter_bytes") / p.value("mtu_bytes")
        P[lo.P_F] = p.value("fast_recovery_steps")
        P[lo.P_CNPINT] = p.value("cnp_interval_us") * us
        P[lo.P_CLAMP] = p.value("clamp_target_rate")
    return P


def tcp_parameters(p: Preset, slot: int, P: np.ndarray) -> np.ndarray:
    """Kernel TCP's numbers; its times in slots of this preset's link rate."""
    if p.flow_control != LOSSY or p.ecn or p.dcqcn or p.reorder_at_nic:
        raise ValueError(f"preset {p.name}: kernel TCP is modelled on drop-tail switches"
                         " without ECN, DCQCN or placement at the NIC")
    ms = 1e9 / slot
    P[lo.P_TCP] = 1
    P[lo.P_LOSSY_ALPHA] = p.value("lossy_dt_alpha")
    P[lo.P_QLIMIT] = p.value("queue_limit_pkts")
    P[lo.P_DUPTHRESH] = p.value("dupthresh_pkts")
    P[lo.P_RTOMIN] = math.ceil(p.value("rto_min_ms") * ms)
    P[lo.P_RTOMAX] = math.ceil(p.value("rto_max_ms") * ms)
    P[lo.P_RTOLINUX] = p.value("rto_linux")
    return P


def ack_slots(p: Preset, w: Wiring, slot: int) -> int:
    """A TCP ACK's way back: per hop its propagation and its own wire time
    (a frame of headers only), the latency of every switch it crosses, and
    the receiver's turn-around; to the nearest slot, at least one."""
    hops = 4 if any(w.fabric_link) else 2
    cable = p.value("fabric_cable_m" if any(w.fabric_link) else "host_cable_m")
    per_hop = cable * p.value("ns_per_m") + p.value("header_bytes") * 8 / p.value("link_gbps")
    ns = hops * per_hop + (hops - 1) * p.value("switch_latency_ns") + p.value("nic_feedback_ns")
    return max(1, round(ns * 1000 / slot))


def nodes_and_links(p: Preset, w: Wiring, delays: np.ndarray, slot: int):
    """Per switch its buffer and PFC headroom (packets), per link its row;
    and the queue capacity every egress ring needs."""
    LK = np.zeros((len(w.links), lo.L_COLUMNS), dtype=np.int64)
    ND = np.zeros((w.n_nodes, lo.N_COLUMNS), dtype=np.int64)
    ports = w.ports()
    for i, (src, dst) in enumerate(w.links):
        LK[i, lo.L_SRC], LK[i, lo.L_DST], LK[i, lo.L_DELAY] = src, dst, delays[i]
        # a PAUSE sent now stops the sender a delay later; what it sent
        # meanwhile, and what is on the wire, lands in the headroom
        ND[dst, lo.N_HEADROOM] += 2 * delays[i] + 3
        if p.flow_control == CREDITS:
            LK[i, lo.L_CREDITS] = 2 * delays[i] + 2 + int(p.value("credit_margin_pkts"))
    if p.flow_control == CREDITS:
        for i, (_, dst) in enumerate(w.links):
            ND[dst, lo.N_BUF] += LK[i, lo.L_CREDITS]
        ND[:, lo.N_HEADROOM] = 0
    else:
        wire = p.value("mtu_bytes") + p.value("header_bytes")
        ND[:, lo.N_BUF] = (p.value("buffer_per_port_bytes") * ports) // wire
    ND[:w.n_hosts] = 0
    cap = int((ND[:, lo.N_BUF] + ND[:, lo.N_HEADROOM]).max()) + 1
    if p.params.get("queue_limit_pkts") and p.value("queue_limit_pkts") > 0:
        cap = int(p.value("queue_limit_pkts")) + 1
    return LK, ND, cap


def flow_rows(w: Wiring, flows, order, seed: int):
    FL = np.zeros((len(flows), lo.F_COLUMNS), dtype=np.int64)
    rng = np.random.default_rng(seed)
    for row, i in enumerate(order):
        src, dst, size = flows[i]
        if not (0 <= src < w.n_hosts and 0 <= dst < w.n_hosts) or src == dst or size < 1:
            raise ValueError(f"flow {i} ({src} -> {dst}, {size} packets) is not between two"
                             f" different NICs of the {w.n_hosts} there are")
        FL[row, [lo.F_SRC, lo.F_DST, lo.F_SIZE]] = src, dst, size
    FL[:, lo.F_DONE] = -1
    FL[:, lo.F_LASTCNP] = -lo.NEVER
    FL[:, lo.F_HASH] = rng.integers(0, 1 << 31, len(flows))
    FR = np.zeros((len(flows), lo.R_COLUMNS), dtype=np.float64)
    FR[:, lo.R_RC] = FR[:, lo.R_RT] = FR[:, lo.R_ALPHA] = 1.0
    HR = np.zeros((w.n_hosts, lo.H_COLUMNS), dtype=np.int64)
    srcs = FL[:, lo.F_SRC]
    HR[:, lo.H_FS] = np.searchsorted(srcs, np.arange(w.n_hosts), side="left")
    HR[:, lo.H_FE] = np.searchsorted(srcs, np.arange(w.n_hosts), side="right")
    HR[:, lo.H_LINK] = w.host_link
    return FL, FR, HR


def path_slots(w: Wiring, delays: np.ndarray, src: int, dst: int) -> int:
    """A packet's way from NIC src to NIC dst through empty queues (the
    first of the equal-cost candidates at each switch), in slots."""
    link = int(w.host_link[src])
    total = int(delays[link])
    node = w.links[link][1]
    while node != dst:
        link = int(w.candidates[node - w.n_hosts, dst, 0])
        total += int(delays[link])
        node = w.links[link][1]
    return total


def tcp_rows(p: Preset, w: Wiring, FL: np.ndarray, FR: np.ndarray, delays: np.ndarray,
             ack: int, P: np.ndarray) -> None:
    """Every TCP sender at its start: IW10, ssthresh unbounded, no timer
    running, and the RTT estimator seeded by the connection's handshake (the
    SYN out and the SYN-ACK back through empty queues: Linux takes that
    sample, so the first RTO is not RFC 6298's 1 s)."""
    FL[:, lo.F_CWND] = int(p.value("initial_cwnd_pkts"))
    FL[:, lo.F_SSTH] = 1 << 40
    FL[:, lo.F_HISACK] = -1
    FL[:, lo.F_RTOT] = lo.NEVER
    for f in range(len(FL)):
        r = float(path_slots(w, delays, FL[f, lo.F_SRC], FL[f, lo.F_DST]) + ack)
        FR[f, lo.R_SRTT], FR[f, lo.R_RTTVAR] = r, r / 2
        rto = (r + max(2 * r, P[lo.P_RTOMIN]) if P[lo.P_RTOLINUX] > 0
               else max(P[lo.P_RTOMIN], 3 * r))
        FL[f, lo.F_RTO] = min(int(rto) + 1, int(P[lo.P_RTOMAX]))


def tcp_arrays(p: Preset, n_flows: int):
    """The receivers' ring bitmaps, the senders' scoreboards and send times
    (one row of the window per flow; a 1 x 1 stand-in for other transports)."""
    if p.transport != KERNEL_TCP:
        return (np.zeros((1, 1), np.uint8), np.zeros((1, 1), np.uint8),
                np.zeros((1, 1), np.int64))
    window = int(p.value("max_window_pkts"))
    if window < 1:
        raise ValueError(f"preset {p.name}: max_window_pkts must be at least 1, not {window}")
    return (np.zeros((n_flows, window), np.uint8), np.zeros((n_flows, window), np.uint8),
            np.zeros((n_flows, window), np.int64))


def state(p: Preset, w: Wiring, flows: Sequence[Tuple[int, int, int]], seed: int):
    """The state tuple S (columns.py) for these flows, and the flows' order."""
    slot = slot_ps(p)
    delays = link_delays(p, w, slot)
    hops = 4 if any(w.fabric_link) else 2
    feedback = to_slots(p.value("nic_feedback_ns"), slot) + hops * int(delays.max())
    if p.transport == KERNEL_TCP:
        feedback = ack_slots(p, w, slot)
    order = sorted(range(len(flows)), key=lambda i: flows[i][0])
    FL, FR, HR = flow_rows(w, flows, order, seed)
    P = parameters(p, slot, feedback)
    if p.transport == KERNEL_TCP:
        tcp_rows(p, w, FL, FR, delays, feedback, P)
    LK, ND, cap = nodes_and_links(p, w, delays, slot)
    ST = np.zeros(lo.S_COLUMNS, dtype=np.int64)
    ST[lo.S_ACTIVE] = len(flows)
    n_links, dmax = len(w.links), int(delays.max()) + 1
    queues = [np.zeros((n_links, cap), dtype=np.int32) for _ in range(3)]
    # pipes are [slot, link]: every slot scans one row
    pipes = [np.full((dmax, n_links), -1, dtype=np.int64), np.zeros((dmax, n_links), np.int64),
             np.zeros((dmax, n_links), np.int64)]
    PP = np.zeros((dmax, n_links), dtype=np.int64)
    CP = np.zeros((dmax, n_links), dtype=np.int64)
    # every link may bring a receiver one packet a slot, each ACKed
    CT = np.zeros((max(1 << 12, 4 * len(flows), n_links * (feedback + 2)), lo.C_COLUMNS),
                  dtype=np.int64)
    S = (LK, FL, FR, P, ND, ST, w.candidates, w.n_candidates,
         HR, *queues, *pipes, PP, CP, CT, *tcp_arrays(p, len(flows)))
    return S, np.array(order), slot


def simulate(p: Preset, w: Wiring, flows: Sequence[Tuple[int, int, int]],
             horizon_us: float, seed: int = 1, until: Optional[float] = None) -> Run:
    """Run the flows (src NIC, dst NIC, size in packets, FOREVER to send for
    the whole run) for `horizon_us` or until all complete."""
    if not flows:
        raise ValueError("a packet run needs at least one flow")
    S, order, slot = state(p, w, flows, seed)
    kernel.seed(seed)
    end = to_slots(horizon_us * 1000, slot)
    started = time.perf_counter()
    reached = kernel.run(0, end, S)
    wall = time.perf_counter() - started
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    in_net = int(S[0][:, lo.L_QLEN].sum() + (S[12] >= 0).sum())
    return Run(p, w, S[1][back], S[0], S[5], slot, reached, int(p.value("mtu_bytes")),
               int(p.value("mtu_bytes") + p.value("header_bytes")), wall, in_net,
               S[2][back], int(S[3][lo.P_CTRL]))
