"""Blackwell (sm100): the B200 (HGX B200, GB200 NVL72) and Blackwell Ultra's
B300 (GB300 NVL72). NCCL's sm100 search speeds and tuning rows; NVLink 5
and NVSwitch reduce (NVLS). A tree across NVLink domains runs at its
NICs' pace, above the tuner's per-channel cap (sim/nccl/delivered.py:
NVIDIA/nccl issue 1801)."""

from topologies.gpus.generation import TUNING, Generation, Gpu, register
from topologies.gpus.hopper import Hopper


@register
class Blackwell(Generation):
    name = "blackwell"
    order = 3
    title = "Blackwell (sm100)"
    intra_speeds = (90, 80, 70, 60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3)
    # NCCL's sm100 table starts at 96; below that it is taken as Hopper's
    inter_speeds = (96, 90, 80, 70, 60) + Hopper.inter_speeds
    keeps_slow_channels = True
    doubles_across_servers = True
    tree_at_the_nics = True
    ll_max_one_server = 282.0
    per_channel_ring_ll128 = 40.0
    per_channel_tree_ll128 = (55.6, 31.67, 20.0)
    per_channel_tree = (70.0, 42.8, 24.0)
    per_channel_nvls_tree = (0, 96.0, 80.0)
    nvls_efficiency = 0.74
    collnet_efficiency = 0.85
    nvls_channels = (24, 32)
    sources = {"speeds": "NCCL 2.30.7's src/graph/search.cc (sm100SpeedArrayIntra, "
                         "sm100SpeedArrayInter)",
               "channels": "NCCL 2.30.7's src/graph/connect.cc and src/enqueue.cc",
               "tuner": f"{TUNING}: the sm100 rows (llMaxBws, perChMax*Bws, nvlsEfficiency; "
                        "CollNetDirect's 0.85)",
               "tree_at_the_nics": "NVIDIA/nccl issue 1801: GB200 NVL72 partitions across "
                                   "racks, NCCL 2.27.3 (sim/nccl/delivered.py)"}


# HGX B200 datasheet: 2.25 PFLOP/s BF16 dense per GPU, 180 GB at 7.7 TB/s; NVLink 5, 18 links
B200 = Gpu("B200", "blackwell", 18, 40.1, True, 2250.0, 180.0, 7.7)
# Blackwell Ultra in GB300: NVLink 5 as B200's (18 links, 1.8 TB/s both ways); 2.5 PFLOP/s
# BF16 dense, 279 GB, 8 TB/s (Verda's per-GPU table of NVIDIA's figures, verda.com/blog/
# gb300-nvl72-architecture)
B300 = Gpu("B300", "blackwell", 18, 40.1, True, 2500.0, 279.0, 8.0)
