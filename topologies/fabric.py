"""The fabric model: a YAML file in, plain immutable data out.

Everything else reads the fabric from here: the Mininet builder, the os-ken
controller (which gets the same normalised spec as JSON) and the reports. Nothing
in this module touches the system, so `load_fabric` is safe to run as any user.

Kinds of fabric (``fabric.kind``), each a class in topologies/kinds/ that
lays out its switches, where servers land and its wires: ``leaf-spine``
(2-tier Clos, servers per leaf), ``rail-optimized`` (scalable units; NIC r of
every server of a unit on the unit's rail leaf r; spines above all leaves),
``fat-tree`` (3-tier k-ary: k pods of k/2 edge and k/2 aggregation switches,
(k/2)^2 cores), ``single-switch`` and ``full-mesh`` (every server on its own
switch port, the switches cabled pairwise), the last two as the
counter-examples at small n. This module builds what the kind lays out.

Servers (``server.gpus``, ``server.nics``): with one GPU and one NIC a server
is one host on a leaf port. With G GPUs, each GPU is a host (``h3g1..h3g8``)
with two interfaces, as in a DGX: eth1 on the server's NVSwitch (``h3nv``,
links ``intra_node``, addresses in ``addressing.nvlink_subnet``), which only
joins the server's own GPUs, and eth0 towards the network. With a NIC per GPU
(N = G) eth0 is the GPU's NIC, cabled to its leaf. With fewer NICs, the
GPUs share them through the server's PCIe switch (``h3``: GPUs on ports 1..G,
links at the ``intra_node`` rate, NICs on ports G+1..G+N): GPU g sends
through NIC ((g-1) mod N)+1 and is addressed behind that NIC's leaf (its home
leaf); the PCIe switch never carries traffic between NICs. Collectives use
the NVLink address for peers in the same server and the NIC address for the
others, as NCCL picks NVLink or the network.

A mesh server (``server.interconnect: mesh``, the default for a model whose GPUs
are meshed, AMD Instinct's Infinity Fabric) has no NVSwitch: an ``intra_node``
link joins each pair of its GPUs, G(G-1)/2 links, and each GPU has a NIC of its
own (eth0). GPU g's interface towards GPU p of its server is ``eth<p>``
(``h3g2-eth1`` leads to ``h3g1``; no GPU has an eth<g> of its own). Each GPU
keeps its one NVLink address (nv_ip, numbered as on an NVSwitch) and carries
it on every mesh interface as a point-to-point address with its peer's
(``ip addr add <nv_ip> peer <peer nv_ip> dev h3g2-eth1``): the kernel's /32
route to each peer then leaves by the link to that peer, never by the network
or another peer, and the peer's MAC there is a permanent neighbour entry. The
link to GPU p has MAC 02:00:pp:01:hi:lo (the NVLink MAC, its third byte p).

Naming, numbering and addressing are pure functions of the spec:

- switches: ``leaf1..`` DPID 0x100+i, ``spine1..`` 0x200+j, ``agg1..`` 0x300+i,
  ``core1..`` 0x400+i, PCIe switches 0x1000+s, NVSwitches 0x2000+s;
- endpoints (the ranks): numbered server by server, GPU by GPU; the k-th
  endpoint homed on leaf l is 10.0.l.k (within ``addressing.subnet``), MAC
  02:00:00:00:ll:kk, interface eth0. With single-NIC servers, k is the
  leaf port. GPU g of server s has NVLink address number (s-1)G+g in
  ``addressing.nvlink_subnet`` (MAC 02:00:00:01:hi:lo of that number) on eth1;
- switch ports are numbered in the order links are made: a leaf's server (or
  NIC) ports first, server by server, then its uplinks spine by spine and
  parallel link by parallel link;
- interfaces are ``<node>-eth<port>``, as Mininet names them.
"""

from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import networks
from topologies import hardware, kinds
from topologies.roles import network_roles, role
from topologies.sanity import (check_emulation, check_physics, check_policy,  # noqa: F401
                               check_size, check_whole, emulation_warning, fabric_warnings)
from toolkit.errors import FabricError  # noqa: F401 - the model's error, as callers know it
from toolkit.yaml_loader import load_yaml, read_text
from topologies.schema import (interconnect, multi_gpu, name_from_file,  # noqa: F401
                               normalise_fabric, nvlink_domain)

