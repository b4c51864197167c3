"""The fabric model: a YAML file in, plain immutable data out.

Everything else reads the fabric from here: the Mininet builder, the os-ken
controller (which gets the same normalised spec as JSON) and the reports. Nothing
in this module touches the system, so `load_fabric` is safe to run as any user.

Kinds of fabric (``fabric.kind``): ``leaf-spine`` (2-tier Clos, servers per
leaf), ``rail-optimized`` (scalable units; NIC r of every server of a unit on
the unit's rail leaf r; spines above all leaves), ``fat-tree`` (3-tier k-ary:
k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores),
``single-switch`` and ``full-mesh`` (every server on its own switch port, the
switches cabled pairwise), the last two as the counter-examples at small n.

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
import difflib
import ipaddress
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import yaml

from traffic.schedules import ALGORITHMS, COLLECTIVES

DEFAULT_FABRIC = Path(__file__).with_name("default.yaml")

IFNAME_MAX = 15          # Linux IFNAMSIZ - 1
MAX_SERVERS = 512        # beyond this a 2-core host spends minutes building
MAX_SWITCHES = 128
MIN_RATE_MBIT = 0.01        # 10 kbit/s: below that HTB's arithmetic stops being a rate
MAX_RATE_MBIT = 100_000
LEAF_DPID_BASE = 0x100
SPINE_DPID_BASE = 0x200
DPID_BASE = {"leaf": 0x100, "spine": 0x200, "agg": 0x300, "core": 0x400, "node": 0x1000,
             "nvswitch": 0x2000}
POLICIES = ("ecmp", "single-path", "stp")
KINDS = ("leaf-spine", "rail-optimized", "fat-tree", "single-switch", "full-mesh")
MAX_PER_LEAF = 254          # endpoints homed on one leaf: the last octet of <net>.l.k
MAX_MESH = 16               # a full mesh of n switches has n(n-1)/2 links


class FabricError(Exception):
    """A fabric the user described wrongly: one sentence naming file and key."""

    def __init__(self, source: str, keypath: str, message: str):
        self.source, self.keypath, self.message = source, keypath, message
        where = f"{source}: {keypath}" if keypath else source
        super().__init__(f"{where}: {message}")


# --- the schema -----------------------------------------------------------------
# A field checker takes (value, raise_fn) and returns the normalised value.

REQUIRED = object()
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,9}$")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def integer(lo: int, hi: int) -> Callable:
    def check(v, fail):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            fail(f"expected a whole number from {lo} to {hi}, got {v!r}")
        return v
    return check


def number(lo: float, hi: float, unit: str) -> Callable:
    def check(v, fail):
        if not _is_number(v) or not lo <= v <= hi:
            fail(f"expected a number from {lo:g} to {hi:g} ({unit}), got {v!r}")
        return v
    return check


def choice(*options: str) -> Callable:
    def check(v, fail):
        if v not in options:
            fail(f"expected one of {', '.join(options)}, got {v!r}")
        return v
    return check


def text(pattern: re.Pattern, what: str) -> Callable:
    def check(v, fail):
        if not isinstance(v, str) or not pattern.match(v):
            fail(f"expected {what}, got {v!r}")
        return v
    return check


def even(lo: int, hi: int) -> Callable:
    def check(v, fail):
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi or v % 2:
            fail(f"expected an even whole number from {lo} to {hi}, got {v!r}")
        return v
    return check


def subnet(v, fail):
    try:
        net = ipaddress.IPv4Network(v, strict=True) if isinstance(v, str) else None
    except ValueError:
        net = None
    if (net is None or net.prefixlen > 16 or net.is_loopback or net.is_multicast
            or net.is_reserved or net.is_link_local or net.network_address.packed[0] == 0):
        fail("expected an IPv4 network of /16 or larger such as 10.0.0.0/16 "
             f"(endpoint k of leaf l gets <net>.l.k), got {v!r}")
    return str(net)


_SIZE = re.compile(r"^(\d+)\s*([KMG]?)B?$", re.IGNORECASE)
_SERVER = re.compile(r"^[a-z][a-z0-9]{0,14}$")


def parse_size(v) -> Optional[int]:
    """Bytes from 65536, "64K", "2M" or "1G" (powers of 1024, as nccl-tests); None if not a size."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    m = _SIZE.match(v.strip()) if isinstance(v, str) else None
    if not m:
        return None
    return int(m.group(1)) * 1024 ** " KMG".index((m.group(2) or " ").upper())


