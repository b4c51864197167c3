"""Where the packet engine keeps its state: the columns of its integer and
float matrices and the order of the arrays in the state tuple `S` that every
compiled function takes. Plain module constants, which numba folds in.

S = (LK links, FL flows, FR flow rates, P parameters, ND nodes, ST totals,
     CAND, NCAND routing candidates, HR hosts, QF QS QM egress queues,
     PF PS PM pipes, PP pause pipes, CP credit pipes, CT feedback FIFO,
     RB TCP receive bitmaps, SB TCP scoreboards, TS TCP send times)
"""

# links (int64 [link, column])
(L_SRC, L_DST, L_DELAY, L_QHEAD, L_QLEN, L_PAUSED, L_QPEAK, L_QSUM, L_CREDITS, L_PFC,
 L_PAUSES, L_ING, L_TX, L_DROPS, L_ECN, L_STALLS, L_XOFF) = range(17)
L_COLUMNS = 17

# flows (int64 [flow, column]); sizes and sequence numbers in packets
(F_SRC, F_DST, F_SIZE, F_SNDNXT, F_SNDMAX, F_RCVNXT, F_RCVCNT, F_NAKOUT, F_NAKT, F_DONE,
 F_LASTACT, F_TX, F_RTX, F_DELIV, F_OOO, F_LASTCNP, F_CNPS, F_HASH, F_DROPPED,
 F_MARKED) = range(20)
# a TCP flow's sender (kerneltcp.py): snd_una, congestion window, slow-start
# threshold, congestion-avoidance ACK count, recovery state, its end (snd_max
# at entry), the retransmission scan pointer, SACKed packets, the highest
# SACKed, retransmissions in flight, RTO (slots, no backoff), backoff, the
# RTO's deadline; counters: fast retransmits, recovery episodes, timeouts;
# the receiver's out-of-order packets held; whether the window was used up
# in the last window's worth of sending, the most in flight then, and the
# snd_max that window ends at (Linux's is_cwnd_limited, max_packets_out,
# cwnd_usage_seq)
(F_SNDUNA, F_CWND, F_SSTH, F_CACNT, F_STATE, F_RECOVER, F_RTXPTR, F_SACKED, F_HISACK,
 F_RETXOUT, F_RTO, F_BACKOFF, F_RTOT, F_FRTX, F_RECOVS, F_TOUTS, F_HELD, F_CWNDLIM,
 F_MAXOUT, F_USAGESEQ) = range(20, 40)
F_COLUMNS = 40

# flow rates (float64 [flow, column]): DCQCN's reaction point; rates as a
# fraction of the line rate, times in slots
R_RC, R_RT, R_ALPHA, R_TALPHA, R_TRATE, R_BC, R_IT, R_IBC, R_NEXT, R_BYTIMER = range(10)
# and TCP's RTT estimator (RFC 6298), in slots: srtt, rttvar
R_SRTT, R_RTTVAR = 10, 11
R_COLUMNS = 12

# nodes (int64 [node, column]): shared buffer, packets held, PFC headroom
N_BUF, N_USED, N_HEADROOM = range(3)
N_COLUMNS = 3

# hosts (int64 [host, column]): its flows are fs..fe-1, round-robin pointer,
# uplink, and the slot before which none of its flows may send
H_FS, H_FE, H_RR, H_LINK, H_WAKE = range(5)
H_COLUMNS = 5

# totals (int64)
S_CT_HEAD, S_CT_TAIL, S_OVERFLOW, S_NAKS, S_TIMEOUTS, S_CNPS, S_ACTIVE = range(7)
S_COLUMNS = 7

# feedback FIFO (int64 [entry, column]); a TCP ACK's seq is the cumulative
# ACK and its aux the packet it answers (what SACK tells)
C_TIME, C_FLOW, C_KIND, C_SEQ, C_AUX = range(5)
C_COLUMNS = 5
KIND_NAK, KIND_CNP, KIND_ACK = 0, 1, 2

# parameters (float64)
(P_FC, P_ROUTE, P_ECN, P_KMIN, P_KMAX, P_PMAX, P_DCQCN, P_G, P_RAI, P_RHAI, P_TRATE,
 P_TALPHA, P_BC, P_F, P_CNPINT, P_MINRATE, P_RTO, P_CTRL, P_OOO, P_LOSSY_ALPHA,
 P_PFC_ALPHA, P_HYST, P_NAKINT, P_CLAMP) = range(24)
# the TCP transport and the static drop-tail queue limit (0: dynamic threshold)
P_TCP, P_QLIMIT, P_DUPTHRESH, P_RTOMIN, P_RTOMAX, P_RTOLINUX = range(24, 30)
P_COLUMNS = 30

FC_LOSSY, FC_PFC, FC_CREDITS = 0, 1, 2
RT_ECMP, RT_DMODK, RT_ADAPTIVE = 0, 1, 2
NEVER = 1 << 62

# a TCP sender's state (Linux's CA states Open/Disorder, Recovery, Loss) and
# the bits of its scoreboard: SACKed, resent in this recovery, ever resent
TS_OPEN, TS_RECOVERY, TS_LOSS = 0, 1, 2
SB_SACKED, SB_RETX, SB_EVER = 1, 2, 4
MAX_BACKOFF = 15
