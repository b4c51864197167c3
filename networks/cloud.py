"""The transports clouds rent, each over the provider's own Ethernet:

- AWS EFA: the SRD protocol in the Nitro card, reached through the
  aws-ofi-nccl plugin; SRD sprays each flow's packets over many paths and
  delivers out of order, the plugin reorders; a message costs several
  microseconds more than InfiniBand verbs;
- Google Cloud's GPUDirect-TCPXO (A3 Mega): TCP offloaded so that payload
  moves from NIC to GPU memory directly, through the FasTrak NCCL plugin;
  per-message costs of a TCP stack and a receive data path.
"""

from networks.rocev2 import ETHERNET_SWITCH_SOURCE, ETHERNET_SWITCH_US
from networks.technology import Technology, register


@register
class Efa(Technology):
    name = "efa"
    order = 5
    title = "AWS EFA (SRD)"
    summary = "efa: AWS Elastic Fabric Adapter, SRD spraying over many paths"
    family = "ethernet"
    transport = "libfabric EFA provider (SRD) through aws-ofi-nccl"
    switch_latency_us = ETHERNET_SWITCH_US
    message_us = 20.0
    efficiency = 0.85
    routing = "spray"
    routings = ("spray",)
    lossless = "none"
    congestion_control = "SRD's own, in the Nitro card"
    reorders = True
    sources = {
        "switch_latency_us": ETHERNET_SWITCH_SOURCE,
        "routing": "Shalev et al., 'A Cloud-Optimized Transport Protocol for Elastic and "
                   "Scalable HPC', IEEE Micro 2020: SRD sprays packets over up to 64 paths",
        "message_us": "set between the published two-node 8-byte AllReduce times of p5 "
                      "(EFA v2, 72.4 us: aws-samples/awsome-distributed-training, nccl-tests "
                      "README) and p6-b200 (EFA v4, 54.5 us: dstackai/dstack pull 3961)",
        "efficiency": "'EFA v1 0.4Tbps (effective 340Gbps for all_reduce tests)' "
                      "(stas00/ml-engineering, network/README.md)",
    }


@register
class Tcpxo(Technology):
    name = "tcpxo"
    order = 6
    title = "GCP GPUDirect-TCPXO"
    summary = "tcpxo: Google Cloud's GPUDirect-TCPXO, offloaded TCP into GPU memory"
    family = "ethernet"
    transport = "GPUDirect-TCPXO through the FasTrak NCCL plugin"
    switch_latency_us = ETHERNET_SWITCH_US
    message_us = 48.0
    efficiency = 0.98
    routing = "ecmp"
    routings = ("ecmp",)
    qps_per_connection = 2
    lossless = "none"
    congestion_control = "TCP, in the NIC's offload"
    sources = {
        "switch_latency_us": ETHERNET_SWITCH_SOURCE,
        "message_us": "set on a published two-node 8-byte AllReduce on A3 Mega (123.5 us: "
                      "lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result)",
        "efficiency": "set on a published two-node 8 GiB AllGather on A3 Mega (188.54 GB/s "
                      "of 8 x 200G: dstackai/dstack, examples/clusters/gcp.md)",
    }
