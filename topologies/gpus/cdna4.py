"""CDNA 4 (gfx950): AMD Instinct MI355X, collectives by RCCL, taken as
gfx94x (CDNA 3: its own tuning rows are not modelled): the same speeds, the
same Infinity Fabric mesh of 7 links as RCCL counts them."""

from topologies.gpus.cdna3 import Cdna3
from topologies.gpus.generation import Generation, Gpu, register


@register
class Cdna4(Generation):
    name = "cdna4"
    order = 5
    title = "CDNA 4 (gfx950)"
    library = "rccl"
    intra_speeds = Cdna3.intra_speeds
    inter_speeds = Cdna3.inter_speeds
    keeps_slow_channels = True
    doubles_across_servers = False
    tree_at_the_nics = False
    sources = {"speeds": "taken as gfx942's (topologies/gpus/cdna3.py)",
               "links": "RCCL's src/graph/topo.h counts a gfx950 link as 48 GB/s "
                        "(GFX95X_XGMI_WIDTH), as on gfx942"}


# AMD Instinct MI355X: 288 GB of HBM3E at 8 TB/s (AMD's launch figures as The Register,
# 2025-06-12, and Boston's MI355X page quote them); 2,516.6 TFLOP/s BF16 dense, half its
# 5 PFLOP/s dense FP8 (the ISSCC 2026 paper as reported; AMD's data sheet was not found here:
# the BF16 figure is the FP8 one halved, as on every CDNA 3 and 4 part). Still 7 Infinity
# Fabric links, one per peer; about 153.6 GB/s a link both ways on the wire, and RCCL's topo.h
# counts one as 48 GB/s (GFX95X_XGMI_WIDTH), as on gfx942, so the model prices its mesh as
# MI300X's.
MI355X = Gpu("MI355X", "cdna4", 7, 48.0, False, 2516.6, 288.0, 8.0, "mesh")
