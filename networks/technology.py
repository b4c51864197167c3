"""What a network technology is: the Technology class, its parameters (each
with its source) and the registry.

A fabric file's `network:` names one (`network: infiniband`, or a section
with its options); the simulator, NCCL's model and the planner ask it
instead of comparing names:

- latency: `switch_latency_us` (one switch crossed, port to port, cut
  through), `message_us` (what the transport adds to each message NCCL
  sends between servers, beyond what NCCL's own constants charge: they are
  InfiniBand verbs', measured on NVIDIA's clusters);
- bandwidth: `efficiency` (the share of a NIC's line rate NCCL reaches over
  this transport on a fabric with no contention) and `nic_gbytes_cap` (what
  one NIC reaches through it at most, where the hosts' CPUs copy every byte);
- routing: `routing` (the policy a fabric of this technology routes by
  unless its file says otherwise) and `routings` (the policies it can run,
  None for any: policies/ says what each does), `qps_per_connection` (flows NCCL opens per
  connection through one NIC: the entropy ECMP hashes);
- losses and congestion, for the packet engine, the lab and the docs:
  `lossless` (credits, pfc or none), `congestion_control`, `ecn` (switches
  mark congestion: the lab marks with RED and runs DCTCP where its kernel
  can, lab/ecn.py), `reorders` (the NIC puts packets sprayed over several
  paths back in order);
- `sharp`: whether its switches can reduce (CollNet), and whether by
  default;
- `packet_preset()`: the packet engine's preset that models it packet by
  packet (sim/packets/presets.py), with the options the file set.

NCCL's constants (sim/nccl/tuner.py) stand for InfiniBand as NVIDIA's
clusters run it: a server's NIC to the next server's through one switch
(a rail leaf of a scalable unit). A technology adds to each step between
servers the difference its path makes against that reference
(`REFERENCE_SWITCHES` switches of InfiniBand's latency) and its
`message_us`.

Every figure has its source in `sources`, key by key; docs/networks.md
lists them.
"""

from __future__ import annotations

import copy
from typing import ClassVar, Dict, Optional, Tuple

from registries import Registry

# the technologies, in the order --network and the schema list them
REGISTRY = Registry("network technology", "network technologies",
                    key=lambda t: (t.order, t.name))
# class decorator: one instance of the class registered under its name
register = REGISTRY.register

# the path NCCL's net constants were measured over: one switch (the rail
# leaf) of InfiniBand's latency between two servers' NICs
REFERENCE_SWITCHES = 1
REFERENCE_SWITCH_US = 0.13


class Technology:
    """A scale-out network technology and the options a fabric file may set
    on it (`options`: name -> (allowed values, default))."""
    name: ClassVar[str] = ""
    order: ClassVar[int] = 100
    title: ClassVar[str] = ""               # as a table names it
    summary: ClassVar[str] = ""             # one clause for the docs and --network's help
    family: ClassVar[str] = ""              # infiniband or ethernet
    transport: ClassVar[str] = ""           # what NCCL's net plugin speaks
    switch_latency_us: ClassVar[float] = 0.0
    message_us: ClassVar[float] = 0.0
    efficiency: ClassVar[float] = 1.0
    nic_gbytes_cap: ClassVar[float] = 0.0  # GB/s one NIC reaches through it at most (0: none)
    routing: ClassVar[str] = "ecmp"
    routings: ClassVar[Optional[Tuple[str, ...]]] = None    # None: every policy there is
    qps_per_connection: ClassVar[int] = 1
    lossless: ClassVar[str] = "none"        # credits, pfc or none
    congestion_control: ClassVar[str] = ""
    reorders: ClassVar[bool] = False
    ecn: ClassVar[bool] = False             # its switches mark congestion with ECN
    sharp: ClassVar[bool] = False           # the switches can reduce (SHARP)
    packet_model: ClassVar[str] = ""        # the packet engine's preset for it ('' for none)
    sources: ClassVar[Dict[str, str]] = {}
    # options a fabric file's `network:` section may set: name -> (values, default)
    options: ClassVar[Dict[str, Tuple[tuple, object]]] = {}

    # the options a fabric file set on this instance (configured); none on the registered one
    settings: ClassVar[dict] = {}

    def configured(self, settings: Optional[dict] = None, routing: Optional[str] = None
                   ) -> "Technology":
        """This technology as a fabric file sets it: its `network:` options
        (switch_latency_us, qps_per_connection, sharp, and the technology's
        own: pfc, ecn) in place of the defaults, and the file's routing
        policy, for the planner to price a file as run_topology.py does. The
        registered instance is left as it is."""
        settings = {k: v for k, v in (settings or {}).items() if v is not None}
        if not settings and routing in (None, self.routing):
            return self
        tech = copy.copy(self)
        for key, value in settings.items():
            setattr(tech, key, value)          # an instance's value hides the class's
        tech.settings = settings
        if routing is not None:
            tech.routing = routing
        return tech

    @property
    def congestion_mode(self) -> str:
        """What a full queue does on it, in a few words: the effect the
        flow model leaves to the packet engine."""
        if self.lossless == "credits":
            return "credits, no drop"
        if self.lossless == "pfc":
            return "PFC pauses" + (", ECN" if self.ecn else "")
        return "drops, resends"

    def runs(self, routing: str) -> bool:
        """Whether a fabric of this technology can be routed by `routing`."""
        return self.routings is None or routing in self.routings

    def packet_preset(self, settings: Optional[dict] = None) -> str:
        """The packet engine's preset (sim/packets/presets.py) that models
        this technology with these options at packet level, '' for none."""
        return self.packet_model

    def describe(self, settings: Optional[dict] = None) -> str:
        """The technology as the tables name it, with any option set (by
        default, those it was configured with)."""
        settings = self.settings if settings is None else settings
        extra = [f"{k} {v}" for k, v in sorted(settings.items())
                 if k in self.options and v != self.options[k][1]]
        return self.title + (f" ({', '.join(extra)})" if extra else "")

    def path_extra_us(self, switches: float, cable_us: float, switch_us: Optional[float] = None
                      ) -> float:
        """What one message between servers takes beyond NCCL's constants on
        a path of `switches` switches and `cable_us` of link delay: the
        switches' latency against the reference path's, the links' delay,
        and the transport's own cost (never below NCCL's own figure minus
        the reference path's part)."""
        per_switch = self.switch_latency_us if switch_us is None else switch_us
        extra = (switches * per_switch + cable_us - REFERENCE_SWITCHES * REFERENCE_SWITCH_US
                 + self.message_us)
        return max(extra, -REFERENCE_SWITCHES * REFERENCE_SWITCH_US)
