"""Kernel TCP at the NICs (the `tcp` preset): a sender modelled on Linux's
with Reno congestion control (`-C reno`) and SACK loss recovery, and a
receiver that holds out-of-order packets and ACKs every one.

- receiver: a per-flow ring bitmap of the receive window holds packets past
  a gap; the packet at rcv_nxt is delivered with every held one after it.
  Every packet, new or duplicate, is answered by an ACK carrying the
  cumulative ACK and the packet's own number (what SACK, and D-SACK for a
  duplicate, tell the sender). ACKs take one fixed delay (propagation, the
  ACK's own wire time per hop, the switches' latency and the receiver's
  turn-around), not a place in the data queues: the lab gives pure ACKs
  their own priority class;
- sender: congestion window in packets, initial window 10 (RFC 6928), slow
  start to ssthresh, then one packet more per window of ACKs (Linux
  tcp_cong_avoid_ai); the window only grows on ACKs that move snd_una, as
  Linux's tcp_may_raise_cwnd, and only while it is what limits the sender
  (tcp_is_cwnd_limited: a NIC busy with the flow at line rate leaves the
  window where it is, as Linux's small-queue limit on the host's qdisc
  does, instead of letting it grow far past the path and the queue, where
  halving it would not slow the flow); cwnd and new data are capped at the
  receive ring (`max_window_pkts`). What is in flight is counted as RFC
  6675's pipe: packets above the highest SACKed one, plus retransmissions
  not yet answered; outside recovery, what is sent and not yet ACKed or
  SACKed;
- fast recovery: `dupthresh` SACKed packets (each came with a duplicate
  ACK) start one episode per window: ssthresh = max(cwnd / 2, 2) (Linux's
  tcp_reno_ssthresh), cwnd = ssthresh (RFC 6675; Linux's PRR spreads the
  same reduction over the episode), and every hole below the highest SACKed
  packet is resent once, lowest first, before new data. The engine has no
  reordering (one path per flow, FIFO queues), so such a hole is lost for
  sure; RFC 6675 would wait for three SACKed packets above each hole. The
  episode ends when snd_una reaches snd_max as it was at its start. A lost
  retransmission waits for the timeout (no RACK);
- retransmission timeout (RFC 6298, Karn's rule: samples from packets never
  resent): RTO = srtt + max(4 rttvar, rto_min) as Linux computes it
  (tcp_set_rto, its rttvar floored at rto_min), or RFC 6298's
  max(rto_min, srtt + 4 rttvar); the estimator starts from the handshake's
  sample (engine.tcp_rows); doubled on every expiry up to 120 s. The timer
  restarts when snd_una moves or the head is resent. On expiry: ssthresh =
  max(cwnd / 2, 2) unless already cut in this loss (Linux tcp_enter_loss),
  cwnd = 1, every packet sent and not SACKed is deemed lost and resent
  from snd_una in slow start (Linux marks them lost and keeps the SACKed
  ones: no go-back-N over SACKed data).
"""

from __future__ import annotations

from numba import njit

from sim.packets.linklevel import put_on_wire
from sim.packets.transports import complete, push_feedback
from sim.packets.columns import (
    F_SIZE, F_SNDMAX, F_RCVNXT, F_DONE, F_LASTACT, F_TX, F_RTX, F_DELIV, F_OOO, F_SRC,
    F_SNDUNA, F_CWND, F_SSTH, F_CACNT, F_STATE, F_RECOVER, F_RTXPTR, F_SACKED, F_HISACK,
    F_RETXOUT, F_RTO, F_BACKOFF, F_RTOT, F_FRTX, F_RECOVS, F_TOUTS, F_HELD, F_CWNDLIM,
    F_MAXOUT, F_USAGESEQ, R_SRTT,
    R_RTTVAR, H_FS, H_FE, H_RR, H_LINK, H_WAKE, S_TIMEOUTS, KIND_ACK, P_DUPTHRESH,
    P_RTOMIN, P_RTOMAX, P_RTOLINUX, TS_OPEN, TS_RECOVERY, TS_LOSS, SB_SACKED, SB_RETX,
    SB_EVER, MAX_BACKOFF, NEVER)


