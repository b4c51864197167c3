"""The packet engine's tcp preset (sim/packets/kerneltcp.py): kernel TCP
with Reno congestion control and SACK recovery on drop-tail switches. Most
cases run the lab's comparison: 50 Mbit/s links, 1448-byte segments in
1514-byte frames as the lab's HTB shaper counts them, a static drop-tail
queue of N packets (the lab's pfifo). Nothing here is timed.

What TCP is known to do and these hold it to: a lone flow fills the link;
an incast into a shallow queue drops packets yet keeps the port busy, losses
recovered by fast retransmit and, where a window is too small for three
duplicate ACKs, by the retransmission timeout (the "TCP incast" of Phanishayee
et al., FAST 2008, and Vasudevan et al., SIGCOMM 2009: the 200 ms RTO_min
stalls a flow that loses its tail); a queue deeper than every window drops
nothing; over a long run Reno shares the port fairly.
"""

import dataclasses

import pytest

from sim.packets import columns as lo
from sim.packets import kernel, scenarios
from sim.packets import kerneltcp as tcp
from sim.packets.engine import FOREVER, parameters, simulate, slot_ps, state
from sim.packets.presets import preset
from sim.packets.summary import figures
from sim.packets.wiring import single_switch

LAB = dict(link_gbps=0.05, mtu_bytes=1448, header_bytes=66)


def incast(senders, per_sender_bytes, seconds, seed=1, **overrides):
    return scenarios.incast("tcp", senders, per_sender_bytes, seconds * 1e6, seed,
                            {**LAB, **overrides})


def conserved(run):
    """Every packet a NIC sent was delivered, held out of order by its
    receiver, discarded as a duplicate, dropped, or is still in the network."""
    FL = run.flows
    return FL[:, lo.F_TX].sum() == (FL[:, lo.F_DELIV].sum() + FL[:, lo.F_HELD].sum()
                                    + FL[:, lo.F_OOO].sum() + FL[:, lo.F_DROPPED].sum()
                                    + run.in_network)


def test_a_lone_flow_fills_the_link_without_a_drop():
    """Its own NIC is as fast as the bottleneck, so the 3 packets the path
    holds are all it can keep in flight: IW10 never limits it, and the
    window does not grow past it (Linux's tcp_is_cwnd_limited)."""
    o = incast(1, None, 2, queue_limit_pkts=64)
    f = o.figures
    assert f["line_frac"] > 0.99
    assert f["drops"] == 0 and f["retx_mb"] == 0 and f["timeouts"] == 0
    assert o.run.flows[0, lo.F_CWND] == 10
    big = scenarios.incast("tcp", 1, 20e6, 20_000)
    assert big.figures["completion_us"] is not None and big.figures["drops"] == 0


def test_a_lone_flow_starts_with_ten_packets_and_doubles_each_round_trip():
    """IW10 (RFC 6928) and slow start, at 400 Gbit/s where the round trip
    (12 us, 387 slots) is longer than ten packets' wire time."""
    p = preset("tcp")
    rtt_us = scenarios.incast("tcp", 1, None, 1).figures["base_rtt_ms"] * 1e3
    sent = [simulate(p, single_switch(2), [(0, 1, 10 ** 6)], k * rtt_us).flows[0, lo.F_TX]
            for k in (0.9, 1.9)]
    assert sent == [10, 30]


def test_reno_saws_on_a_shallow_queue_repairing_losses_by_fast_retransmit():
    """Four flows into a 64-packet queue: each fills it, loses, halves and
    climbs back; with windows of some 16 packets three duplicate ACKs come
    nearly every time (measured on seeds 1-3: about 260 recoveries in 10 s
    against 0-1 timeouts, from the slow-start overshoot at the start). A
    queue far above the path's 3-packet BDP keeps the link busy throughout."""
    f = incast(4, None, 10, queue_limit_pkts=64).figures
    # Reno's one packet a round trip sets the saw's period, so the count
    assert 200 < f["recoveries"] < 330 and f["fast_retransmits"] >= f["recoveries"]
    assert f["timeouts"] <= 2
    assert f["line_frac"] > 0.99 and f["jain"] > 0.98


@pytest.fixture(scope="module")
def lab_incast():
    """The lab's case: 16 senders continuous for 10 s into one 50 Mbit/s
    port with a 64-packet drop-tail queue."""
    return incast(16, None, 10, queue_limit_pkts=64)


