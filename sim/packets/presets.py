"""The six network technologies the packet engine knows, each parameter with
its value and where the value comes from, kept apart from the engine so the
registry of technologies (`networks/`, being built with the same names) can
take them over as they are.

`on_link` gives what a preset takes to run on a fabric's links instead
(their rate, the payload their MTU leaves, their drop-tail queue where the
preset has one): `run_topology.py FABRIC --engine sim --incast N`.

A value marked "modelling choice" is ours, not a vendor's or a paper's: the
source says why it was picked. Where a source is a secondary web page quoting
a vendor, the source says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, Tuple

LOSSY, PFC, CREDITS = "drop-tail", "pfc", "credits"
ECMP, DMODK, ADAPTIVE = "ecmp-per-flow", "d-mod-k", "adaptive-per-packet"


@dataclass(frozen=True)
class Param:
    value: float
    source: str


def _p(value, source):
    return Param(float(value), source)


ETH = {
    "link_gbps": _p(400, "400GBASE (IEEE 802.3bs); the link speed issue 35 asks for"),
    "mtu_bytes": _p(4096, "RoCE path MTU 4096 (IBTA RoCEv2 Annex A17 allows up to 4096)"),
    "header_bytes": _p(82, "Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4"
                           " + preamble/SFD 8 + inter-frame gap 12 (IEEE 802.3, IBTA A17)"),
    "switch_latency_ns": _p(600, "Broadcom Tomahawk 5 / NVIDIA Spectrum-4 class 51.2T switches:"
                                 " about 0.5-0.8 us port to port, cut-through (vendors' product"
                                 " briefs); 0.6 us taken, as the technology registry"
                                 " networks/rocev2.py takes it"),
    "host_cable_m": _p(3, "modelling choice: copper DAC NIC-to-leaf within a rack"),
    "fabric_cable_m": _p(30, "modelling choice: optical leaf-to-spine across a row"),
    "ns_per_m": _p(5, "light in fibre/copper at about 2/3 c: 5 ns per metre"),
    "buffer_per_port_bytes": _p(1 << 20, "NVIDIA Spectrum-4 (SN5600): 128 MB shared packet"
                                         " buffer for 51.2 Tb/s = 128 x 400G ports, so"
                                         " 1 MB per 400G port (secondary page quoting the"
                                         " datasheet: probsee.com/p/NVIDIA_Spectrum_SN5600)"),
    "lossy_dt_alpha": _p(1.0, "dynamic threshold (Choudhury & Hahne, 1998): an egress queue"
                              " may grow to alpha x free buffer; alpha 1 is a modelling choice"),
    "pfc_dt_alpha": _p(0.125, "PFC XOFF by dynamic threshold on the ingress port's share;"
                              " alpha 1/8 is a modelling choice; headroom for the in-flight"
                              " bytes of the pause loop is reserved apart, so nothing drops"),
    "pfc_hysteresis_pkts": _p(2, "modelling choice: XON two MTUs below XOFF"),
    "rto_us": _p(500, "modelling choice: an RC QP's local ACK timeout is 4.096 us x 2^n"
                      " (IBTA; NCCL_IB_TIMEOUT sets n); n = 20 would be 4.3 s and leave"
                      " every tail loss unrecovered inside a 10 ms run"),
    "nak_interval_us": _p(500, "the ns-3 RDMA model HPCC's simulator and its derivatives use"
                               " (RdmaHw attribute NACK Generation Interval, 500 us): a"
                               " receiver re-sends a NAK for the same gap no sooner than this"),
    "nic_feedback_ns": _p(1000, "modelling choice: a NIC's time to turn a CNP or NAK round"),
}

DCQCN = {
    # The DCQCN paper's switch thresholds (Kmin 5 KB, Kmax 100-200 KB, Pmax 1%)
    # were set for 40G; at 400G they mark at one or two MTUs of queue and the
    # rates collapse (measured: 4 Gbit/s per flow in the 16:1 incast). The
    # thresholds HPCC's DCQCN baseline scales with link speed are used instead.
    "ecn_kmin_bytes": _p(400e3, "HPCC's ns-3 DCQCN config (KMIN_MAP: 400 KB at 100 Gb/s,"
                                " its highest rate; github alibaba-edu/High-Precision-"
                                "Congestion-Control mix/config.txt)"),
    "ecn_kmax_bytes": _p(1600e3, "same config, KMAX_MAP: 1600 KB at 100 Gb/s"),
    "ecn_pmax": _p(0.2, "same config, PMAX_MAP: 0.2"),
    "g": _p(1 / 256, "alpha gain g = 1/256 (DCQCN, Zhu et al. SIGCOMM 2015; its fluid-model"
                     " parameters and the authors' ns-3 code as in github sc20anonymous/"
                     "DCQCN-validation)"),
    "alpha_timer_us": _p(55, "alpha update period 55 us (DCQCN; htsim dcqcn.cpp"
                             " _cc_update_period)"),
    # The reaction point runs the paper's algorithm with its timers, but with
    # the additive and hyper increase steps scaled to the link as htsim (the
    # UEC's simulator) does: the paper's 40 Mb/s step, sized for 40G, takes
    # milliseconds to win back a halving at 400G. Two other settings were
    # tried and are not used: the paper's steps (rates collapse to ~4 Gbit/s
    # a flow in the 16:1 incast and stay there), and ConnectX's defaults
    # (CNPs every 4 us, target rate kept high: the 16:1 incast swings
    # between idle and a full buffer).
    "rate_timer_us": _p(55, "rate-increase timer T = 55 us (DCQCN; htsim dcqcn.cpp"
                            " _cc_update_period)"),
    "byte_counter_bytes": _p(10e6, "byte counter B = 10 MB (DCQCN; htsim DCQCNSrc::_B)"),
    "fast_recovery_steps": _p(5, "F = 5 (DCQCN; htsim DCQCNSrc::_F)"),
    "rate_ai_mbps": _p(20_000, "R_AI = line rate / 20 (htsim DCQCNSrc: _RAI = rate / 20)"),
    "rate_hai_mbps": _p(40_000, "R_HAI = line rate / 10 (htsim DCQCNSrc: _RHAI = rate / 10)"),
    "cnp_interval_us": _p(50, "NP sends at most one CNP per flow per 50 us (DCQCN; htsim"
                              " DCQCNSink::_cnp_interval)"),
    "clamp_target_rate": _p(1, "every CNP sets RT = RC (the DCQCN paper's reaction point,"
                               " and htsim's); ConnectX can keep RT (clamp_tgt_rate false)"),
    "min_rate_mbps": _p(400, "line rate / 1000 (htsim DCQCNSrc: _min_rate = rate / 1000)"),
}

IB = {
    "link_gbps": _p(400, "InfiniBand NDR 4x (400 Gb/s)"),
    "mtu_bytes": _p(4096, "InfiniBand MTU 4096 (IBTA)"),
    "header_bytes": _p(26, "LRH 8 + BTH 12 + ICRC 4 + VCRC 2 (IBTA); 64b/66b coding is"
                           " already outside the 400 Gb/s data rate"),
    "switch_latency_ns": _p(130, "NVIDIA Quantum HDR/NDR switch systems: about 130 ns port to"
                                 " port, cut-through (NVIDIA's QM8700 and QM9700 product briefs;"
                                 " as networks/infiniband.py takes it)"),
    "credit_margin_pkts": _p(8, "modelling choice: a port's receive buffer per VL is the"
                                " credit loop's bytes in flight plus 8 MTUs (IBTA leaves the"
                                " size to the vendor; NVIDIA publishes none)"),
}


# Kernel TCP over ordinary Ethernet (the tcp preset): NCCL's socket transport,
# as the technology registry's networks/tcp.py. Its switches are the other
# Ethernet presets' (latency, cables, shared buffer); its frames are TCP's.
TCP = {
    "link_gbps": ETH["link_gbps"],
    "mtu_bytes": _p(1448, "TCP payload per packet (MSS) on a 1500-byte IP MTU: 1500 - IPv4 20"
                          " - TCP 20 - timestamps option 12 (RFC 9293, RFC 7323; Linux sends"
                          " timestamps by default)"),
    "header_bytes": _p(90, "TCP 32 + IPv4 20 + Ethernet 14 + FCS 4 + preamble/SFD 8 +"
                           " inter-frame gap 12 (IEEE 802.3): a 1538-byte wire frame; the lab's"
                           " HTB shaper counts 66 (no FCS, preamble or gap)"),
    **{k: ETH[k] for k in ("switch_latency_ns", "host_cable_m", "fabric_cable_m", "ns_per_m",
                           "buffer_per_port_bytes", "lossy_dt_alpha")},
    "queue_limit_pkts": _p(0, "0: the switch's egress is the shared buffer's dynamic threshold"
                              " (lossy_dt_alpha); N > 0: a static drop-tail FIFO of N packets,"
                              " the lab's pfifo limit N (modelling choice, for the lab's"
                              " comparison)"),
    "nic_feedback_ns": _p(10_000, "modelling choice: the receiving kernel's time from a"
                                  " packet to its ACK on the wire, about 10 us (kernel TCP's"
                                  " receive path is 10-30 us one way: networks/tcp.py's"
                                  " message_us)"),
    "initial_cwnd_pkts": _p(10, "initial window IW10 (RFC 6928; Linux TCP_INIT_CWND = 10)"),
    "max_window_pkts": _p(1024, "modelling choice: the receive window and the cap on cwnd,"
                                " in packets (the receiver's ring bitmap); 1.5 MB of payload,"
                                " under Linux's default tcp_rmem maximum of 6 MB"),
    "dupthresh_pkts": _p(3, "duplicate ACKs (SACKed packets) before fast retransmit"
                            " (RFC 5681, RFC 6675 DupThresh; Linux tcp_reordering = 3)"),
    "rto_min_ms": _p(200, "Linux TCP_RTO_MIN = HZ / 5 = 200 ms (RFC 6298 asks for 1 s)"),
    "rto_max_ms": _p(120_000, "Linux TCP_RTO_MAX = 120 s: the backed-off RTO's cap"),
    "rto_linux": _p(1, "1: RTO = srtt + max(4 rttvar, rto_min), Linux's tcp_set_rto (its"
                       " rttvar is floored at rto_min); 0: RFC 6298's max(rto_min, srtt +"
                       " 4 rttvar)"),
}

RDMA, KERNEL_TCP = "rdma", "kernel-tcp"


@dataclass(frozen=True)
class Preset:
    """One technology: the switch queue discipline, the routing, the NIC's
    transport and congestion control, and every number they take."""
    name: str
    flow_control: str            # LOSSY, PFC or CREDITS
    routing: str                 # ECMP, DMODK or ADAPTIVE
    ecn: bool                    # switches mark ECN (RED on the egress queue)
    dcqcn: bool                  # NICs react to CNPs (DCQCN reaction point)
    reorder_at_nic: bool         # the receiver places out-of-order packets
    params: Dict[str, Param] = field(default_factory=dict)
    summary: str = ""
    transport: str = RDMA        # the NIC's transport: RDMA (transports.py) or KERNEL_TCP
    # of header_bytes, those inside the packet a link's MTU limits (IP and up):
    # what a fabric's MTU leaves for payload is the MTU less these (on_link)
    headers_in_mtu: int = 0

    def value(self, key: str) -> float:
        return self.params[key].value

    def with_values(self, **values: float) -> "Preset":
        """The same preset with some numbers changed (for experiments)."""
        unknown = sorted(set(values) - set(self.params))
        if unknown:
            raise ValueError(f"preset {self.name} has no parameter {unknown[0]!r}; it has "
                             f"{', '.join(sorted(self.params))}")
        params = dict(self.params)
        params.update({k: Param(float(v), "overridden") for k, v in values.items()})
        return replace(self, params=params)


def _eth(**extra):
    return {**ETH, **extra}


ROCE_IN_MTU = 44      # IPv4 20 + UDP 8 + BTH 12 + ICRC 4: the RoCEv2 packet's own headers
TCP_IN_MTU = 52       # IPv4 20 + TCP 20 + timestamps option 12, as mtu_bytes' source counts


PRESETS: Dict[str, Preset] = {
    "roce-lossy": Preset("roce-lossy", LOSSY, ECMP, False, False, False, _eth(),
                         "RoCEv2 without PFC: drop-tail switches, go-back-N on a NAK or"
                         " timeout, ECMP per flow (one path per QP)",
                         headers_in_mtu=ROCE_IN_MTU),
    "roce-pfc": Preset("roce-pfc", PFC, ECMP, False, False, False, _eth(),
                       "RoCEv2 with PFC and no ECN: lossless, pauses spread upstream",
                       headers_in_mtu=ROCE_IN_MTU),
    "roce-dcqcn": Preset("roce-dcqcn", PFC, ECMP, True, True, False, _eth(**DCQCN),
                         "RoCEv2 with PFC, ECN marking (RED Kmin/Kmax/Pmax) and DCQCN",
                         headers_in_mtu=ROCE_IN_MTU),
    "infiniband": Preset("infiniband", CREDITS, DMODK, False, False, False,
                         {**{k: ETH[k] for k in ("host_cable_m", "fabric_cable_m",
                                                 "ns_per_m", "nic_feedback_ns")}, **IB},
                         "InfiniBand: credit-based link-level flow control, static"
                         " destination-mod-k routing, IB congestion control off (default)"),
    "spectrum-x": Preset("spectrum-x", PFC, ADAPTIVE, True, True, True, _eth(**DCQCN),
                         "Spectrum-X: RoCE with PFC, per-packet adaptive routing to the"
                         " least-loaded egress, out-of-order placement at the NIC; its"
                         " telemetry-based congestion control is proprietary and modelled"
                         " here as DCQCN with the roce-dcqcn numbers",
                         headers_in_mtu=ROCE_IN_MTU),
    "tcp": Preset("tcp", LOSSY, ECMP, False, False, False, dict(TCP),
                  "kernel TCP (NCCL's socket transport): drop-tail switches, ECMP per flow,"
                  " no ECN; Reno congestion control with SACK recovery and Linux's RTO",
                  KERNEL_TCP, headers_in_mtu=TCP_IN_MTU),
}
NAMES: Tuple[str, ...] = tuple(PRESETS)


def preset(name: str) -> Preset:
    """The preset called `name`; a one-sentence error names the ones there are."""
    if name not in PRESETS:
        raise ValueError(f"unknown network preset {name!r}: the presets are "
                         f"{', '.join(NAMES)}")
    return PRESETS[name]


# the path MTUs an RDMA transport can take (IBTA: RoCEv2's and InfiniBand's alike)
RDMA_MTUS = (256, 512, 1024, 2048, 4096)
# numbers sized at the preset's own link rate that their sources give as a
# fraction of the line rate (DCQCN's steps and floor: htsim's rate / 20,
# rate / 10, rate / 1000), so they follow the link on another rate
PER_LINE_RATE = ("rate_ai_mbps", "rate_hai_mbps", "min_rate_mbps")


def payload_in_mtu(p: Preset, mtu: int) -> int:
    """A packet's payload on a link of this MTU (the IP packet's largest):
    kernel TCP's MSS, the MTU less its headers; an RDMA transport's path
    MTU, the largest of RDMA_MTUS its headers leave room for. ValueError,
    one sentence, when the MTU leaves none."""
    room = mtu - p.headers_in_mtu
    if p.transport == KERNEL_TCP:
        payload = room
    else:
        payload = max((m for m in RDMA_MTUS if m <= room), default=0)
    if payload <= 0:
        raise ValueError(f"an MTU of {mtu} bytes leaves the {p.name} preset no payload: its "
                         f"headers take {p.headers_in_mtu} and its smallest packet is "
                         f"{RDMA_MTUS[0] if p.transport != KERNEL_TCP else 1} bytes")
    return payload


def on_link(name: str, link_gbps: float, mtu: int, queue_packets: int = 0) -> Dict[str, float]:
    """What `Preset.with_values` takes for the preset `name` to run on links
    of this rate and MTU: the rate, the payload the MTU leaves
    (payload_in_mtu; header_bytes stays the preset's), the numbers given as
    a share of the line rate scaled to it (PER_LINE_RATE), and where the
    preset has a static drop-tail queue (queue_limit_pkts) the link's
    `queue_packets`. The switch's buffer, thresholds and timers stay the
    preset's."""
    p = preset(name)
    values = {"link_gbps": link_gbps, "mtu_bytes": payload_in_mtu(p, mtu)}
    scale = link_gbps / p.value("link_gbps")
    values.update({k: p.value(k) * scale for k in PER_LINE_RATE if k in p.params})
    if "queue_limit_pkts" in p.params and queue_packets:
        values["queue_limit_pkts"] = queue_packets
    return values
