"""What a GPU generation is to the NCCL model (sim/nccl/): the Generation
class, each field the model reads and where in NCCL's (or RCCL's) sources
its figure comes from, the registry of generations, and a GPU (Gpu): one
part of a generation as sold.

A generation is one architecture as the collective library tells them
apart (NCCL's sm70, sm80, sm90, sm100 rows; RCCL's gfx942, gfx950):

- the topology search (graph.py): the per-channel speeds it tries inside a
  server (`intra_speeds`, search.cc's speedArrayIntra / sm90SpeedArrayIntra
  / sm100SpeedArrayIntra) and through a NIC (`inter_speeds`); whether fast
  channels below 50 GB/s stay single where there are more than 4
  (`keeps_slow_channels`, connect.cc, sm90 and later); whether the
  execution channels double again across servers while a fast graph has
  fewer than 16 (`doubles_across_servers`, connect.cc, sm90 and later);
- NCCL's tuner (tuner.py; RCCL's generations leave these None: rccl.py
  prices those), tuning.cc's per-architecture rows: LL's cap on one server
  (`ll_max_one_server`, llMaxBws), the per-channel caps of Ring/LL128
  (`per_channel_ring_ll128`), Tree/LL128, Tree/Simple and NVLSTree by 1
  server, 2, more (perChMaxRingLL128Bws, perChMaxTreeLL128Bws,
  perChMaxTreeBws, perChMaxNVLSTreeBws), NVLS's efficiency on the
  NVSwitch (`nvls_efficiency`, nvlsEfficiency), CollNetDirect's factor
  (`collnet_efficiency`: 0.85 from sm90), and the channels NVLS runs on, on
  one server and on several (`nvls_channels`, enqueue.cc);
- what runs where the tuner expects otherwise (delivered.py): whether a
  tree across NVLink domains runs at its NICs' pace instead of its
  per-channel cap (`tree_at_the_nics`).

`REQUIRED` and `NCCL_TUNER` list the fields; registering a generation
that leaves one of them unset fails with one sentence naming it, so a new
generation's module cannot be half a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Dict, Optional, Tuple

from registries import Registry

SCALEUP = ("nvswitch", "mesh")
LIBRARIES = ("nccl", "rccl")

# what the model reads of every generation, and of every one NCCL (not RCCL) runs
REQUIRED = ("intra_speeds", "inter_speeds", "keeps_slow_channels", "doubles_across_servers",
            "tree_at_the_nics")
NCCL_TUNER = ("ll_max_one_server", "per_channel_ring_ll128", "per_channel_tree_ll128",
              "per_channel_tree", "per_channel_nvls_tree", "nvls_efficiency",
              "collnet_efficiency", "nvls_channels")

Speeds = Tuple[float, ...]
ByServers = Tuple[float, float, float]          # 1 server, 2 servers, more

# NCCL's search speeds, GB/s, fastest first, where a generation has no table
# of its own (search.cc's speedArrayIntra and speedArrayInter, sm89 and before)
NCCL_SPEEDS_INTRA: Speeds = (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3)
NCCL_SPEEDS_INTER: Speeds = (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2,
                             0.24, 0.12)
TUNING = "NCCL 2.30.7's src/graph/tuning.cc"


class Generation:
    """One GPU architecture and the collective library's figures for it;
    a subclass sets every field of REQUIRED (and of NCCL_TUNER where
    `library` is nccl) and is registered with `register`."""
    name: ClassVar[str] = ""                # as a Gpu's `arch` names it
    order: ClassVar[int] = 100              # its place in lists: oldest first
    title: ClassVar[str] = ""               # as the library's sources name it
    library: ClassVar[str] = "nccl"         # one of LIBRARIES: which runs its collectives
    intra_speeds: ClassVar[Optional[Speeds]] = None
    inter_speeds: ClassVar[Optional[Speeds]] = None
    keeps_slow_channels: ClassVar[Optional[bool]] = None
    doubles_across_servers: ClassVar[Optional[bool]] = None
    tree_at_the_nics: ClassVar[Optional[bool]] = None
    ll_max_one_server: ClassVar[Optional[float]] = None
    per_channel_ring_ll128: ClassVar[Optional[float]] = None
    per_channel_tree_ll128: ClassVar[Optional[ByServers]] = None
    per_channel_tree: ClassVar[Optional[ByServers]] = None
    per_channel_nvls_tree: ClassVar[Optional[ByServers]] = None
    nvls_efficiency: ClassVar[Optional[float]] = None
    collnet_efficiency: ClassVar[Optional[float]] = None
    nvls_channels: ClassVar[Optional[Tuple[int, int]]] = None   # on 1 server, on several
    sources: ClassVar[Dict[str, str]] = {}

    @property
    def rccl(self) -> bool:
        """Collectives by RCCL, NCCL's fork for AMD GPUs (sim/nccl/rccl.py)."""
        return self.library == "rccl"

    def reads(self) -> Tuple[str, ...]:
        """The fields the model reads of this generation."""
        return REQUIRED + (() if self.rccl else NCCL_TUNER)

    def missing(self) -> Tuple[str, ...]:
        """The fields the model reads that this generation leaves unset."""
        return tuple(f for f in self.reads() if getattr(self, f) is None)


