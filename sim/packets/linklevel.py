"""Link-level flow control and the wire: PFC's per-ingress XOFF/XON
decision and its PAUSE travelling back to the sender, InfiniBand's credits
going home, and a packet put into a link's pipe (a ring written at
t + delay). Both the switches (kernel.py) and the NICs (transports.py) send
through here.
"""

from __future__ import annotations

from numba import njit

from sim.packets.columns import (
    L_DST, L_DELAY, L_PAUSED, L_CREDITS, L_PFC, L_PAUSES, L_ING, L_TX, L_STALLS, L_XOFF,
    N_BUF, N_USED, P_FC, P_PFC_ALPHA, P_HYST, FC_PFC, FC_CREDITS)


@njit(cache=True, inline="always")
def ahead(slot, delay, dmax):
    """The ring index `delay` slots after `slot` (delay < dmax): a
    subtraction, not a division, in the loops that run every slot."""
    i = slot + delay
    return i - dmax if i >= dmax else i


@njit(cache=True)
def flow_control(slot, S):
    """Credits come home; each switch decides, per ingress link, PAUSE or
    not (dynamic XOFF on its free buffer, XON a hysteresis below), and the
    decision starts down the link towards the sender."""
    LK, P, ND, PP, CP, n_hosts = S[0], S[3], S[4], S[15], S[16], S[8].shape[0]
    dmax = PP.shape[0]
    fc = int(P[P_FC])
    for l in range(LK.shape[0]):
        if fc == FC_CREDITS:
            LK[l, L_CREDITS] += CP[slot, l]
            CP[slot, l] = 0
            continue
        node = LK[l, L_DST]
        if fc != FC_PFC or node < n_hosts:
            continue
        threshold = P[P_PFC_ALPHA] * (ND[node, N_BUF] - ND[node, N_USED])
        ing = LK[l, L_ING]
        if LK[l, L_PFC] == 0 and ing > 0 and ing > threshold:
            LK[l, L_PFC] = 1
            LK[l, L_PAUSES] += 1
        elif LK[l, L_PFC] == 1 and ing <= threshold - P[P_HYST]:
            LK[l, L_PFC] = 0
        LK[l, L_XOFF] += LK[l, L_PFC]
        PP[ahead(slot, LK[l, L_DELAY], dmax), l] = LK[l, L_PFC]


@njit(cache=True, inline="always")
def may_send(slot, l, S):
    """Whether link l's sender may put a packet on the wire now (PFC state as
    it reached the sender, or a credit left); counts the slot if not."""
    LK, P, PP = S[0], S[3], S[15]
    fc = int(P[P_FC])
    if fc == FC_PFC and PP[slot, l] == 1:
        LK[l, L_PAUSED] += 1
        return False
    if fc == FC_CREDITS and LK[l, L_CREDITS] <= 0:
        LK[l, L_STALLS] += 1
        return False
    return True


@njit(cache=True, inline="always")
def put_on_wire(slot, l, f, s, mark, S):
    LK, P, PF, PS, PM = S[0], S[3], S[12], S[13], S[14]
    i = ahead(slot, LK[l, L_DELAY], PF.shape[0])
    PF[i, l] = f
    PS[i, l] = s
    PM[i, l] = mark
    LK[l, L_TX] += 1
    if int(P[P_FC]) == FC_CREDITS:
        LK[l, L_CREDITS] -= 1
