"""Hopper (sm90): the H100 and H200, in HGX H100/H200 servers. NCCL's sm90
search speeds and tuning rows; NVSwitch 3 reduces (NVLink SHARP, NVLS)."""

from topologies.gpus.generation import TUNING, Generation, Gpu, register


@register
class Hopper(Generation):
    name = "hopper"
    order = 2
    title = "Hopper (sm90)"
    intra_speeds = (60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3)
    inter_speeds = (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12)
    keeps_slow_channels = True
    doubles_across_servers = True
    tree_at_the_nics = False
    ll_max_one_server = 141.0
    per_channel_ring_ll128 = 36.7
    per_channel_tree_ll128 = (36.7, 36.7, 29.0)
    per_channel_tree = (38.7, 41.4, 36.0)
    per_channel_nvls_tree = (0, 57.7, 45.5)
    nvls_efficiency = 0.85
    collnet_efficiency = 0.85
    nvls_channels = (16, 16)
    sources = {"speeds": "NCCL 2.30.7's src/graph/search.cc (sm90SpeedArrayIntra, "
                         "sm90SpeedArrayInter)",
               "channels": "NCCL 2.30.7's src/graph/connect.cc (duplication, sm90 and later) "
                           "and src/enqueue.cc (NVLS's channels: 16 on sm90)",
               "tuner": f"{TUNING}: the sm90 rows (llMaxBws, perChMax*Bws, nvlsEfficiency; "
                        "CollNetDirect's 0.85)"}


# NVIDIA's datasheets: H100 SXM 989 TFLOP/s BF16 dense, 80 GB at 3.35 TB/s; H200 SXM
# 141 GB at 4.8 TB/s; NVLink 4, 18 links of 20.6 GB/s as NCCL's topo.h counts one
H100 = Gpu("H100", "hopper", 18, 20.6, True, 989.0, 80.0, 3.35)
H200 = Gpu("H200", "hopper", 18, 20.6, True, 989.0, 141.0, 4.8)