def size(lo: int, hi: int) -> Callable:
    def check(v, fail):
        n = parse_size(v)
        if n is None or not lo <= n <= hi:
            fail(f"expected a size in bytes from {lo} to {hi} (a number, or with K, M or G), "
                 f"got {v!r}")
        return n
    return check


def optional(check: Callable) -> Callable:
    """A key that may be left out (None): the experiment's own default applies."""
    def wrapped(v, fail):
        return None if v is None else check(v, fail)
    return wrapped


def server_pair(v, fail):
    if (not isinstance(v, list) or len(v) != 2
            or not all(isinstance(x, str) and _SERVER.match(x) for x in v)):
        fail(f"expected two server names such as [h1, h4], got {v!r}")
    return v


EXPERIMENT = {
    "collective": (optional(choice(*COLLECTIVES)), None),
    "algorithm": (optional(choice(*sorted({a for al in ALGORITHMS.values() for a in al}))), None),
    "engine": (optional(choice("agents", "iperf3", "scapy")), None),
    "minbytes": (optional(size(4, 1 << 30)), None),
    "maxbytes": (optional(size(4, 1 << 30)), None),
    "stepfactor": (optional(number(1, 1024, "x")), None),
    "iters": (optional(integer(1, 1000)), None),
    "warmup": (optional(integer(0, 100)), None),
    "root": (optional(integer(0, 4095)), None),
    "channels": (optional(integer(1, 16)), None),
    "piece_bytes": (optional(size(64, 1 << 26)), None),
    "probe": (optional(server_pair), None),
    "cross": (optional(server_pair), None),
}

LINK = {
    "rate_mbit": (number(MIN_RATE_MBIT, MAX_RATE_MBIT, "Mbit/s"), REQUIRED),
    "queue_packets": (integer(1, 100_000), 100),
    "delay_ms": (number(0, 10_000, "ms"), 0),
    "loss_percent": (number(0, 100, "%"), 0),
}
OPTIONAL_LINK = None       # a link class only some kinds of fabric use
SCHEMA = {
    "name": (text(_NAME, "a name of letters, digits, '.', '_' or '-' (at most 64)"), None),
    "fabric": ({
        "kind": (choice(*KINDS), "leaf-spine"),
        "spines": (optional(integer(1, 64)), None),
        "leaves": (optional(integer(1, 128)), None),
        "servers_per_leaf": (optional(integer(1, 64)), None),
        "units": (optional(integer(1, 16)), None),
        "servers_per_unit": (optional(integer(1, 64)), None),
        "k": (optional(even(2, 16)), None),
        "servers": (optional(integer(1, MAX_SERVERS)), None),
        "uplinks_per_spine": (optional(integer(1, 8)), None),
        "mtu": (integer(1280, 9216), 1500),
    }, REQUIRED),
    "server": ({
        "gpus": (integer(1, 16), 1),
        "nics": (integer(1, 16), 1),
    }, {}),
    "links": ({"server_leaf": (LINK, REQUIRED), "leaf_spine": (LINK, OPTIONAL_LINK),
               "spine_core": (LINK, OPTIONAL_LINK), "intra_node": (LINK, OPTIONAL_LINK)},
              REQUIRED),
    "routing": ({"policy": (choice(*POLICIES), "ecmp")}, {}),
    "addressing": ({"subnet": (subnet, "10.0.0.0/16"),
                    "nvlink_subnet": (subnet, "172.31.0.0/16")}, {}),
    "experiment": (EXPERIMENT, {}),
    "names": ({
        "spine": (text(_PREFIX, "a lowercase name prefix such as 'spine' (a-z, 0-9)"), "spine"),
        "leaf": (text(_PREFIX, "a lowercase name prefix such as 'leaf' (a-z, 0-9)"), "leaf"),
        "agg": (text(_PREFIX, "a lowercase name prefix such as 'agg' (a-z, 0-9)"), "agg"),
        "core": (text(_PREFIX, "a lowercase name prefix such as 'core' (a-z, 0-9)"), "core"),
        "server": (text(_PREFIX, "a lowercase name prefix such as 'h' (a-z, 0-9)"), "h"),
    }, {}),
}

