"""CDNA 3 (gfx942): AMD Instinct MI300X and MI325X, collectives by RCCL
(sim/nccl/rccl.py prices them; NCCL's tuning rows do not apply). Seven
Infinity Fabric links, one to each peer of the 8: a full mesh, no switch
to reduce in. RCCL's search tries its own speeds (search.cc under HIP) and
duplicates channels as NCCL does from sm90."""

from topologies.gpus.generation import Generation, Gpu, register

# RCCL's per-channel search speeds, GB/s, fastest first (ROCm/rccl src/graph/search.cc)
RCCL_SPEEDS = (48, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12)


@register
class Cdna3(Generation):
    name = "cdna3"
    order = 4
    title = "CDNA 3 (gfx942)"
    library = "rccl"
    intra_speeds = RCCL_SPEEDS
    inter_speeds = RCCL_SPEEDS
    keeps_slow_channels = True
    doubles_across_servers = False
    tree_at_the_nics = False
    sources = {"speeds": "ROCm/rccl src/graph/search.cc (its speed arrays under HIP)",
               "links": "AMD's ROCm blog 'Understanding RCCL Bandwidth and xGMI Performance "
                        "on AMD Instinct MI300X' (each GPU linked to its 7 peers, 64 GB/s per "
                        "link and direction) and RCCL's src/graph/topo.h (GFX94X_XGMI_WIDTH "
                        "48: the link as RCCL counts it, after CRC and protocol; ROCm/rccl "
                        "issue 1210)"}


# 7 Infinity Fabric links, one to each peer of the 8, 64 GB/s per direction on the wire,
# 48 as RCCL counts it; 1,307.4 TFLOP/s BF16 dense; MI300X 192 GB at 5.3 TB/s, MI325X 256 GB
# at 6.0 TB/s (AMD's MI300X platform data sheet, 128 GB/s a link both ways, as ROCm/rccl
# issue 1210 quotes it; the MI325X product page as Vultr's ROCm docs quote it)
MI300X = Gpu("MI300X", "cdna3", 7, 48.0, False, 1307.4, 192.0, 5.3, "mesh")
MI325X = Gpu("MI325X", "cdna3", 7, 48.0, False, 1307.4, 256.0, 6.0, "mesh")