def _complete(gen: Generation) -> None:
    """Refuse a generation of an unknown library or with a field unset."""
    if gen.library not in LIBRARIES:
        raise ValueError(f"GPU generation {gen.name}: library {gen.library!r} is none of "
                         f"{', '.join(LIBRARIES)}")
    if gen.missing():
        raise ValueError(f"GPU generation {gen.name} leaves unset what the NCCL model reads: "
                         f"{', '.join(gen.missing())}")


# the generations, oldest first
REGISTRY = Registry("GPU generation", "GPU generations", key=lambda g: (g.order, g.name),
                    check=_complete)
# class decorator: one instance of the class registered under its name
register = REGISTRY.register


@dataclass(frozen=True)
class Gpu:
    """One GPU as sold: its generation, its scale-up links (how many, GB/s
    per link as the library's topo.h counts one: 20.6 GB/s for NVLink4, the
    share of the 25 GB/s wire NCCL reaches) and where they go (`scaleup`:
    to NVSwitches, so any two GPUs of the domain meet at the whole NVLink
    rate, or straight to the other GPUs, a full mesh, AMD's Infinity Fabric:
    one link per peer, so a ring's hop gets one link), and whether its
    switch can reduce (NVLink SHARP, NVSwitch 3 and later)."""
    name: str
    arch: str                 # a registered generation's name: which tables apply
    nvlinks: int              # NVLink links to the NVSwitch
    link_gbytes: float        # GB/s per link and direction, as NCCL counts one
    nvls: bool                # the NVSwitch reduces (NVLink SHARP)
    bf16_tflops: float = 0.0  # dense BF16 tensor-core peak, TFLOP/s (what MFU divides by)
    memory_gbytes: float = 0.0  # HBM capacity, GB (1e9 bytes, as sold)
    hbm_tbytes: float = 0.0   # HBM bandwidth, TB/s
    scaleup: str = "nvswitch"  # one of SCALEUP: links to switches, or a full mesh

    @property
    def generation(self) -> Generation:
        """Its generation, whose tables the NCCL model reads."""
        return REGISTRY.find(self.arch)

    @property
    def nvlink_gbytes(self) -> float:
        """A GPU's scale-up bandwidth, all its links, per direction (GB/s)."""
        return self.nvlinks * self.link_gbytes

    @property
    def mesh(self) -> bool:
        """Each link goes straight to one peer GPU: a channel's hop gets one link."""
        return self.scaleup == "mesh"

    @property
    def rccl(self) -> bool:
        """Collectives by RCCL, NCCL's fork for AMD GPUs."""
        return self.generation.rccl
