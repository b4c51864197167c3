"""InfiniBand (NDR 400G, XDR 800G): credit-based lossless links (a sender
sends only into buffer the next hop has granted, so nothing is dropped and
nothing pauses a whole port), routes the subnet manager computes (static
fat-tree routing, destination mod k, by default; adaptive routing per
packet where the switches have it on), cut-through switches of about
0.1-0.2 us, and SHARP: the Quantum switches can reduce (NCCL's CollNet),
off unless the fabric file turns it on (it needs the SHARP daemon and
plugin on the cluster). NCCL's own constants were measured on it, so its
verbs transport adds nothing to them."""

from networks.technology import Technology, register


@register
class InfiniBand(Technology):
    name = "infiniband"
    order = 0
    title = "InfiniBand"
    summary = "infiniband: credit-based lossless, static D-mod-K routing (or adaptive), SHARP"
    family = "infiniband"
    transport = "InfiniBand verbs (NCCL's IB transport)"
    switch_latency_us = 0.13
    message_us = 0.0
    efficiency = 1.0
    routing = "dmodk"
    routings = ("dmodk", "adaptive", "spray", "single-path", "ecmp")
    qps_per_connection = 1
    lossless = "credits"
    congestion_control = "InfiniBand congestion control (FECN/BECN), off by default"
    sharp = False
    options = {"sharp": ((False, True), False)}
    packet_model = "infiniband"
    sources = {
        "switch_latency_us": "NVIDIA Quantum HDR/NDR switch systems: about 130 ns port to "
                             "port, cut-through (NVIDIA's QM8700 and QM9700 product briefs)",
        "message_us": "0: NCCL's tuner constants (src/graph/tuning.cc) are InfiniBand "
                      "verbs', and the model reproduces InfiniBand clusters' 8-byte times "
                      "with them (bench/reality_bench.py)",
        "routing": "OpenSM's fat-tree routing engine: routes by destination LID, D-mod-K "
                   "(Zahavi, 'D-Mod-K Routing Providing Non-Blocking Traffic for Shift "
                   "Permutations on Real Life Fat Trees', 2010)",
        "qps_per_connection": "NCCL_IB_QPS_PER_CONNECTION, default 1 (NCCL's environment "
                              "variables documentation)",
        "sharp": "NCCL's CollNet with the SHARP plugin (nccl-rdma-sharp-plugins)",
    }