def test_incast_into_a_small_queue_drops_yet_keeps_the_port_busy(lab_incast):
    f, run = lab_incast.figures, lab_incast.run
    assert f["drops"] > 0 and f["retx_mb"] > 0
    assert f["fast_retransmits"] > 0 and f["timeouts"] > 0
    # every flow continuous over the same time: the sum cannot pass the line
    assert 0.98 < f["line_frac"] <= 1.0 + 1e-9
    assert f["queue_peak_kb"] == pytest.approx(64 * 1.514)
    assert (run.flows[:, lo.F_DELIV] > 0).all()
    assert conserved(run)


def test_no_flow_starves_and_reno_shares_fairly_over_a_minute():
    """60 s of the lab's incast. Measured on seeds 1-5: Jain 0.996-0.999 and
    the poorest flow at 0.84-0.94 of the mean; over 10 s Jain is 0.94-0.99
    (a flow that lost a retransmission waits out a backed-off RTO)."""
    run = incast(16, None, 60, queue_limit_pkts=64).run
    deliv = run.flows[:, lo.F_DELIV]
    assert deliv.min() > 0.5 * deliv.mean()
    assert figures(run)["jain"] > 0.98


def test_a_queue_deeper_than_every_window_drops_nothing():
    f = incast(16, None, 5, queue_limit_pkts=300, max_window_pkts=16).figures
    assert f["drops"] == 0 and f["retx_mb"] == 0 and f["timeouts"] == 0
    assert f["line_frac"] > 0.99 and f["jain"] > 0.999


@pytest.mark.parametrize("gbps", [0.05, 1.0])
def test_a_tail_loss_waits_for_the_rto_at_any_link_rate(gbps):
    """Two senders of 12 packets into a 2-packet queue: some flow loses its
    tail with too few packets after it for three duplicate ACKs, and
    finishes one RTO (rto_min + srtt) later, whatever the link rate."""
    for rto_ms in (200, 50):
        f = incast(2, 12 * 1448, 5, queue_limit_pkts=2, link_gbps=gbps,
                   rto_min_ms=rto_ms).figures
        assert f["timeouts"] >= 1 and f["completion_us"] is not None
        assert rto_ms * 1e3 <= f["completion_us"] < 1.3 * rto_ms * 1e3


@pytest.mark.parametrize("gbps", [0.05, 1.0, 400.0])
def test_time_parameters_are_held_in_slots_of_the_given_rate(gbps):
    p = preset("tcp").with_values(link_gbps=gbps)
    slot = slot_ps(p)
    P = parameters(p, slot, 1)
    assert P[lo.P_RTOMIN] * slot == pytest.approx(200e9, abs=slot)
    assert P[lo.P_RTOMAX] * slot == pytest.approx(120e12, abs=slot)


def test_kernel_tcp_is_refused_on_a_lossless_fabric():
    lossless = dataclasses.replace(preset("tcp"), flow_control="pfc")
    with pytest.raises(ValueError, match="drop-tail switches"):
        simulate(lossless, single_switch(3), [(0, 1, 5)], 10)


def lone_sender(packets=1000):
    """A tcp sender's state with nothing yet sent, driven here by hand: its
    sends through kerneltcp.nic_transmit, its ACKs through on_ack."""
    p = preset("tcp").with_values(**LAB)
    S, _, _ = state(p, single_switch(2), [(0, 1, packets)], 1)
    return S


def send(S, t):
    tcp.nic_transmit(t, t % S[12].shape[0], 0, S)


def test_three_sacks_start_fast_recovery_which_resends_the_hole_once():
    S = lone_sender()
    FL = S[1]
    for t in range(10):
        send(S, t)
    assert FL[0, lo.F_TX] == 10 and FL[0, lo.F_SNDMAX] == 10   # IW10
    for k in (1, 2):                        # packet 0 lost: 1 and 2 SACKed
        tcp.on_ack(20 + k, 0, 0, k, S)
    assert FL[0, lo.F_STATE] == lo.TS_OPEN and FL[0, lo.F_CWND] == 10
    tcp.on_ack(23, 0, 0, 3, S)              # the third: fast retransmit
    assert FL[0, lo.F_STATE] == lo.TS_RECOVERY and FL[0, lo.F_RECOVS] == 1
    assert FL[0, lo.F_SSTH] == 5 and FL[0, lo.F_CWND] == 5
    send(S, 24)                             # pipe 10 - 4 + 0 = 6 >= 5: hold
    assert FL[0, lo.F_TX] == 10
    tcp.on_ack(25, 0, 0, 4, S)              # pipe 5 - 0 ... still 5
    tcp.on_ack(26, 0, 0, 5, S)              # pipe 4 < 5: the hole goes first
    send(S, 27)
    assert FL[0, lo.F_RTX] == 1 and FL[0, lo.F_FRTX] == 1 and FL[0, lo.F_RETXOUT] == 1
    assert FL[0, lo.F_RTOT] == 27 + FL[0, lo.F_RTO]   # resending the head restarts the RTO
    tcp.on_ack(28, 0, 0, 6, S)
    send(S, 29)                             # the hole is not resent again: new data
    assert FL[0, lo.F_RTX] == 1 and FL[0, lo.F_SNDMAX] == 11
    tcp.on_ack(30, 0, 7, 0, S)              # the resent packet arrives: cum ACK 7
    assert FL[0, lo.F_RETXOUT] == 0 and FL[0, lo.F_SACKED] == 0
    for k in (7, 8, 9):
        tcp.on_ack(31 + k, 0, k + 1, k, S)
    tcp.on_ack(41, 0, 11, 10, S)            # snd_una passes the recovery's end
    assert FL[0, lo.F_STATE] == lo.TS_OPEN and FL[0, lo.F_CWND] == 5