DEFAULT_FABRIC = Path(__file__).with_name("default.yaml")


# --- the plain data -------------------------------------------------------------

@dataclass(frozen=True)
class LinkSpec:
    rate_mbit: float
    queue_packets: int
    delay_ms: float
    loss_percent: float

    @property
    def needs_netem(self) -> bool:
        return self.delay_ms > 0 or self.loss_percent > 0


@dataclass(frozen=True)
class Routing:
    """The fabric's `routing:` section (topologies/schema.py has each key's
    meaning and default)."""
    policy: str
    entropy: int
    flowlet_gap_ms: float
    adaptive_interval_ms: float
    bfd_ms: int


@dataclass(frozen=True)
class Switch:
    name: str
    role: str            # topologies/roles.py: "leaf", "spine", "agg", "core", "node" (a
                         # server's PCIe switch to shared NICs), "nvswitch" (its NVLink domain)
    index: int           # 1-based within its role
    dpid: int


@dataclass(frozen=True)
class Endpoint:
    """An endpoint, one rank of a collective: a single-NIC server, or one GPU
    of a multi-GPU server."""
    name: str
    index: int           # 1-based over the whole fabric: rank + 1
    leaf: str            # the home leaf: where its (home NIC's) link lands
    port: int            # the home leaf's port facing it (or its home NIC)
    ip: str
    mac: str
    node: str = ""       # its server's PCIe switch, if it shares NICs through one
    gpu: int = 1         # 1-based within its server
    node_port: int = 0   # the PCIe switch's port facing this GPU
    nic_port: int = 0    # the PCIe switch's port of its home NIC
    box: str = ""        # its server's name, "" for a single-NIC server (itself)
    nvswitch: str = ""   # its server's NVSwitch, "" with one GPU per server
    nv_port: int = 0     # the NVSwitch's port facing this GPU
    nv_ip: str = ""      # its address on the NVSwitch (interface eth1), or on each mesh link
    nv_mac: str = ""
    mesh: int = 0        # GPUs of its server's full mesh (0: no mesh)

    @property
    def intf(self) -> str:
        return f"{self.name}-eth0"

    @property
    def nv_intf(self) -> str:
        return f"{self.name}-eth1"

    @property
    def server(self) -> str:
        """The server (box) it lives in."""
        return self.box or self.name

    def address_from(self, other: "Endpoint") -> str:
        """The address `other` reaches it by, as collectives pick: its NVLink
        address from its own server, its NIC's from any other."""
        return self.nv_ip if self.nv_ip and other.server == self.server else self.ip

    def mesh_intf(self, peer_gpu: int) -> str:
        """On a mesh: its interface on the link to GPU `peer_gpu` of its server."""
        return f"{self.name}-eth{peer_gpu}"

    def mesh_mac(self, peer_gpu: int) -> str:
        """On a mesh: the MAC of its end of the link to GPU `peer_gpu`."""
        parts = self.nv_mac.split(":")
        return ":".join(parts[:2] + [f"{peer_gpu:02x}"] + parts[3:])

    @property
    def mesh_peers(self) -> Tuple[int, ...]:
        """On a mesh: the other GPUs of its server, each over its own link."""
        return tuple(p for p in range(1, self.mesh + 1) if p != self.gpu)


@dataclass(frozen=True)
class Link:
    kind: str            # "server_leaf", "leaf_spine", "spine_core", "mesh", "intra_node"
                         # (GPU to NVSwitch, or GPU to GPU on a mesh server) or "pcie"
                         # (GPU to its server's PCIe switch)
    a: str
    a_port: int
    b: str
    b_port: int
    spec: LinkSpec

    @property
    def a_intf(self) -> str:
        return f"{self.a}-eth{self.a_port}"

    @property
    def b_intf(self) -> str:
        return f"{self.b}-eth{self.b_port}"


