"""Volta (sm70): the V100, in the DGX-1. NCCL's generic search speeds and
its sm70 tuning rows; no NVLink SHARP."""

from topologies.gpus.generation import (NCCL_SPEEDS_INTER, NCCL_SPEEDS_INTRA, TUNING,
                                        Generation, Gpu, register)


@register
class Volta(Generation):
    name = "volta"
    order = 0
    title = "Volta (sm70)"
    intra_speeds = NCCL_SPEEDS_INTRA
    inter_speeds = NCCL_SPEEDS_INTER
    keeps_slow_channels = False
    doubles_across_servers = False
    tree_at_the_nics = False
    ll_max_one_server = 39.0
    per_channel_ring_ll128 = 20.0
    per_channel_tree_ll128 = (20, 20, 20)
    per_channel_tree = (26.5, 18.5, 10.0)
    per_channel_nvls_tree = (26.5, 18.5, 10.0)
    nvls_efficiency = 0.0
    collnet_efficiency = 1.0
    nvls_channels = (24, 32)
    sources = {"speeds": "NCCL 2.30.7's src/graph/search.cc (speedArrayIntra, speedArrayInter)",
               "tuner": f"{TUNING}: the sm70 rows (llMaxBws, perChMax*Bws, nvlsEfficiency)"}


# NVIDIA's V100 SXM2 32GB datasheet: 125 TFLOP/s tensor, 900 GB/s; NVLink 2, 6 links
V100 = Gpu("V100", "volta", 6, 20.0, False, 125.0, 32.0, 0.9)
