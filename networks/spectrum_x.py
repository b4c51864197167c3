"""NVIDIA Spectrum-X: RoCEv2 on Spectrum-4 switches that route every packet
to the least-loaded of the equal-cost ports (adaptive routing), with the
BlueField-3 SuperNIC putting the out-of-order packets back in place
(direct data placement) and its own telemetry-based congestion control; PFC
stays on as a backstop. A flow's packets thus spread over every path: the
model takes that as an even split."""

from networks.rocev2 import ETHERNET_SWITCH_SOURCE, ETHERNET_SWITCH_US
from networks.technology import Technology, register


@register
class SpectrumX(Technology):
    name = "spectrum-x"
    order = 3
    title = "Spectrum-X"
    summary = "spectrum-x: RoCE with per-packet adaptive routing, reordering at the NIC"
    family = "ethernet"
    transport = "RDMA verbs over RoCEv2 with direct data placement (BlueField-3 SuperNIC)"
    switch_latency_us = ETHERNET_SWITCH_US
    routing = "spray"
    routings = ("spray", "ecmp", "single-path")
    lossless = "pfc"
    congestion_control = "Spectrum-X congestion control (in-band telemetry from the switches)"
    ecn = True
    reorders = True
    packet_model = "spectrum-x"
    sources = {
        "switch_latency_us": ETHERNET_SWITCH_SOURCE,
        "routing": "NVIDIA Spectrum-X white paper: per-packet adaptive routing over all "
                   "equal-cost paths, reordering by the SuperNIC; NVIDIA states about 95% "
                   "effective bandwidth at scale where standard Ethernet gets about 60%",
        "message_us": "0: the same verbs and ConnectX-class NIC as InfiniBand",
    }