# What each kind of fabric takes in `fabric:` (beyond kind and mtu) and which
# link classes it uses besides server_leaf.
KIND_KEYS = {
    "leaf-spine": (("spines", "leaves", "servers_per_leaf"), ("uplinks_per_spine",),
                   ("leaf_spine",)),
    "rail-optimized": (("spines", "servers_per_unit"), ("units", "uplinks_per_spine"),
                       ("leaf_spine",)),
    "fat-tree": (("k",), ("servers_per_leaf",), ("leaf_spine",)),
    "single-switch": (("servers",), (), ()),
    "full-mesh": (("servers",), (), ("leaf_spine",)),
}


def _check_kind(spec: dict, source: str) -> None:
    """Keys that only some kinds take: each kind gets exactly its own."""
    f, kind = spec["fabric"], spec["fabric"]["kind"]
    required, optional_, links = KIND_KEYS[kind]
    takes = ", ".join(required + optional_)
    for key in required:
        if f[key] is None:
            raise FabricError(source, f"fabric.{key}", f"missing; a {kind} fabric needs it "
                                                       f"(it takes {takes})")
    for key, value in f.items():
        if key not in ("kind", "mtu") + required + optional_ and value is not None:
            raise FabricError(source, f"fabric.{key}", f"not used by a {kind} fabric "
                                                       f"(it takes {takes})")
    for key in links:
        if spec["links"][key] is None:
            raise FabricError(source, f"links.{key}", f"missing; a {kind} fabric needs this "
                                                      "link class")
    unused = {"leaf_spine": not links, "spine_core": kind != "fat-tree",
              "intra_node": not _multi(spec)}
    for key, idle in unused.items():
        if idle and spec["links"][key] is not None:
            why = ("servers have one GPU and one NIC" if key == "intra_node"
                   else f"a {kind} fabric has no such links")
            raise FabricError(source, f"links.{key}", f"not used here: {why}")
    if kind == "full-mesh" and f["servers"] > MAX_MESH:
        raise FabricError(source, "fabric.servers", (
            f"expected at most {MAX_MESH} servers in a full mesh (it needs n(n-1)/2 links: "
            f"{f['servers'] * (f['servers'] - 1) // 2} for {f['servers']})"))
    srv = spec["server"]
    if srv["nics"] > srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected at most one NIC per GPU ({srv['gpus']}), got {srv['nics']}"))
    nets = [ipaddress.IPv4Network(spec["addressing"][k]) for k in ("subnet", "nvlink_subnet")]
    if _multi(spec) and nets[0].overlaps(nets[1]):
        raise FabricError(source, "addressing.nvlink_subnet", (
            f"expected a network apart from addressing.subnet ({nets[0]}), got {nets[1]}"))
    if _multi(spec) and spec["links"]["intra_node"] is None:
        raise FabricError(source, "links.intra_node", (
            "missing; servers with several GPUs need the rate of their NVLink-class "
            "interconnect (much faster than the network)"))


def check_policy(fabric: "Fabric") -> None:
    """stp turns every bridge into a learning switch: the switches inside a
    multi-GPU server would carry other servers' traffic."""
    if fabric.policy == "stp" and _multi(fabric.spec):
        raise FabricError(fabric.source, "routing.policy", (
            "stp is not available with servers of several GPUs or NICs: spanning tree would "
            "make their NVSwitch and PCIe switches transit bridges; use ecmp or single-path"))