@dataclass(frozen=True)
class Fabric:
    name: str
    source: str
    spec: dict           # the normalised YAML: what the controller receives
    policy: str
    prefixlen: int
    switches: Tuple[Switch, ...]
    endpoints: Tuple[Endpoint, ...]
    links: Tuple[Link, ...]

    @property
    def kind(self) -> str:
        return self.spec["fabric"]["kind"]

    @property
    def kind_class(self) -> kinds.FabricKind:
        """What the project knows of this kind of fabric (topologies/kinds/)."""
        return kinds.kind(self.kind)

    @property
    def mtu(self) -> int:
        return self.spec["fabric"]["mtu"]

    @cached_property
    def link_classes(self) -> Dict[str, LinkSpec]:
        """Each link class the fabric has (`links:`; a class it cannot have,
        such as a single server's `leaf_spine`, is left out)."""
        return {name: LinkSpec(**value) for name, value in self.spec["links"].items() if value}

    @property
    def nic_rate_mbit(self) -> float:
        """The rate of a server's NIC link (`links.server_leaf`)."""
        return self.link_classes["server_leaf"].rate_mbit

    @property
    def fastest_rate_mbit(self) -> float:
        """The fastest link class's rate."""
        return max(spec.rate_mbit for spec in self.link_classes.values())

    @property
    def nics_per_server(self) -> int:
        return self.spec["server"]["nics"]

    @property
    def experiment_section(self) -> Optional[dict]:
        """The file's `experiment:` section as written (runs/experiment.py
        checks it against the fabric)."""
        return self.spec.get("experiment")

    @cached_property
    def routing(self) -> Routing:
        """How the fabric is routed (`routing:`)."""
        return Routing(**self.spec["routing"])

    @property
    def nv_prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.spec["addressing"]["nvlink_subnet"]).prefixlen

    @property
    def gpus_per_server(self) -> int:
        return self.spec["server"]["gpus"]

    @property
    def server_model(self) -> Optional[hardware.Server]:
        """The server as sold (`server.model`) with this fabric's GPUs, NICs
        and NIC rate (`links.server_leaf`), as NCCL's model sees it; None
        where the file names no model."""
        name, srv = self.spec["server"].get("model"), self.spec["server"]
        if not name:
            return None
        sold, domain = hardware.SERVERS[name], self.nvlink_domain
        nics = srv["nics"] if domain == srv["gpus"] else max(1, srv["nics"] * domain // srv["gpus"])
        if domain != min(sold.gpus, srv["gpus"]):          # partitions: NCCL's node is one
            sold = hardware.partition(sold, domain)
        return replace(sold, nics=nics,
                       nic_gbps=self.spec["links"]["server_leaf"]["rate_mbit"] / 1000)

    @property
    def interconnect(self) -> str:
        """How a server's GPUs meet (`server.interconnect`): "nvswitch" or "mesh"."""
        return interconnect(self.spec["server"])

    @property
    def nvlink_domain(self) -> int:
        """GPUs per NVLink domain, NCCL's node (`server.nvlink_domain`, else
        the model's, else the server's GPUs)."""
        return nvlink_domain(self.spec["server"])

    @property
    def leaves(self) -> Tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.role == "leaf")

    @property
    def spines(self) -> Tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.role == "spine")

    @property
    def nodes(self) -> Tuple[Switch, ...]:
        """Switches inside servers: NVSwitches and PCIe switches."""
        return tuple(s for s in self.switches if role(s.role).in_server)

    @property
    def network_switches(self) -> Tuple[Switch, ...]:
        """The network's switches: every switch but those inside servers."""
        return tuple(s for s in self.switches if not role(s.role).in_server)

    def switch(self, name: str) -> Switch:
        return self._by_name[0][name]

    def endpoint(self, name: str) -> Endpoint:
        return self._by_name[1][name]

    @cached_property
    def _by_name(self) -> Tuple[Dict[str, Switch], Dict[str, Endpoint]]:
        """Switches and endpoints by name (16,384 GPUs looked up rank by rank
        in a scan of them took seconds)."""
        return {s.name: s for s in self.switches}, {h.name: h for h in self.endpoints}

    def uplinks(self, leaf: str) -> Tuple[Link, ...]:
        """The leaf's links towards the spines, in port order."""
        return tuple(l for l in self.links if l.kind == "leaf_spine" and l.a == leaf)

    @cached_property
    def warnings(self) -> Tuple[str, ...]:
        """What is unwise in this fabric though it loads: 'key.path: sentence'
        each (topologies/sanity.py), for --check and a run to print."""
        return fabric_warnings(self)

    def oversubscription(self) -> float:
        """The busiest leaf's downlink capacity over its uplink capacity
        (1.0: non-blocking; 0 when no leaf has uplinks)."""
        leaves = {leaf.name for leaf in self.leaves}
        down: Dict[str, float] = {}
        up: Dict[str, float] = {}
        for l in self.links:
            if l.kind == "server_leaf" and l.b in leaves:
                down[l.b] = down.get(l.b, 0) + l.spec.rate_mbit
            elif kinds.link_class(l.kind) == "leaf_spine":
                for end in {l.a, l.b} & leaves:
                    up[end] = up.get(end, 0) + l.spec.rate_mbit
        return max((down.get(leaf, 0) / rate for leaf, rate in up.items() if rate), default=0.0)

    def shape(self) -> str:
        n_servers = len({h.server for h in self.endpoints})
        multi = multi_gpu(self.spec)
        head = self.kind_class.head(self)
        gpus = self.gpus_per_server
        nics = self.spec["server"]["nics"]
        sold = self.spec["server"].get("model")
        mesh = ", GPUs fully meshed" if self.interconnect == "mesh" and gpus > 1 else ""
        inside = (f", {n_servers} {sold + ' ' if sold else ''}servers x {gpus} GPUs "
                  f"({nics} NIC{'s' if nics > 1 else ''} each{mesh})" if multi else "")
        over = self.oversubscription()
        ratio = f", oversubscription {over:.2g}:1" if over > 1.0001 else ""
        return (f"{head}{inside} = {len(self.endpoints)} "
                f"{'GPUs' if multi else 'servers'}, {len(self.switches)} "
                f"switch{'es' if len(self.switches) > 1 else ''}, "
                f"{len(self.links)} links{ratio}")

    def edited(self, edit: Callable[[dict], None]) -> "Fabric":
        """The same fabric with `edit` applied to a copy of its spec."""
        spec = copy.deepcopy(self.spec)
        edit(spec)
        return fabric_from_spec(spec, self.source)

    def with_policy(self, policy: str) -> "Fabric":
        return self.edited(lambda spec: spec["routing"].update(policy=policy))

    def with_network(self, technology: str) -> "Fabric":
        """The same fabric on another network technology, none of the file's
        options for it kept, routed by the technology's own policy."""
        def edit(spec):
            spec["network"] = {**{k: None for k in spec["network"]}, "technology": technology}
            spec["routing"]["policy"] = networks.network(technology).routing
        return self.edited(edit)

    @property
    def network(self) -> networks.Technology:
        """The scale-out technology (`network.technology`, docs/networks.md)."""
        return networks.network(self.spec["network"]["technology"])

    @property
    def network_settings(self) -> dict:
        """The options the file set on its technology (those not left to it)."""
        return {k: v for k, v in self.spec["network"].items()
                if k != "technology" and v is not None}

    @property
    def switch_latency_us(self) -> float:
        """One network switch crossed: the file's, else the technology's."""
        given = self.spec["network"]["switch_latency_us"]
        return self.network.switch_latency_us if given is None else given


