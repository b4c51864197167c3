"""RoCEv2 on an Ethernet fabric, as most AI clusters run it: lossless by
priority flow control (PFC: a congested switch port pauses its upstream
neighbour's whole priority), with ECN marking at the switches' queues and
DCQCN rate control at the NICs to keep PFC rare; ECMP hashes each queue
pair's UDP flow (its source port) onto one path, so the entropy is NCCL's
QPs per connection. Ethernet switches forward in about 0.6 us port to
port. `roce-lossy` is the same without PFC: a full queue drops, and the NIC
retransmits."""

from networks.technology import Technology, register

ETHERNET_SWITCH_US = 0.6
ETHERNET_SWITCH_SOURCE = ("Broadcom Tomahawk 5 / NVIDIA Spectrum-4 class 51.2T switches: "
                          "port-to-port latency of about 0.5-0.8 us cut-through (vendors' "
                          "product briefs); 0.6 us taken")
ROCE_SOURCES = {
    "switch_latency_us": ETHERNET_SWITCH_SOURCE,
    "message_us": "0: RoCE is the same verbs on the same ConnectX NICs as InfiniBand; NCCL "
                  "runs its IB transport over it",
    "routing": "ECMP on the 5-tuple: RoCEv2 is UDP to port 4791 with the queue pair in the "
               "source port (Gangidi et al., 'RDMA over Ethernet for Distributed AI Training "
               "at Meta Scale', SIGCOMM 2024)",
    "qps_per_connection": "NCCL_IB_QPS_PER_CONNECTION, default 1; Meta raised it for "
                          "entropy (SIGCOMM 2024)",
    "lossless": "IEEE 802.1Qbb priority flow control",
    "congestion_control": "DCQCN (Zhu et al., 'Congestion Control for Large-Scale RDMA "
                          "Deployments', SIGCOMM 2015)",
}


@register
class Roce(Technology):
    name = "roce"
    order = 1
    title = "RoCEv2"
    summary = "roce: RoCEv2, lossless by PFC with ECN/DCQCN, ECMP over queue pairs"
    family = "ethernet"
    transport = "RDMA verbs over RoCEv2 (NCCL's IB transport)"
    switch_latency_us = ETHERNET_SWITCH_US
    routing = "ecmp"
    lossless = "pfc"
    congestion_control = "DCQCN"
    ecn = True
    options = {"pfc": ((True, False), True), "ecn": ((True, False), True),
               "qps_per_connection": (tuple(range(1, 17)), 1)}
    sources = ROCE_SOURCES

    def packet_preset(self, settings=None) -> str:
        """roce-dcqcn; roce-pfc without ECN; roce-lossy without PFC."""
        given = {k: v for k, (_, v) in self.options.items()}
        given.update(self.settings if settings is None else settings)
        if not given["pfc"]:
            return "roce-lossy"
        return "roce-dcqcn" if given["ecn"] else "roce-pfc"


@register
class RoceLossy(Technology):
    name = "roce-lossy"
    order = 2
    title = "RoCEv2, lossy"
    summary = "roce-lossy: RoCEv2 without PFC: drops and the NIC's retransmission"
    family = "ethernet"
    transport = "RDMA verbs over RoCEv2 (NCCL's IB transport)"
    switch_latency_us = ETHERNET_SWITCH_US
    routing = "ecmp"
    lossless = "none"
    congestion_control = "DCQCN on ECN marks; loss recovery by the NIC"
    ecn = True
    options = {"ecn": ((True, False), True), "qps_per_connection": (tuple(range(1, 17)), 1)}
    packet_model = "roce-lossy"
    sources = {**ROCE_SOURCES, "lossless": "none: a full queue drops (lossy RoCE, as some "
                                           "hyperscalers run it with NICs that recover "
                                           "selectively)"}