def _multi(spec: dict) -> bool:
    """Servers are node switches with GPU hosts behind them."""
    return spec["server"]["gpus"] > 1 or spec["server"]["nics"] > 1


def _normalise(value: Any, schema: dict, path: str, source: str) -> dict:
    def fail_at(key_path):
        def fail(message):
            raise FabricError(source, key_path, message)
        return fail

    if not isinstance(value, dict):
        got = "nothing" if value is None else f"{type(value).__name__} {value!r}"
        fail_at(path)(f"expected a mapping with keys {', '.join(schema)}, got {got}")
    for key in value:
        if key not in schema:
            close = difflib.get_close_matches(str(key), schema, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            fail_at(_join(path, key))(
                f"unknown key{hint}; expected one of {', '.join(schema)}")
    out = {}
    for key, (check, default) in schema.items():
        key_path = _join(path, key)
        if key not in value:
            if default is REQUIRED:
                fail_at(key_path)("missing; this key is required")
            value_ = copy.deepcopy(default)
            if isinstance(check, dict) and value_ is not None:
                value_ = _normalise(value_, check, key_path, source)
            out[key] = value_
        elif isinstance(check, dict):
            out[key] = (None if value[key] is None and default is OPTIONAL_LINK
                        else _normalise(value[key], check, key_path, source))
        else:
            out[key] = check(value[key], fail_at(key_path))
    return out


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


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
class Switch:
    name: str
    role: str            # "leaf", "spine", "agg", "core", "node" (a server's PCIe switch
                         # to shared NICs) or "nvswitch" (a server's NVLink domain)
    index: int           # 1-based within its role
    dpid: int


@dataclass(frozen=True)
class Server:
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
    nv_ip: str = ""      # its address on the NVSwitch (interface eth1)
    nv_mac: str = ""

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


@dataclass(frozen=True)
class Link:
    kind: str            # "server_leaf", "leaf_spine", "spine_core", "mesh", "intra_node"
                         # (GPU to NVSwitch) or "pcie" (GPU to its server's PCIe switch)
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
    servers: Tuple[Server, ...]
    links: Tuple[Link, ...]

    @property
    def kind(self) -> str:
        return self.spec["fabric"]["kind"]

    @property
    def mtu(self) -> int:
        return self.spec["fabric"]["mtu"]

    @property
    def nv_prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.spec["addressing"]["nvlink_subnet"]).prefixlen

    @property
    def gpus_per_server(self) -> int:
        return self.spec["server"]["gpus"]

    @property
    def leaves(self) -> Tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.role == "leaf")

    @property
    def spines(self) -> Tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.role == "spine")

    @property
    def nodes(self) -> Tuple[Switch, ...]:
        """Switches inside servers: NVSwitches and PCIe switches."""
        return tuple(s for s in self.switches if s.role in ("node", "nvswitch"))

    def switch(self, name: str) -> Switch:
        return next(s for s in self.switches if s.name == name)

    def server(self, name: str) -> Server:
        return next(h for h in self.servers if h.name == name)

    def uplinks(self, leaf: str) -> Tuple[Link, ...]:
        """The leaf's links towards the spines, in port order."""
        return tuple(l for l in self.links if l.kind == "leaf_spine" and l.a == leaf)

    def oversubscription(self) -> float:
        """The busiest leaf's downlink capacity over its uplink capacity
        (1.0: non-blocking; 0 when no leaf has uplinks)."""
        worst = 0.0
        for leaf in self.leaves:
            down = sum(l.spec.rate_mbit for l in self.links
                       if l.kind == "server_leaf" and l.b == leaf.name)
            up = sum(l.spec.rate_mbit for l in self.links
                     if l.kind in ("leaf_spine", "mesh") and leaf.name in (l.a, l.b))
            if up:
                worst = max(worst, down / up)
        return worst

    def shape(self) -> str:
        f, kind = self.spec["fabric"], self.kind
        par = f["uplinks_per_spine"] or 1
        parallel = f" ({par} parallel uplinks per spine)" if par > 1 else ""
        n_servers = len({h.server for h in self.servers})
        multi = _multi(self.spec)
        if kind == "leaf-spine":
            head = (f"{f['spines']} spines x {f['leaves']} leaves x {f['servers_per_leaf']} "
                    f"servers per leaf{parallel}")
        elif kind == "rail-optimized":
            head = (f"rail-optimized: {f['units'] or 1} unit(s) of {f['servers_per_unit']} "
                    f"servers on {len(self.leaves)} rail leaves, {f['spines']} spines{parallel}")
        elif kind == "fat-tree":
            head = (f"{f['k']}-ary fat-tree: {f['k']} pods, {len(self.leaves)} edge, "
                    f"{sum(s.role == 'agg' for s in self.switches)} aggregation and "
                    f"{sum(s.role == 'core' for s in self.switches)} core switches")
        elif kind == "single-switch":
            head = "single switch"
        else:
            head = f"full mesh of {f['servers']} switches"
        gpus = self.gpus_per_server
        nics = self.spec["server"]["nics"]
        inside = (f", {n_servers} servers x {gpus} GPUs ({nics} NIC{'s' if nics > 1 else ''} "
                  "each)" if multi else "")
        over = self.oversubscription()
        ratio = f", oversubscription {over:.2g}:1" if over > 1.0001 else ""
        return (f"{head}{inside} = {len(self.servers)} "
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


def _layout(spec: dict):
    """The kind's switches (role, count), the leaves each server's NICs land
    on, and its switch-to-switch links (kind, (role, i), (role, j)), all 1-based."""
    f, kind = spec["fabric"], spec["fabric"]["kind"]
    nics = spec["server"]["nics"]
    par = f["uplinks_per_spine"] or 1
    if kind == "leaf-spine":
        counts = {"leaf": f["leaves"], "spine": f["spines"]}
        homes = [[l] * nics for l in range(1, f["leaves"] + 1)
                 for _ in range(f["servers_per_leaf"])]
    elif kind == "rail-optimized":
        units = f["units"] or 1
        counts = {"leaf": units * nics, "spine": f["spines"]}
        homes = [[u * nics + r for r in range(1, nics + 1)]
                 for u in range(units) for _ in range(f["servers_per_unit"])]
    elif kind == "fat-tree":
        half = f["k"] // 2
        per_edge = f["servers_per_leaf"] or half
        counts = {"leaf": f["k"] * half, "agg": f["k"] * half, "core": half * half}
        homes = [[e] * nics for e in range(1, counts["leaf"] + 1) for _ in range(per_edge)]
        wires = [("leaf_spine", ("leaf", e), ("agg", (e - 1) // half * half + a))
                 for e in range(1, counts["leaf"] + 1) for a in range(1, half + 1)]
        wires += [("spine_core", ("agg", a), ("core", (a - 1) % half * half + c))
                  for a in range(1, counts["agg"] + 1) for c in range(1, half + 1)]
        return counts, homes, wires
    elif kind == "single-switch":
        counts = {"leaf": 1}
        homes = [[1] * nics for _ in range(f["servers"])]
    else:                                             # full-mesh
        counts = {"leaf": f["servers"]}
        homes = [[s] * nics for s in range(1, f["servers"] + 1)]
        wires = [("mesh", ("leaf", i), ("leaf", j)) for i in range(1, f["servers"] + 1)
                 for j in range(i + 1, f["servers"] + 1)]
        return counts, homes, wires
    wires = [("leaf_spine", ("leaf", l), ("spine", j)) for l in range(1, counts["leaf"] + 1)
             for j in range(1, counts.get("spine", 0) + 1) for _ in range(par)]
    return counts, homes, wires


def fabric_from_spec(spec: dict, source: str = "<spec>") -> Fabric:
    """Derive names, DPIDs, ports and addresses from a normalised spec."""
    names, gpus, n_nics = spec["names"], spec["server"]["gpus"], spec["server"]["nics"]
    multi = _multi(spec)
    net = ipaddress.IPv4Network(spec["addressing"]["subnet"])
    nv_net = ipaddress.IPv4Network(spec["addressing"]["nvlink_subnet"])
    link_spec = {k: LinkSpec(**v) for k, v in spec["links"].items() if v is not None}
    link_spec.setdefault("spine_core", link_spec.get("leaf_spine"))
    link_spec["mesh"] = link_spec.get("leaf_spine")
    link_spec["pcie"] = link_spec.get("intra_node")

    counts, homes, wires = _layout(spec)
    by_role = {role: [Switch(f"{names[role]}{i}", role, i, DPID_BASE[role] + i)
                      for i in range(1, n + 1)] for role, n in counts.items()}
    next_port: Dict[str, int] = {}

    def port(node: str) -> int:
        next_port[node] = next_port.get(node, 0) + 1
        return next_port[node]

    servers, links, inside = [], [], []
    homed: Dict[int, int] = {}                        # leaf index -> endpoints so far

    def endpoint(name, leaf, leaf_port, **extra):
        k = homed[leaf.index] = homed.get(leaf.index, 0) + 1
        ip = net.network_address + leaf.index * 256 + k
        return Server(name, len(servers) + 1, leaf.name, leaf_port, str(ip),
                      f"02:00:00:00:{leaf.index % 256:02x}:{k % 256:02x}", **extra)

    leaves = by_role["leaf"]
    for s, nic_leaves in enumerate(homes, start=1):
        if not multi:
            leaf = leaves[nic_leaves[0] - 1]
            host = endpoint(f"{names['server']}{s}", leaf, port(leaf.name))
            servers.append(host)
            links.append(Link("server_leaf", host.name, 0, leaf.name, host.port,
                              link_spec["server_leaf"]))
            continue
        box = f"{names['server']}{s}"
        nv = pcie = None
        if gpus > 1:
            nv = Switch(f"{box}nv", "nvswitch", s, DPID_BASE["nvswitch"] + s)
        if n_nics < gpus or gpus == 1:                   # GPUs share NICs over PCIe
            pcie = Switch(box, "node", s, DPID_BASE["node"] + s)
            gpu_ports = [port(box) for _ in range(gpus)]
            nic = []                                    # (PCIe port, leaf, leaf port)
            for leaf_index in nic_leaves:
                leaf = leaves[leaf_index - 1]
                nic.append((port(box), leaf, port(leaf.name)))
                links.append(Link("server_leaf", box, nic[-1][0], leaf.name, nic[-1][2],
                                  link_spec["server_leaf"]))
        inside += [sw for sw in (pcie, nv) if sw]
        for g in range(1, gpus + 1):
            name = f"{box}g{g}"
            if pcie:
                nic_port, leaf, leaf_port = nic[(g - 1) % len(nic)]
                host = endpoint(name, leaf, leaf_port, node=box, gpu=g,
                                node_port=gpu_ports[g - 1], nic_port=nic_port, box=box)
                links.append(Link("pcie", name, 0, box, host.node_port, link_spec["pcie"]))
            else:                                       # the GPU's own NIC
                leaf = leaves[nic_leaves[g - 1] - 1]
                host = endpoint(name, leaf, port(leaf.name), gpu=g, box=box)
                links.append(Link("server_leaf", name, 0, leaf.name, host.port,
                                  link_spec["server_leaf"]))
            if nv:
                number = (s - 1) * gpus + g
                host = replace(host, nvswitch=nv.name, nv_port=port(nv.name),
                               nv_ip=str(nv_net.network_address + number),
                               nv_mac=f"02:00:00:01:{number >> 8:02x}:{number & 255:02x}")
                links.append(Link("intra_node", name, 1, nv.name, host.nv_port,
                                  link_spec["intra_node"]))
            servers.append(host)
    for kind, (ra, ia), (rb, ib) in wires:
        a, b = by_role[ra][ia - 1], by_role[rb][ib - 1]
        links.append(Link(kind, a.name, port(a.name), b.name, port(b.name), link_spec[kind]))
    name = spec["name"] or Path(source).stem or "fabric"
    switches = tuple(sw for role in ("leaf", "spine", "agg", "core") for sw in by_role.get(role, ()))
    return Fabric(name, source, spec, spec["routing"]["policy"], net.prefixlen,
                  switches + tuple(inside), tuple(servers), tuple(links))


def _check_whole(fabric: Fabric, source: str) -> None:
    """Checks that need the derived fabric: sizes, name lengths, collisions."""
    if len(fabric.servers) > MAX_SERVERS or len(fabric.switches) > MAX_SWITCHES:
        raise FabricError(source, "fabric", (
            f"too large for this host: {len(fabric.servers)} servers and "
            f"{len(fabric.switches)} switches; at most {MAX_SERVERS} servers and "
            f"{MAX_SWITCHES} switches can be emulated here"))
    per_leaf: Dict[str, int] = {}
    for h in fabric.servers:
        per_leaf[h.leaf] = per_leaf.get(h.leaf, 0) + 1
    crowded = [leaf for leaf, n in per_leaf.items() if n > MAX_PER_LEAF]
    if crowded:
        raise FabricError(source, "fabric", (
            f"too many endpoints behind {crowded[0]} ({per_leaf[crowded[0]]}); at most "
            f"{MAX_PER_LEAF} can be addressed behind one leaf"))
    names = [s.name for s in fabric.switches] + [h.name for h in fabric.servers]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise FabricError(source, "names", (
            f"expected prefixes that give every node its own name, but two nodes "
            f"would both be called {dup!r}"))
    servers = {h.name for h in fabric.servers}
    for key in ("probe", "cross"):
        pair = fabric.spec["experiment"].get(key) or []
        missing = [p for p in pair if p not in servers]
        if missing:
            raise FabricError(source, f"experiment.{key}", (
                f"expected servers of this fabric, but there is no {missing[0]!r} "
                f"(servers are {fabric.servers[0].name}..{fabric.servers[-1].name})"))
    role_of = {s.name: ("server" if s.role in ("node", "nvswitch") else s.role)
               for s in fabric.switches}
    role_of.update((h.name, "server") for h in fabric.servers)
    longest = {}
    for link in fabric.links:
        for node, intf in ((link.a, link.a_intf), (link.b, link.b_intf)):
            role = role_of[node]
            if len(intf) >= len(longest.get(role, "")):
                longest[role] = intf
    for role, intf in sorted(longest.items()):
        if len(intf) > IFNAME_MAX:
            raise FabricError(source, f"names.{role}", (
                f"expected a shorter prefix: it makes interface names like {intf!r} "
                f"({len(intf)} characters) and Linux allows {IFNAME_MAX}"))


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys (a silent typo otherwise)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a plain name, not {type(key).__name__}",
                key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_fabric(text_: str, source: str = "<string>") -> Fabric:
    try:
        raw = yaml.load(text_, Loader=_UniqueKeyLoader)  # noqa: S506 (safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FabricError(source, "", f"not valid YAML{where}: {problem}") from None
    spec = _normalise(raw, SCHEMA, "", source)
    _check_kind(spec, source)
    fabric = fabric_from_spec(spec, source)
    check_policy(fabric)
    _check_whole(fabric, source)
    return fabric


def load_fabric(path: Optional[Path] = None) -> Fabric:
    """Read and validate a fabric file (the embedded default when path is None)."""
    path = Path(path) if path else DEFAULT_FABRIC
    try:
        text_ = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise FabricError(str(path), "", f"cannot read the fabric file: {reason}") from None
    return parse_fabric(text_, str(path))


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
