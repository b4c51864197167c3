"""The fabric model: a YAML file in, plain immutable data out.

Everything else reads the fabric from here: the Mininet builder, the os-ken
controller (which gets the same normalised spec as JSON) and the reports. Nothing
in this module touches the system, so `load_fabric` is safe to run as any user.

Naming, numbering and addressing are pure functions of the spec:

- switches: ``leaf1..leafL`` with DPID 0x100+i, ``spine1..spineS`` with 0x200+j;
- servers:  ``h1..hN`` numbered leaf by leaf, server s of leaf l at 10.0.l.s
  (within ``addressing.subnet``), MAC 02:00:00:00:ll:ss, one interface eth0;
- leaf ports: 1..servers_per_leaf to the servers, then the uplinks, spine by
  spine and parallel link by parallel link; spine port k leads to leaf
  ((k-1) // uplinks_per_spine) + 1;
- interfaces are ``<node>-eth<port>``, as Mininet names them.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import re
from dataclasses import dataclass
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
POLICIES = ("ecmp", "single-path", "stp")


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


def subnet(v, fail):
    try:
        net = ipaddress.IPv4Network(v, strict=True) if isinstance(v, str) else None
    except ValueError:
        net = None
    if (net is None or net.prefixlen > 16 or net.is_loopback or net.is_multicast
            or net.is_reserved or net.is_link_local or net.network_address.packed[0] == 0):
        fail("expected an IPv4 network of /16 or larger such as 10.0.0.0/16 "
             f"(server s of leaf l gets <net>.l.s), got {v!r}")
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
SCHEMA = {
    "name": (text(_NAME, "a name of letters, digits, '.', '_' or '-' (at most 64)"), None),
    "fabric": ({
        "kind": (choice("leaf-spine"), "leaf-spine"),
        "spines": (integer(1, 64), REQUIRED),
        "leaves": (integer(1, 128), REQUIRED),
        "servers_per_leaf": (integer(1, 64), REQUIRED),
        "uplinks_per_spine": (integer(1, 8), 1),
        "mtu": (integer(1280, 9216), 1500),
    }, REQUIRED),
    "links": ({"server_leaf": (LINK, REQUIRED), "leaf_spine": (LINK, REQUIRED)}, REQUIRED),
    "routing": ({"policy": (choice(*POLICIES), "ecmp")}, {}),
    "addressing": ({"subnet": (subnet, "10.0.0.0/16")}, {}),
    "experiment": (EXPERIMENT, {}),
    "names": ({
        "spine": (text(_PREFIX, "a lowercase name prefix such as 'spine' (a-z, 0-9)"), "spine"),
        "leaf": (text(_PREFIX, "a lowercase name prefix such as 'leaf' (a-z, 0-9)"), "leaf"),
        "server": (text(_PREFIX, "a lowercase name prefix such as 'h' (a-z, 0-9)"), "h"),
    }, {}),
}


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
            if isinstance(check, dict):
                value_ = _normalise(value_, check, key_path, source)
            out[key] = value_
        elif isinstance(check, dict):
            out[key] = _normalise(value[key], check, key_path, source)
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
    role: str            # "leaf" or "spine"
    index: int           # 1-based within its role
    dpid: int


@dataclass(frozen=True)
class Server:
    name: str
    index: int           # 1-based over the whole fabric
    leaf: str
    port: int            # the leaf's port facing this server
    ip: str
    mac: str

    @property
    def intf(self) -> str:
        return f"{self.name}-eth0"


@dataclass(frozen=True)
class Link:
    kind: str            # "server_leaf" or "leaf_spine"
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
    def mtu(self) -> int:
        return self.spec["fabric"]["mtu"]

    @property
    def leaves(self) -> Tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.role == "leaf")

    @property
    def spines(self) -> Tuple[Switch, ...]:
        return tuple(s for s in self.switches if s.role == "spine")

    def switch(self, name: str) -> Switch:
        return next(s for s in self.switches if s.name == name)

    def server(self, name: str) -> Server:
        return next(h for h in self.servers if h.name == name)

    def uplinks(self, leaf: str) -> Tuple[Link, ...]:
        """The leaf's links towards the spines, in port order."""
        return tuple(l for l in self.links if l.kind == "leaf_spine" and l.a == leaf)

    def shape(self) -> str:
        f = self.spec["fabric"]
        par = f["uplinks_per_spine"]
        return (f"{f['spines']} spines x {f['leaves']} leaves x {f['servers_per_leaf']} "
                f"servers per leaf{f' ({par} parallel uplinks per spine)' if par > 1 else ''}"
                f" = {len(self.servers)} servers, {len(self.switches)} switches, "
                f"{len(self.links)} links")

    def edited(self, edit: Callable[[dict], None]) -> "Fabric":
        """The same fabric with `edit` applied to a copy of its spec."""
        spec = copy.deepcopy(self.spec)
        edit(spec)
        return fabric_from_spec(spec, self.source)

    def with_policy(self, policy: str) -> "Fabric":
        return self.edited(lambda spec: spec["routing"].update(policy=policy))