@njit(cache=True)
def to_host(t, f, s, S):
    """Packet s of flow f reaches its receiver: held, delivered (with the
    held ones it unblocks) or discarded as a duplicate; ACKed either way."""
    FL, RB = S[1], S[18]
    W = RB.shape[1]
    nxt = FL[f, F_RCVNXT]
    if FL[f, F_DONE] >= 0 or s < nxt or RB[f, s % W]:
        FL[f, F_OOO] += 1
    elif s > nxt:
        RB[f, s % W] = 1
        FL[f, F_HELD] += 1
    else:
        n = 1
        nxt += 1
        while RB[f, nxt % W]:
            RB[f, nxt % W] = 0
            nxt += 1
            n += 1
        FL[f, F_HELD] -= n - 1
        FL[f, F_DELIV] += n
        FL[f, F_RCVNXT] = nxt
        if nxt >= FL[f, F_SIZE]:
            complete(t, f, S)
    push_feedback(t, f, KIND_ACK, FL[f, F_RCVNXT], s, S)


@njit(cache=True)
def rto_now(f, S):
    """The RTO with its backoff, in slots, capped at rto_max."""
    FL, P = S[1], S[3]
    return min(FL[f, F_RTO] << FL[f, F_BACKOFF], int(P[P_RTOMAX]))


@njit(cache=True)
def rtt_sample(f, r, S):
    """RFC 6298's estimator on one RTT sample r (slots); the RTO from it."""
    FL, FR, P = S[1], S[2], S[3]
    FR[f, R_RTTVAR] = 0.75 * FR[f, R_RTTVAR] + 0.25 * abs(FR[f, R_SRTT] - r)
    FR[f, R_SRTT] = 0.875 * FR[f, R_SRTT] + 0.125 * r
    var = 4.0 * FR[f, R_RTTVAR]
    if P[P_RTOLINUX] > 0:
        rto = FR[f, R_SRTT] + max(var, P[P_RTOMIN])
    else:
        rto = max(P[P_RTOMIN], FR[f, R_SRTT] + var)
    FL[f, F_RTO] = min(int(rto) + 1, int(P[P_RTOMAX]))
    FL[f, F_BACKOFF] = 0


@njit(cache=True)
def grow(f, S):
    """One more packet delivered by an ACK that moved snd_una: slow start
    below ssthresh, else one packet a window (Reno); only while the window
    is what limits the flow (Linux's tcp_is_cwnd_limited: in slow start, up
    to twice the most it had in flight)."""
    FL, W = S[1], S[19].shape[1]
    slow = FL[f, F_CWND] < FL[f, F_SSTH]
    if FL[f, F_CWNDLIM] == 0 and not (slow and FL[f, F_CWND] < 2 * FL[f, F_MAXOUT]):
        return
    if slow:
        FL[f, F_CWND] += 1
    else:
        FL[f, F_CACNT] += 1
        if FL[f, F_CACNT] >= FL[f, F_CWND]:
            FL[f, F_CACNT] = 0
            FL[f, F_CWND] += 1
    FL[f, F_CWND] = min(FL[f, F_CWND], W)


@njit(cache=True)
def sack(f, s, S):
    """The receiver holds packet s (above the cumulative ACK)."""
    FL, SB = S[1], S[19]
    i = s % SB.shape[1]
    b = SB[f, i]
    if b & SB_SACKED:
        return
    SB[f, i] = (b | SB_SACKED) & (SB_SACKED | SB_EVER)
    FL[f, F_SACKED] += 1
    if b & SB_RETX:
        FL[f, F_RETXOUT] -= 1
    FL[f, F_HISACK] = max(FL[f, F_HISACK], s)


