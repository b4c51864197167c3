"""Ethernet with NCCL's socket transport: every message goes through the
hosts' kernel TCP stacks (NCCL_NET=Socket, or no RDMA NIC at all), copied
by the CPU on both sides, over an ordinary ECMP fabric. Each connection
opens NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS sockets, the flows ECMP
hashes. A message costs tens of microseconds more than over verbs, and one
NIC's bandwidth is what the proxy threads can copy."""

from networks.rocev2 import ETHERNET_SWITCH_SOURCE, ETHERNET_SWITCH_US
from networks.technology import Technology, register


@register
class SocketTcp(Technology):
    name = "tcp"
    order = 4
    title = "Ethernet, NCCL sockets (TCP)"
    summary = "tcp: NCCL's socket transport over kernel TCP on ECMP Ethernet"
    family = "ethernet"
    transport = "NCCL's socket transport over kernel TCP"
    switch_latency_us = ETHERNET_SWITCH_US
    message_us = 20.0
    efficiency = 0.9
    nic_gbytes_cap = 4.0
    routing = "ecmp"
    qps_per_connection = 2
    lossless = "none"
    congestion_control = "the kernel's TCP (CUBIC by default)"
    packet_model = "tcp"
    sources = {
        "switch_latency_us": ETHERNET_SWITCH_SOURCE,
        "message_us": "kernel TCP's send and receive path plus NCCL's proxy thread, 10-30 "
                      "us one way (kentino.com, 'Latency dissection'); checked on a published "
                      "8-byte Broadcast over sockets (nccl-tests issue 82)",
        "efficiency": "TCP's headers and acknowledgements on a NIC that is not CPU-bound",
        "nic_gbytes_cap": "what the socket proxy threads copy through the kernel: 'about 4 "
                          "GB/s' where NCCL falls back to TCP on GCP's A3 Mega (NVIDIA/aicr "
                          "docs, PR 1565); 'the NCCL bandwidth will be the minimum speed of the "
                          "sockets multiplied by the number of sockets' (nccl-tests issue 83)",
        "qps_per_connection": "sockets per connection: NCCL_SOCKET_NTHREADS x "
                              "NCCL_NSOCKS_PERTHREAD (NCCL's environment documentation)",
    }
