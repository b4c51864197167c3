"""The packet engine's core: time in slots of one MTU's serialisation at the
line rate, every link moving at most one packet a slot, compiled with numba.

Why slots and not an event heap: every link of the scenarios runs at the same
rate and every packet is one MTU, so a port's transmissions fall on a grid;
stepping all ports slot by slot is exact on that grid and needs no heap, no
per-packet object and no allocation: packets are (flow, sequence, mark)
triples moved between preallocated arrays.

- a link is a pipe: a ring of `Dmax` slots per link (stored [slot, link]),
  written at t + delay and read at t (delay = cable + the sending switch's
  latency, rounded up to slots, plus the slot of serialisation);
- a switch egress is a FIFO ring per link (the queue); admission by the
  preset's discipline: drop-tail with a dynamic threshold on the free shared
  buffer (lossy), or always (lossless, with the upstream held back by PFC or
  credits); ECN marked RED-style on the egress queue at enqueue;
- PFC: each switch counts the packets it holds per ingress link; above the
  dynamic XOFF threshold it pauses that link, the PAUSE reaching the sender a
  link delay later (another ring per link); headroom covers the loop, and
  the engine counts any overflow of buffer + headroom (which must stay 0);
- InfiniBand credits: a sender spends one credit per packet and gets it back
  a link delay after the receiving switch forwards the packet on;
- NICs (transports.py): round robin over their flows (QPs), each paced by its
  DCQCN rate if the preset has DCQCN; receivers do go-back-N or place packets
  out of order; NAKs and CNPs travel a fixed feedback delay, FIFO;
- or, under the tcp preset, kernel TCP (kerneltcp.py): Reno with SACK
  recovery, every packet ACKed, the ACKs taking the same fixed-delay FIFO;
- a lossy egress drops past the dynamic threshold, or past a static limit
  of `queue_limit_pkts` when one is set (a pfifo of that many packets).

Left out: per-priority queues (one lossless class), the PAUSE frames' own
wire time, packets smaller than the MTU (a message is whole MTUs), link
speeds that differ, and ACK traffic in the queues (RoCE's sender learns
completion from the receiver directly; NAKs, CNPs and TCP's ACKs take a
fixed delay instead of a place in a queue).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sim.packets import kerneltcp as tcp
from sim.packets import transports as tr
from sim.packets.freshness import keep_cache_fresh
from sim.packets.linklevel import ahead, flow_control, may_send, put_on_wire
from sim.packets.columns import (
    L_SRC, L_DST, L_DELAY, L_QHEAD, L_QLEN, L_QPEAK, L_QSUM, L_ING, L_DROPS, L_ECN, F_DST,
    F_HASH, F_DROPPED, N_BUF, N_USED, N_HEADROOM, P_FC, P_ROUTE, P_ECN, P_KMIN, P_KMAX,
    P_PMAX, P_LOSSY_ALPHA, P_QLIMIT, P_TCP, S_OVERFLOW, S_ACTIVE, S_CT_HEAD, S_CT_TAIL,
    C_TIME, C_FLOW, C_KIND, C_SEQ, C_AUX, KIND_NAK, KIND_ACK, FC_LOSSY, FC_CREDITS, RT_ECMP,
    RT_DMODK)


# before anything here is compiled or loaded from the cache (freshness.py)
keep_cache_fresh()


@njit(cache=True)
def seed(value):
    np.random.seed(value)


@njit(cache=True, inline="always")
def route(t, node, f, S):
    """The egress link at switch `node` for flow f's packet: hashed per flow
    (ECMP), destination mod k (InfiniBand's static routing), or the candidate
    with the shortest queue (adaptive, ties broken by a rotating start)."""
    LK, FL, P, CAND, NCAND, n_hosts = S[0], S[1], S[3], S[6], S[7], S[8].shape[0]
    sw = node - n_hosts
    d = FL[f, F_DST]
    k = NCAND[sw, d]
    if k == 1:
        return CAND[sw, d, 0]
    mode = int(P[P_ROUTE])
    if mode == RT_ECMP:
        x = ((FL[f, F_HASH] ^ ((node * 40503) & 0x7FFFFFFF)) * 2654435761) >> 13
        return CAND[sw, d, x % k]
    if mode == RT_DMODK:
        return CAND[sw, d, d % k]
    start = (t + f) % k
    best = CAND[sw, d, start]
    for i in range(1, k):
        c = CAND[sw, d, (start + i) % k]
        if LK[c, L_QLEN] < LK[best, L_QLEN]:
            best = c
    return best


@njit(cache=True, inline="always")
def ecn_mark(q, P):
    """RED on the instantaneous egress queue (packets): never below Kmin,
    always above Kmax, Pmax * (q - Kmin) / (Kmax - Kmin) between."""
    if q <= P[P_KMIN]:
        return 0
    if q >= P[P_KMAX]:
        return 1
    p = P[P_PMAX] * (q - P[P_KMIN]) / (P[P_KMAX] - P[P_KMIN])
    return 1 if np.random.random() < p else 0


@njit(cache=True, inline="always")
def to_switch(t, node, inlink, f, s, mark, S):
    """A packet arrives at a switch: routed, admitted or dropped, marked,
    queued at its egress and counted against the link it came in on."""
    LK, FL, P, ND, ST, QF, QS, QM = S[0], S[1], S[3], S[4], S[5], S[9], S[10], S[11]
    e = route(t, node, f, S)
    q = LK[e, L_QLEN]
    cap = QF.shape[1]
    lossy = int(P[P_FC]) == FC_LOSSY
    if lossy and P[P_QLIMIT] > 0:
        full = q >= P[P_QLIMIT]
    else:
        full = lossy and q >= P[P_LOSSY_ALPHA] * (ND[node, N_BUF] - ND[node, N_USED])
    if q >= cap or full:
        if not lossy:
            ST[S_OVERFLOW] += 1
        LK[e, L_DROPS] += 1
        FL[f, F_DROPPED] += 1
        return
    if P[P_ECN] > 0 and mark == 0:
        mark = ecn_mark(q, P)
        LK[e, L_ECN] += mark
    i = LK[e, L_QHEAD] + q
    if i >= cap:
        i -= cap
    QF[e, i] = f
    QS[e, i] = s
    QM[e, i] = mark | (inlink << 1)
    LK[e, L_QLEN] = q + 1
    if q + 1 > LK[e, L_QPEAK]:
        LK[e, L_QPEAK] = q + 1
    ND[node, N_USED] += 1
    LK[inlink, L_ING] += 1
    if not lossy and ND[node, N_USED] > ND[node, N_BUF] + ND[node, N_HEADROOM]:
        ST[S_OVERFLOW] += 1


@njit(cache=True)
def arrivals(t, slot, S):
    """Every packet due now comes off its link. Under kernel TCP the links
    are taken from a random start, in a random direction, each slot: of two
    packets arriving in one slot, each is first half the time, so which
    takes a drop-tail queue's last place is left to chance, as on a real
    switch, rather than to the links' order (which would lock the first
    sender in and every other out)."""
    LK, P, PF, PS, PM, n_hosts = S[0], S[3], S[12], S[13], S[14], S[8].shape[0]
    n = LK.shape[0]
    start, step = 0, 1
    if P[P_TCP] > 0:
        start, step = np.random.randint(0, n), 2 * np.random.randint(0, 2) - 1
    for k in range(n):
        l = (start + step * k) % n
        f = PF[slot, l]
        if f < 0:
            continue
        PF[slot, l] = -1
        dst = LK[l, L_DST]
        if dst < n_hosts and P[P_TCP] > 0:
            tcp.to_host(t, f, PS[slot, l], S)
        elif dst < n_hosts:
            tr.to_host(t, slot, l, f, PS[slot, l], PM[slot, l], S)
        else:
            to_switch(t, dst, l, f, PS[slot, l], PM[slot, l], S)


@njit(cache=True)
def switch_transmit(slot, S):
    """Every switch egress sends its queue's head, unless paused or out of
    credits; the packet's ingress account is released (and its credit sent
    back up that link)."""
    LK, P, ND, QF, QS, QM, CP, n_hosts = (S[0], S[3], S[4], S[9], S[10], S[11], S[16],
                                          S[8].shape[0])
    cap = QF.shape[1]
    for e in range(LK.shape[0]):
        node = LK[e, L_SRC]
        q = LK[e, L_QLEN]
        if node < n_hosts or q == 0:
            continue
        LK[e, L_QSUM] += q
        if not may_send(slot, e, S):
            continue
        h = LK[e, L_QHEAD]
        f, s, meta = QF[e, h], QS[e, h], QM[e, h]
        LK[e, L_QHEAD] = h + 1 if h + 1 < cap else 0
        LK[e, L_QLEN] = q - 1
        ND[node, N_USED] -= 1
        inlink = meta >> 1
        LK[inlink, L_ING] -= 1
        if int(P[P_FC]) == FC_CREDITS:
            CP[ahead(slot, LK[inlink, L_DELAY], CP.shape[0]), inlink] += 1
        put_on_wire(slot, e, f, s, meta & 1, S)


@njit(cache=True)
def feedback(t, S):
    """NAKs, CNPs and TCP ACKs due now reach their senders (one fixed
    delay, so the FIFO is in time order)."""
    ST, CT = S[5], S[17]
    while ST[S_CT_HEAD] < ST[S_CT_TAIL]:
        i = ST[S_CT_HEAD] % CT.shape[0]
        if CT[i, C_TIME] > t:
            return
        f, kind = CT[i, C_FLOW], CT[i, C_KIND]
        if kind == KIND_ACK:
            tcp.on_ack(t, f, CT[i, C_SEQ], CT[i, C_AUX], S)
        elif kind == KIND_NAK:
            tr.on_nak(t, f, CT[i, C_SEQ], S)
        else:
            tr.cut(t, f, S)
        ST[S_CT_HEAD] += 1


@njit(cache=True)
def run(t0, t1, S):
    """Slots t0..t1-1, or until every flow has completed; the slot reached."""
    P, ST = S[3], S[5]
    n_hosts, dmax = S[8].shape[0], S[12].shape[0]
    slot = t0 % dmax
    kernel_tcp = P[P_TCP] > 0
    for t in range(t0, t1):
        feedback(t, S)
        arrivals(t, slot, S)
        flow_control(slot, S)
        switch_transmit(slot, S)
        for h in range(n_hosts):
            if kernel_tcp:
                tcp.nic_transmit(t, slot, h, S)
            else:
                tr.nic_transmit(t, slot, h, S)
        slot = slot + 1 if slot + 1 < dmax else 0
        if ST[S_ACTIVE] == 0:
            return t + 1
    return t1
