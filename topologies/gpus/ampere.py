"""Ampere (sm80): the A100, in the DGX A100. NCCL's generic search speeds
and its sm80 tuning rows; no NVLink SHARP."""

from topologies.gpus.generation import (NCCL_SPEEDS_INTER, NCCL_SPEEDS_INTRA, TUNING,
                                        Generation, Gpu, register)


@register
class Ampere(Generation):
    name = "ampere"
    order = 1
    title = "Ampere (sm80)"
    intra_speeds = NCCL_SPEEDS_INTRA
    inter_speeds = NCCL_SPEEDS_INTER
    keeps_slow_channels = False
    doubles_across_servers = False
    tree_at_the_nics = False
    ll_max_one_server = 87.7
    per_channel_ring_ll128 = 20.0
    per_channel_tree_ll128 = (20, 20, 20)
    per_channel_tree = (24.0, 23.6, 17.8)
    per_channel_nvls_tree = (24.0, 23.6, 17.8)
    nvls_efficiency = 0.0
    collnet_efficiency = 1.0
    nvls_channels = (24, 32)
    sources = {"speeds": "NCCL 2.30.7's src/graph/search.cc (speedArrayIntra, speedArrayInter)",
               "tuner": f"{TUNING}: the sm80 rows (llMaxBws, perChMax*Bws, nvlsEfficiency)"}


# NVIDIA's A100 80GB SXM datasheet: 312 TFLOP/s BF16 dense, 2,039 GB/s; NVLink 3, 12 links
A100 = Gpu("A100", "ampere", 12, 20.0, False, 312.0, 80.0, 2.039)
