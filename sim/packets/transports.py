"""The NICs: what a sender puts on the wire and what a receiver makes of it.

- sending: each NIC serves its flows (QPs) round robin, one MTU a slot when
  its uplink is not paused (PFC) or out of credits (InfiniBand); a flow with
  DCQCN sends no faster than its current rate RC;
- receiving, RoCE's go-back-N: packets in order are delivered, one past a
  gap is discarded and answered by a NAK naming the first missing packet
  (again no sooner than the NAK interval); the sender rewinds to it. A tail
  loss (no later packet to show the gap) waits for the retransmission
  timeout;
- receiving, Spectrum-X: packets sprayed over paths arrive out of order and
  are placed where they belong (direct data placement): counted, never
  discarded;
- DCQCN (Zhu et al., SIGCOMM 2015): the notification point (receiver) sends
  at most one CNP per flow per CNP interval when marked packets arrive; the
  reaction point (sender) on a CNP sets RT = RC (see cut), cuts RC by alpha/2 and
  raises alpha by g; alpha decays by (1 - g) every alpha period without a
  CNP; the rate timer and the byte counter each count steps that raise RC
  halfway to RT (fast recovery, F steps), then raise RT by R_AI (additive)
  or by R_HAI per step past F on both (hyper).

Timers are caught up lazily, when the flow is next touched, rather than run
as events: a flow nobody touches has nothing to decide.
"""

from __future__ import annotations

import math

from numba import njit

from sim.packets.linklevel import ahead, may_send, put_on_wire
from sim.packets.columns import (
    L_DELAY, F_SIZE, F_SNDNXT, F_SNDMAX, F_RCVNXT, F_RCVCNT, F_NAKOUT, F_NAKT, F_DONE,
    F_LASTACT, F_TX, F_RTX, F_DELIV, F_OOO, F_LASTCNP, F_CNPS, F_SRC, F_MARKED, R_RC, R_RT,
    R_ALPHA, R_TALPHA, R_TRATE, R_BC, R_IT, R_IBC, R_NEXT, R_BYTIMER, H_FS, H_FE, H_RR,
    H_LINK, H_WAKE, S_CT_TAIL, S_NAKS, S_TIMEOUTS, S_CNPS, S_ACTIVE, C_TIME,
    C_FLOW, C_KIND, C_SEQ, C_AUX, KIND_NAK, KIND_CNP, P_FC, P_DCQCN, P_G, P_RAI, P_RHAI, P_TRATE,
    P_TALPHA, P_BC, P_F, P_CNPINT, P_MINRATE, P_RTO, P_CTRL, P_OOO, P_NAKINT, P_CLAMP,
    FC_LOSSY, FC_CREDITS, NEVER)


@njit(cache=True)
def push_feedback(t, f, kind, seq, aux, S):
    """A NAK, CNP or TCP ACK starts back to its sender: it arrives one fixed
    delay later (kernel.feedback takes it off the FIFO)."""
    P, ST, CT = S[3], S[5], S[17]
    i = ST[S_CT_TAIL] % CT.shape[0]
    CT[i, C_TIME] = t + int(P[P_CTRL])
    CT[i, C_FLOW] = f
    CT[i, C_KIND] = kind
    CT[i, C_SEQ] = seq
    CT[i, C_AUX] = aux
    ST[S_CT_TAIL] += 1


@njit(cache=True)
def on_nak(t, f, seq, S):
    """A NAK naming the first missing packet reaches its sender: rewind."""
    FL, HR = S[1], S[8]
    if seq < FL[f, F_SNDNXT]:
        FL[f, F_SNDNXT] = seq
        FL[f, F_LASTACT] = t
        HR[FL[f, F_SRC], H_WAKE] = 0


@njit(cache=True)
def complete(t, f, S):
    S[1][f, F_DONE] = t
    S[5][S_ACTIVE] -= 1


@njit(cache=True, inline="always")
def to_host(t, slot, l, f, s, mark, S):
    """A packet reaches its receiver NIC (which always keeps up: it pauses
    nobody and returns an InfiniBand credit at once)."""
    LK, FL, P, ST, CP = S[0], S[1], S[3], S[5], S[16]
    if int(P[P_FC]) == FC_CREDITS:
        CP[ahead(slot, LK[l, L_DELAY], CP.shape[0]), l] += 1
    if mark:
        FL[f, F_MARKED] += 1
        if P[P_DCQCN] > 0 and t - FL[f, F_LASTCNP] >= P[P_CNPINT]:
            FL[f, F_LASTCNP] = t
            FL[f, F_CNPS] += 1
            ST[S_CNPS] += 1
            push_feedback(t, f, KIND_CNP, 0, 0, S)
    if FL[f, F_DONE] >= 0:
        FL[f, F_OOO] += 1
        return
    if P[P_OOO] > 0:
        FL[f, F_RCVCNT] += 1
        FL[f, F_DELIV] += 1
        if FL[f, F_RCVCNT] == FL[f, F_SIZE]:
            complete(t, f, S)
        return
    expected = FL[f, F_RCVNXT]
    if s == expected:
        FL[f, F_RCVNXT] = expected + 1
        FL[f, F_DELIV] += 1
        FL[f, F_NAKOUT] = 0
        if expected + 1 == FL[f, F_SIZE]:
            complete(t, f, S)
        return
    FL[f, F_OOO] += 1
    if s > expected and (FL[f, F_NAKOUT] == 0 or t - FL[f, F_NAKT] >= P[P_NAKINT]):
        FL[f, F_NAKOUT] = 1
        FL[f, F_NAKT] = t
        ST[S_NAKS] += 1
        push_feedback(t, f, KIND_NAK, expected, 0, S)