def _layout(spec: dict):
    """The kind's switches (role, count), the leaves each server's NICs land
    on, and its switch-to-switch links (kind, (role, i), (role, j)), all 1-based."""
    layout = kinds.kind(spec["fabric"]["kind"]).layout(spec)
    return layout.counts, layout.homes, layout.wires


def spec_counts(spec: dict) -> Dict[str, int]:
    """The servers, endpoints, switches and links a normalised spec
    describes, counted without building it."""
    counts, homes, wires = _layout(spec)
    gpus, nics = spec["server"]["gpus"], spec["server"]["nics"]
    servers = len(homes)
    if not multi_gpu(spec):
        return {"servers": servers, "endpoints": servers, "switches": sum(counts.values()),
                "links": len(wires) + servers}
    pcie = nics < gpus or gpus == 1
    mesh = interconnect(spec["server"]) == "mesh"
    inside = pcie + (gpus > 1 and not mesh)            # PCIe switch, NVSwitch
    per_server = nics + gpus * pcie + (gpus * (gpus - 1) // 2 if mesh else gpus * (gpus > 1))
    return {"servers": servers, "endpoints": servers * gpus,
            "switches": sum(counts.values()) + servers * inside,
            "links": len(wires) + servers * per_server}


def fabric_from_spec(spec: dict, source: str = "<spec>") -> Fabric:
    """Derive names, DPIDs, ports and addresses from a normalised spec."""
    counts, homes, wires = _layout(spec)
    build = _Builder(spec, counts)
    for s, nic_leaves in enumerate(homes, start=1):
        if multi_gpu(spec):
            build.multi_gpu_server(s, nic_leaves)
        else:
            build.single_nic_server(s, nic_leaves[0])
    for kind, (ra, ia), (rb, ib) in wires:
        a, b = build.by_role[ra][ia - 1], build.by_role[rb][ib - 1]
        build.links.append(Link(kind, a.name, build.port(a.name), b.name, build.port(b.name),
                                build.spec_of(kind)))
    name = spec["name"] or name_from_file(source)
    switches = tuple(sw for name in network_roles() for sw in build.by_role.get(name, ()))
    return Fabric(name, source, spec, spec["routing"]["policy"], build.net.prefixlen,
                  switches + tuple(build.inside), tuple(build.endpoints), tuple(build.links))


class _Builder:
    """Numbers ports in the order links are made and addresses endpoints in
    the order they are homed: the numbering the module docstring describes."""

    def __init__(self, spec: dict, counts: Dict[str, int]):
        self.spec, self.names = spec, spec["names"]
        self.gpus, self.n_nics = spec["server"]["gpus"], spec["server"]["nics"]
        self.net = ipaddress.IPv4Network(spec["addressing"]["subnet"])
        self.nv_net = ipaddress.IPv4Network(spec["addressing"]["nvlink_subnet"])
        link_spec = {k: LinkSpec(**v) for k, v in spec["links"].items() if v is not None}
        link_spec.setdefault("spine_core", link_spec.get("leaf_spine"))
        self.link_spec = link_spec
        self.by_role = {r: [Switch(f"{self.names.get(r, r)}{i}", r, i, role(r).dpid_base + i)
                            for i in range(1, n + 1)] for r, n in counts.items()}
        self.leaves = self.by_role["leaf"]
        self.next_port: Dict[str, int] = {}
        self.homed: Dict[int, int] = {}                 # leaf index -> endpoints so far
        self.endpoints, self.links, self.inside = [], [], []

    def spec_of(self, link_kind: str) -> LinkSpec:
        """The rate and queue of a link of this kind: its class's."""
        return self.link_spec[kinds.link_class(link_kind)]

    def port(self, node: str) -> int:
        self.next_port[node] = self.next_port.get(node, 0) + 1
        return self.next_port[node]

    def endpoint(self, name: str, leaf: Switch, leaf_port: int, **extra) -> Endpoint:
        k = self.homed[leaf.index] = self.homed.get(leaf.index, 0) + 1
        ip = self.net.network_address + leaf.index * 256 + k
        return Endpoint(name, len(self.endpoints) + 1, leaf.name, leaf_port, str(ip),
                        f"02:00:00:00:{leaf.index % 256:02x}:{k % 256:02x}", **extra)

    def single_nic_server(self, s: int, leaf_index: int) -> None:
        leaf = self.leaves[leaf_index - 1]
        host = self.endpoint(f"{self.names['server']}{s}", leaf, self.port(leaf.name))
        self.endpoints.append(host)
        self.links.append(Link("server_leaf", host.name, 0, leaf.name, host.port,
                               self.link_spec["server_leaf"]))

    def multi_gpu_server(self, s: int, nic_leaves) -> None:
        box = f"{self.names['server']}{s}"
        nv = pcie = None
        mesh = self.gpus > 1 and interconnect(self.spec["server"]) == "mesh"
        if self.gpus > 1 and not mesh:
            nv = Switch(f"{box}nv", "nvswitch", s, role("nvswitch").dpid_base + s)
        if self.n_nics < self.gpus or self.gpus == 1:      # GPUs share NICs over PCIe
            pcie = Switch(box, "node", s, role("node").dpid_base + s)
            gpu_ports = [self.port(box) for _ in range(self.gpus)]
            nics = []                                      # (PCIe port, leaf, leaf port)
            for leaf_index in nic_leaves:
                leaf = self.leaves[leaf_index - 1]
                nics.append((self.port(box), leaf, self.port(leaf.name)))
                self.links.append(Link("server_leaf", box, nics[-1][0], leaf.name, nics[-1][2],
                                       self.link_spec["server_leaf"]))
        self.inside += [sw for sw in (pcie, nv) if sw]
        for g in range(1, self.gpus + 1):
            if pcie:
                host = self._gpu_behind_pcie(box, g, gpu_ports[g - 1], nics[(g - 1) % len(nics)])
            else:
                host = self._gpu_with_nic(box, g, self.leaves[nic_leaves[g - 1] - 1])
            if nv:
                host = self._on_nvswitch(host, nv, s, g)
            if mesh:
                host = self._on_mesh(host, s, g)
            self.endpoints.append(host)
        if mesh:
            self._mesh_links(self.endpoints[-self.gpus:])

    def _gpu_behind_pcie(self, box: str, g: int, node_port: int, nic) -> Endpoint:
        nic_port, leaf, leaf_port = nic
        host = self.endpoint(f"{box}g{g}", leaf, leaf_port, node=box, gpu=g,
                             node_port=node_port, nic_port=nic_port, box=box)
        self.links.append(Link("pcie", host.name, 0, box, node_port, self.spec_of("pcie")))
        return host

    def _gpu_with_nic(self, box: str, g: int, leaf: Switch) -> Endpoint:
        host = self.endpoint(f"{box}g{g}", leaf, self.port(leaf.name), gpu=g, box=box)
        self.links.append(Link("server_leaf", host.name, 0, leaf.name, host.port,
                               self.link_spec["server_leaf"]))
        return host

    def _nvlink_address(self, s: int, g: int) -> dict:
        number = (s - 1) * self.gpus + g
        return {"nv_ip": str(self.nv_net.network_address + number),
                "nv_mac": f"02:00:00:01:{number >> 8:02x}:{number & 255:02x}"}

    def _on_mesh(self, host: Endpoint, s: int, g: int) -> Endpoint:
        return replace(host, mesh=self.gpus, **self._nvlink_address(s, g))

    def _mesh_links(self, gpus) -> None:
        """A link between each pair of a server's GPUs: GPU g's end of the
        link to GPU p is its port p."""
        for i, a in enumerate(gpus):
            for b in gpus[i + 1:]:
                self.links.append(Link("intra_node", a.name, b.gpu, b.name, a.gpu,
                                       self.link_spec["intra_node"]))

    def _on_nvswitch(self, host: Endpoint, nv: Switch, s: int, g: int) -> Endpoint:
        host = replace(host, nvswitch=nv.name, nv_port=self.port(nv.name),
                       **self._nvlink_address(s, g))
        self.links.append(Link("intra_node", host.name, 1, nv.name, host.nv_port,
                               self.link_spec["intra_node"]))
        return host


def parse_fabric(text_: str, source: str = "<string>", emulate: bool = True) -> Fabric:
    """A fabric from YAML text: loaded, checked against the schema, its size
    checked from the spec, derived, and checked whole (names, and numbers
    that cannot be meant). With `emulate` (a network is to be built), also
    what this host can emulate (`check_emulation`); without, the model's
    limits alone (the simulator). FabricError names the first mistake; what
    is merely unwise is in `Fabric.warnings`."""
    spec = normalise_fabric(load_yaml(text_, source), source)
    check_size(spec, spec_counts(spec), source, emulate)
    fabric = fabric_from_spec(spec, source)
    check_policy(fabric)
    check_whole(fabric)
    check_physics(fabric)
    if emulate:
        check_emulation(fabric)
    return fabric


def load_fabric(path: Optional[Path] = None, emulate: bool = True) -> Fabric:
    """Read and validate a fabric file (the embedded default when path is
    None); `emulate` as `parse_fabric`'s."""
    path = Path(path) if path else DEFAULT_FABRIC
    return parse_fabric(read_text(path), str(path), emulate)


def describe_links(fabric: Fabric) -> Dict[str, str]:
    """Human-readable link classes for summaries."""
    out = {}
    for kind, value in fabric.spec["links"].items():
        if value is None:
            continue
        s = LinkSpec(**value)
        extra = "".join([f", MTU {fabric.mtu}",
                         f", {s.delay_ms} ms delay" if s.delay_ms else "",
                         f", {s.loss_percent}% loss" if s.loss_percent else ""])
        out[kind] = f"{s.rate_mbit:g} Mbit/s, queue {s.queue_packets} packets{extra}"
    return out