def test_a_timeout_cuts_the_window_to_one_and_backs_off():
    S = lone_sender()
    FL = S[1]
    for t in range(10):
        send(S, t)
    rto = FL[0, lo.F_RTO]
    assert FL[0, lo.F_RTOT] == rto          # armed by the first send
    tcp.next_flow(rto, 0, S)                # expired: Linux's tcp_enter_loss
    assert FL[0, lo.F_TOUTS] == 1 and FL[0, lo.F_STATE] == lo.TS_LOSS
    assert FL[0, lo.F_CWND] == 1 and FL[0, lo.F_SSTH] == 5
    assert FL[0, lo.F_BACKOFF] == 1 and FL[0, lo.F_RTOT] == 3 * rto
    send(S, rto + 1)                        # one packet: the head again,
    send(S, rto + 2)                        # which restarts the (doubled) RTO
    assert FL[0, lo.F_RTX] == 1 and FL[0, lo.F_TX] == 11
    assert FL[0, lo.F_RTOT] == 3 * rto + 1
    tcp.next_flow(3 * rto + 1, 0, S)        # lost again: twice as long, no second cut
    assert FL[0, lo.F_BACKOFF] == 2 and FL[0, lo.F_RTOT] == 7 * rto + 1
    assert FL[0, lo.F_SSTH] == 5 and FL[0, lo.F_CWND] == 1


def test_the_scoreboards_agree_with_their_counts_mid_run():
    """After some seconds of the lab's incast, every sender's counts of SACKed
    packets and of retransmissions in flight are what its scoreboard holds,
    and every receiver's count of held packets what its bitmap holds."""
    p = preset("tcp").with_values(**LAB, queue_limit_pkts=16)
    S, _, slot = state(p, single_switch(17), [(i, 16, FOREVER) for i in range(16)], 3)
    kernel.seed(3)
    kernel.run(0, 8000, S)
    FL, RB, SB = S[1], S[18], S[19]
    W = SB.shape[1]
    assert FL[:, lo.F_RTX].sum() > 0 and FL[:, lo.F_HELD].sum() > 0
    for f in range(16):
        window = [SB[f, x % W] for x in range(FL[f, lo.F_SNDUNA], FL[f, lo.F_SNDMAX])]
        assert FL[f, lo.F_SACKED] == sum(1 for b in window if b & lo.SB_SACKED)
        assert FL[f, lo.F_RETXOUT] == sum(1 for b in window if b & lo.SB_RETX)
        assert FL[f, lo.F_HELD] == RB[f].sum()


def test_two_packets_arriving_together_each_win_the_last_place_half_the_time():
    """Which of two same-slot arrivals takes a drop-tail queue's last place
    is chance, not the links' order (kernel.arrivals under tcp)."""
    p = preset("tcp").with_values(**LAB, queue_limit_pkts=1)
    w = single_switch(3)
    S, _, _ = state(p, w, [(0, 2, FOREVER), (1, 2, FOREVER)], 1)
    kernel.seed(1)
    LK, FL, ND, PF = S[0], S[1], S[4], S[12]
    port = w.link_to(3, 2)
    for t in range(2000):
        PF[0, w.host_link[0]], PF[0, w.host_link[1]] = 0, 1
        kernel.arrivals(t, 0, S)
        LK[port, lo.L_QLEN], ND[3, lo.N_USED] = 0, 0
    assert FL[0, lo.F_DROPPED] + FL[1, lo.F_DROPPED] == 2000
    assert 900 < FL[0, lo.F_DROPPED] < 1100