@njit(cache=True)
def increase(f, S):
    """One rate-increase step (timer or byte counter)."""
    FR, P = S[2], S[3]
    steps_t, steps_b, F = FR[f, R_IT], FR[f, R_IBC], P[P_F]
    if max(steps_t, steps_b) < F:
        pass
    elif min(steps_t, steps_b) > F:
        FR[f, R_RT] += (min(steps_t, steps_b) - F) * P[P_RHAI]
    else:
        FR[f, R_RT] += P[P_RAI]
    FR[f, R_RT] = min(FR[f, R_RT], 1.0)
    FR[f, R_RC] = min((FR[f, R_RT] + FR[f, R_RC]) / 2.0, 1.0)


@njit(cache=True)
def catch_up(t, f, S):
    """The alpha decay and rate-timer steps due since the flow was last
    touched."""
    FR, P = S[2], S[3]
    period = P[P_TALPHA]
    if t - FR[f, R_TALPHA] >= period:
        n = math.floor((t - FR[f, R_TALPHA]) / period)
        FR[f, R_ALPHA] *= (1.0 - P[P_G]) ** n
        FR[f, R_TALPHA] += n * period
    period = P[P_TRATE]
    if t - FR[f, R_TRATE] >= period:
        n = math.floor((t - FR[f, R_TRATE]) / period)
        FR[f, R_TRATE] += n * period
        for _ in range(min(n, 64)):
            if FR[f, R_RC] >= 1.0:
                break
            FR[f, R_IT] += 1
            FR[f, R_BYTIMER] = 1.0
            increase(f, S)


@njit(cache=True)
def cut(t, f, S):
    """The reaction point receives a CNP. The target rate RT is pulled down
    to RC only if the preset clamps it, or when the last increase came from
    the timer (ConnectX's clamp_tgt_rate / clamp_tgt_rate_after_time_inc);
    otherwise RT stays where it was and fast recovery climbs back to it."""
    FR, P = S[2], S[3]
    catch_up(t, f, S)
    if P[P_CLAMP] > 0 or FR[f, R_BYTIMER] > 0:
        FR[f, R_RT] = FR[f, R_RC]
    FR[f, R_BYTIMER] = 0.0
    FR[f, R_RC] = max(FR[f, R_RC] * (1.0 - FR[f, R_ALPHA] / 2.0), P[P_MINRATE])
    FR[f, R_ALPHA] = (1.0 - P[P_G]) * FR[f, R_ALPHA] + P[P_G]
    FR[f, R_TALPHA] = t
    FR[f, R_TRATE] = t
    FR[f, R_IT] = 0.0
    FR[f, R_IBC] = 0.0
    FR[f, R_BC] = 0.0


@njit(cache=True)
def paced(t, f, S):
    """A DCQCN flow sent a packet: byte counter, and its next slot at RC."""
    FR, P = S[2], S[3]
    catch_up(t, f, S)
    FR[f, R_BC] += 1.0
    if FR[f, R_BC] >= P[P_BC]:
        FR[f, R_BC] -= P[P_BC]
        if FR[f, R_RC] < 1.0:
            FR[f, R_IBC] += 1
            FR[f, R_BYTIMER] = 0.0
            increase(f, S)
    FR[f, R_NEXT] = max(FR[f, R_NEXT], float(t)) + 1.0 / FR[f, R_RC]


@njit(cache=True)
def next_flow(t, h, S):
    """The host's next flow with a packet it may send now, round robin, or
    -1 (and the slot before which none will have one). A go-back-N flow
    with everything sent but not all delivered rewinds on its timeout."""
    FL, FR, P, ST, HR = S[1], S[2], S[3], S[5], S[8]
    fs, n, rr = HR[h, H_FS], HR[h, H_FE] - HR[h, H_FS], HR[h, H_RR]
    lossy = int(P[P_FC]) == FC_LOSSY
    wake = NEVER
    for i in range(n):
        f = fs + (rr + i) % n
        if FL[f, F_DONE] >= 0:
            continue
        if FL[f, F_SNDNXT] >= FL[f, F_SIZE]:
            if not lossy:
                continue
            due = FL[f, F_LASTACT] + int(P[P_RTO])
            if t < due:
                wake = min(wake, due)
                continue
            FL[f, F_SNDNXT] = FL[f, F_RCVNXT]
            ST[S_TIMEOUTS] += 1
        if FR[f, R_NEXT] > t:
            wake = min(wake, int(math.ceil(FR[f, R_NEXT])))
            continue
        HR[h, H_RR] = (rr + i + 1) % n
        return f
    HR[h, H_WAKE] = wake
    return -1


@njit(cache=True)
def nic_transmit(t, slot, h, S):
    FL, P, HR = S[1], S[3], S[8]
    if t < HR[h, H_WAKE]:
        return
    f = next_flow(t, h, S)
    if f < 0:
        return
    l = HR[h, H_LINK]
    if not may_send(slot, l, S):
        HR[h, H_RR] = (HR[h, H_RR] - 1) % (HR[h, H_FE] - HR[h, H_FS])
        return
    s = FL[f, F_SNDNXT]
    FL[f, F_SNDNXT] = s + 1
    if s < FL[f, F_SNDMAX]:
        FL[f, F_RTX] += 1
    else:
        FL[f, F_SNDMAX] = s + 1
    FL[f, F_TX] += 1
    FL[f, F_LASTACT] = t
    if P[P_DCQCN] > 0:
        paced(t, f, S)
    put_on_wire(slot, l, f, s, 0, S)