def fabric_from_spec(spec: dict, source: str = "<spec>") -> Fabric:
    """Derive names, DPIDs, ports and addresses from a normalised spec."""
    f, names = spec["fabric"], spec["names"]
    n_spines, n_leaves = f["spines"], f["leaves"]
    per_leaf, parallel = f["servers_per_leaf"], f["uplinks_per_spine"]
    net = ipaddress.IPv4Network(spec["addressing"]["subnet"])

    leaves = tuple(Switch(f"{names['leaf']}{i}", "leaf", i, LEAF_DPID_BASE + i)
                   for i in range(1, n_leaves + 1))
    spines = tuple(Switch(f"{names['spine']}{j}", "spine", j, SPINE_DPID_BASE + j)
                   for j in range(1, n_spines + 1))
    servers, links = [], []
    server_leaf = LinkSpec(**spec["links"]["server_leaf"])
    leaf_spine = LinkSpec(**spec["links"]["leaf_spine"])
    for leaf in leaves:
        for s in range(1, per_leaf + 1):
            index = (leaf.index - 1) * per_leaf + s
            ip = net.network_address + leaf.index * 256 + s
            host = Server(f"{names['server']}{index}", index, leaf.name, s, str(ip),
                          f"02:00:00:00:{leaf.index:02x}:{s:02x}")
            servers.append(host)
            links.append(Link("server_leaf", host.name, 0, leaf.name, s, server_leaf))
    for leaf in leaves:
        for spine in spines:
            for k in range(1, parallel + 1):
                leaf_port = per_leaf + (spine.index - 1) * parallel + k
                spine_port = (leaf.index - 1) * parallel + k
                links.append(Link("leaf_spine", leaf.name, leaf_port, spine.name,
                                  spine_port, leaf_spine))
    name = spec["name"] or Path(source).stem or "fabric"
    return Fabric(name, source, spec, spec["routing"]["policy"], net.prefixlen,
                  leaves + spines, tuple(servers), tuple(links))


def _check_whole(fabric: Fabric, source: str) -> None:
    """Checks that need the derived fabric: sizes, name lengths, collisions."""
    if len(fabric.servers) > MAX_SERVERS or len(fabric.switches) > MAX_SWITCHES:
        raise FabricError(source, "fabric", (
            f"too large for this host: {len(fabric.servers)} servers and "
            f"{len(fabric.switches)} switches; at most {MAX_SERVERS} servers and "
            f"{MAX_SWITCHES} switches can be emulated here"))
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
    role_of = {s.name: s.role for s in fabric.switches}
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
    fabric = fabric_from_spec(spec, source)
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
    for kind in ("server_leaf", "leaf_spine"):
        s = LinkSpec(**fabric.spec["links"][kind])
        extra = "".join([f", MTU {fabric.mtu}",
                         f", {s.delay_ms} ms delay" if s.delay_ms else "",
                         f", {s.loss_percent}% loss" if s.loss_percent else ""])
        out[kind] = f"{s.rate_mbit:g} Mbit/s, queue {s.queue_packets} packets{extra}"
    return out