@njit(cache=True)
def advance(t, f, cum, S):
    """snd_una moves to cum: the scoreboard below it is cleared, the window
    grows (not in fast recovery) and the RTO restarts."""
    FL, SB = S[1], S[19]
    W = SB.shape[1]
    for x in range(FL[f, F_SNDUNA], cum):
        b = SB[f, x % W]
        if b & SB_SACKED:
            FL[f, F_SACKED] -= 1
        if b & SB_RETX:
            FL[f, F_RETXOUT] -= 1
        SB[f, x % W] = 0
    FL[f, F_SNDUNA] = cum
    if FL[f, F_STATE] != TS_RECOVERY:
        grow(f, S)
    FL[f, F_RTOT] = t + rto_now(f, S) if cum < FL[f, F_SNDMAX] else NEVER


@njit(cache=True)
def recovery(f, S):
    """Leave recovery (or loss) once snd_una passes its end; enter fast
    recovery on dupthresh SACKed packets."""
    FL, P = S[1], S[3]
    state = FL[f, F_STATE]
    if state != TS_OPEN and FL[f, F_SNDUNA] >= FL[f, F_RECOVER]:
        if state == TS_RECOVERY:
            FL[f, F_CWND] = FL[f, F_SSTH]
        FL[f, F_STATE] = TS_OPEN
        state = TS_OPEN
    if state == TS_OPEN and FL[f, F_SACKED] >= P[P_DUPTHRESH]:
        FL[f, F_SSTH] = max(FL[f, F_CWND] // 2, 2)
        FL[f, F_CWND] = FL[f, F_SSTH]
        FL[f, F_CACNT] = 0
        FL[f, F_STATE] = TS_RECOVERY
        FL[f, F_RECOVER] = FL[f, F_SNDMAX]
        FL[f, F_RTXPTR] = FL[f, F_SNDUNA]
        FL[f, F_RECOVS] += 1


@njit(cache=True)
def on_ack(t, f, cum, s, S):
    """An ACK (cumulative ACK cum, answering packet s) reaches the sender."""
    FL, HR, SB, TS = S[1], S[8], S[19], S[20]
    i = s % SB.shape[1]
    una = FL[f, F_SNDUNA]
    if s >= una and s < FL[f, F_SNDMAX]:
        if SB[f, i] & (SB_SACKED | SB_EVER) == 0:
            rtt_sample(f, float(t - TS[f, i]), S)
        if s >= cum:
            sack(f, s, S)
    if cum > una:
        advance(t, f, cum, S)
    recovery(f, S)
    HR[FL[f, F_SRC], H_WAKE] = 0


@njit(cache=True)
def timeout(t, f, S):
    """The RTO expired: everything sent and not SACKed is lost; cwnd 1."""
    FL, ST, SB = S[1], S[5], S[19]
    W = SB.shape[1]
    FL[f, F_TOUTS] += 1
    ST[S_TIMEOUTS] += 1
    state = FL[f, F_STATE]
    if state == TS_OPEN or (state == TS_LOSS and FL[f, F_BACKOFF] == 0):
        FL[f, F_SSTH] = max(FL[f, F_CWND] // 2, 2)
    FL[f, F_CWND] = 1
    FL[f, F_CACNT] = 0
    FL[f, F_STATE] = TS_LOSS
    FL[f, F_RECOVER] = FL[f, F_SNDMAX]
    for x in range(FL[f, F_SNDUNA], FL[f, F_SNDMAX]):
        SB[f, x % W] &= SB_SACKED | SB_EVER
    FL[f, F_RETXOUT] = 0
    FL[f, F_RTXPTR] = FL[f, F_SNDUNA]
    FL[f, F_BACKOFF] = min(FL[f, F_BACKOFF] + 1, MAX_BACKOFF)
    FL[f, F_RTOT] = t + rto_now(f, S)


@njit(cache=True)
def in_flight(f, S):
    """RFC 6675's pipe, and the end of the packets deemed lost: in recovery
    every hole below the highest SACKed packet, after a timeout every
    packet sent before it and not SACKed."""
    FL = S[1]
    una, top, state = FL[f, F_SNDUNA], FL[f, F_SNDMAX], FL[f, F_STATE]
    if state == TS_OPEN:
        return top - una - FL[f, F_SACKED], una
    lost_end = max(FL[f, F_HISACK] + 1, una)
    if state == TS_LOSS:
        lost_end = max(lost_end, FL[f, F_RECOVER])
    return top - lost_end + FL[f, F_RETXOUT], lost_end


@njit(cache=True)
def cwnd_used(f, S):
    """After a send: whether the window is used up, kept per window of data
    (Linux's tcp_cwnd_validate)."""
    FL = S[1]
    out = in_flight(f, S)[0]
    limited = 1 if out >= FL[f, F_CWND] else 0
    if (FL[f, F_SNDUNA] >= FL[f, F_USAGESEQ] or limited
            or (FL[f, F_CWNDLIM] == 0 and out > FL[f, F_MAXOUT])):
        FL[f, F_CWNDLIM] = limited
        FL[f, F_MAXOUT] = out
        FL[f, F_USAGESEQ] = FL[f, F_SNDMAX]


@njit(cache=True)
def next_seq(f, S):
    """The packet flow f sends next if its pipe is below cwnd: the lowest
    lost hole not yet resent, else new data; -1 for none."""
    FL, SB = S[1], S[19]
    W = SB.shape[1]
    una, top = FL[f, F_SNDUNA], FL[f, F_SNDMAX]
    pipe, lost_end = in_flight(f, S)
    if pipe >= FL[f, F_CWND]:
        return -1
    p = max(FL[f, F_RTXPTR], una)
    while p < lost_end and SB[f, p % W] & (SB_SACKED | SB_RETX):
        p += 1
    FL[f, F_RTXPTR] = p
    if p < lost_end:
        return p
    if top < FL[f, F_SIZE] and top < una + W:
        return top
    return -1


@njit(cache=True)
def next_flow(t, h, S):
    """The host's next flow with a packet to send, round robin (and that
    packet), or (-1, -1) and the slot before which none will have one
    (an ACK arriving wakes the host sooner). Expired RTOs fire here."""
    FL, HR = S[1], S[8]
    fs, n, rr = HR[h, H_FS], HR[h, H_FE] - HR[h, H_FS], HR[h, H_RR]
    wake = NEVER
    for i in range(n):
        f = fs + (rr + i) % n
        if FL[f, F_DONE] >= 0:
            continue
        if FL[f, F_RTOT] <= t:
            timeout(t, f, S)
        s = next_seq(f, S)
        if s >= 0:
            HR[h, H_RR] = (rr + i + 1) % n
            return f, s
        wake = min(wake, FL[f, F_RTOT])
    HR[h, H_WAKE] = wake
    return -1, -1


@njit(cache=True)
def nic_transmit(t, slot, h, S):
    """The NIC's next packet onto its uplink: new data or a resent hole."""
    FL, HR, SB, TS = S[1], S[8], S[19], S[20]
    if t < HR[h, H_WAKE]:
        return
    f, s = next_flow(t, h, S)
    if f < 0:
        return
    i = s % SB.shape[1]
    if FL[f, F_SNDUNA] == FL[f, F_SNDMAX]:
        FL[f, F_RTOT] = t + rto_now(f, S)
    if s == FL[f, F_SNDMAX]:
        FL[f, F_SNDMAX] = s + 1
    else:
        SB[f, i] |= SB_RETX | SB_EVER
        FL[f, F_RETXOUT] += 1
        FL[f, F_RTX] += 1
        if FL[f, F_STATE] == TS_RECOVERY:
            FL[f, F_FRTX] += 1
        if s == FL[f, F_SNDUNA]:
            FL[f, F_RTOT] = t + rto_now(f, S)
    TS[f, i] = t
    FL[f, F_TX] += 1
    FL[f, F_LASTACT] = t
    cwnd_used(f, S)
    put_on_wire(slot, HR[h, H_LINK], f, s, 0, S)
