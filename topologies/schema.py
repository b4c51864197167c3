"""The fabric YAML's schema: field validators, the schema itself, the loader,
and the one error type every mistake in a fabric file becomes.

A validator is a function ``check(value, fail)`` that returns the normalised
value or calls ``fail(message)``; `normalise` walks a schema (a dict of
``key: (validator or sub-schema, default)``) over the loaded YAML and turns
the first mistake into a `FabricError` naming the file, the key and what was
expected. The same validators check the ``experiment:`` section (its schema
lives with the experiment, in traffic/experiment.py, which knows the
collectives and engines) and the planner's fabric inputs.

Checks that need more than one key (what each kind of fabric takes) or the
derived fabric (sizes, name lengths, name collisions) are here too, as
functions of the normalised spec or of the Fabric; nothing in this module
touches the system.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import re
from pathlib import Path
from typing import Any, Callable, Dict

import yaml

IFNAME_MAX = 15          # Linux IFNAMSIZ - 1
MAX_SERVERS = 512        # beyond this a 2-core host spends minutes building
MAX_SWITCHES = 128
MIN_RATE_MBIT = 0.01        # 10 kbit/s: below that HTB's arithmetic stops being a rate
MAX_RATE_MBIT = 100_000
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


# --- how a user's value is shown in a message ------------------------------------------

SHOWN_MAX = 40


def shown(value: Any, limit: int = SHOWN_MAX) -> str:
    """`value` as a message quotes it: printable (control characters and
    escape codes as \\x.. escapes), on one line,
    at most `limit` characters (longer ones end with '...'), so no input can
    turn a one-sentence message into a screenful or drive the terminal."""
    if isinstance(value, (dict, list, tuple, set)):
        text_ = _brief_container(value, limit)
    else:
        text_ = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                        for c in (repr(value) if isinstance(value, str) else str(value)))
    return text_ if len(text_) <= limit else text_[:limit - 3] + "..."


def _brief_container(value, limit: int) -> str:
    """A list or mapping shown by its first few items only (never walked whole:
    an alias bomb nests a billion of them)."""
    if isinstance(value, dict):
        items = [f"{shown(k, 16)}: {shown(v, 16) if not isinstance(v, (dict, list)) else '...'}"
                 for k, _v in zip(value, range(3)) for v in (value[k],)]
        opening, closing = "{", "}"
    else:
        items = [shown(v, 16) if not isinstance(v, (dict, list)) else "[...]"
                 for v, _ in zip(value, range(3))]
        opening, closing = "[", "]"
    more = ", ..." if len(value) > 3 else ""
    return (opening + ", ".join(items) + more + closing)[:limit]


# --- validators -------------------------------------------------------------------

REQUIRED = object()
OPTIONAL_SECTION = None     # a sub-schema that may be absent (a link class some kinds lack)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,9}$")
_ENDPOINT = re.compile(r"^[a-z][a-z0-9]{0,14}$")
_SIZE = re.compile(r"^(\d{1,20}(?:\.\d{0,20})?|\.\d{1,20})\s*(?:([KMGT])(?:i?B)?|B)?$",
                   re.IGNORECASE)


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


def parse_size(v, whole: bool = True):
    """Bytes from 65536, "64K", "2M", "1G", "1GiB" or "1.5T" (powers of 1024, as
    nccl-tests); None if not a size. With `whole`, None too for a fraction of
    a byte; without, the exact value as a float where it is not whole (the
    planner rounds gradient sizes such as 1.2G)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    m = _SIZE.match(v.strip()) if isinstance(v, str) else None
    if not m:
        return None
    unit = 1024 ** " KMGT".index((m.group(2) or " ").upper())
    integral, _, fraction = m.group(1).partition(".")
    numerator = int((integral + fraction) or "0") * unit
    denominator = 10 ** len(fraction)
    if numerator % denominator == 0:
        return numerator // denominator
    return None if whole else numerator / denominator


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


def endpoint_pair(v, fail):
    if (not isinstance(v, list) or len(v) != 2
            or not all(isinstance(x, str) and _ENDPOINT.match(x) for x in v)):
        fail(f"expected two server names such as [h1, h4], got {v!r}")
    return v


def passed_on(v, fail):
    """A section another module validates (the experiment, in traffic/): kept as written."""
    return copy.deepcopy(v)


def normalise(value: Any, schema: dict, path: str, source: str) -> dict:
    """`value` checked against `schema`, defaults filled in; FabricError at the
    first mistake, naming its key path."""
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
                value_ = normalise(value_, check, key_path, source)
            out[key] = value_
        elif isinstance(check, dict):
            out[key] = (None if value[key] is None and default is OPTIONAL_SECTION
                        else normalise(value[key], check, key_path, source))
        else:
            out[key] = check(value[key], fail_at(key_path))
    return out


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


# --- the fabric's schema ------------------------------------------------------------

LINK = {
    "rate_mbit": (number(MIN_RATE_MBIT, MAX_RATE_MBIT, "Mbit/s"), REQUIRED),
    "queue_packets": (integer(1, 100_000), 100),
    "delay_ms": (number(0, 10_000, "ms"), 0),
    "loss_percent": (number(0, 100, "%"), 0),
}


def _prefix(example: str) -> Callable:
    return text(_PREFIX, f"a lowercase name prefix such as '{example}' (a-z, 0-9)")


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
    "links": ({"server_leaf": (LINK, REQUIRED), "leaf_spine": (LINK, OPTIONAL_SECTION),
               "spine_core": (LINK, OPTIONAL_SECTION), "intra_node": (LINK, OPTIONAL_SECTION)},
              REQUIRED),
    "routing": ({"policy": (choice(*POLICIES), "ecmp")}, {}),
    "addressing": ({"subnet": (subnet, "10.0.0.0/16"),
                    "nvlink_subnet": (subnet, "172.31.0.0/16")}, {}),
    "experiment": (passed_on, {}),
    "names": ({role: (_prefix(default), default) for role, default in (
        ("spine", "spine"), ("leaf", "leaf"), ("agg", "agg"), ("core", "core"),
        ("server", "h"))}, {}),
}

# What each kind of fabric takes in `fabric:` (beyond kind and mtu): required
# keys, optional keys, and the link classes it uses besides server_leaf.
KIND_KEYS = {
    "leaf-spine": (("spines", "leaves", "servers_per_leaf"), ("uplinks_per_spine",),
                   ("leaf_spine",)),
    "rail-optimized": (("spines", "servers_per_unit"), ("units", "uplinks_per_spine"),
                       ("leaf_spine",)),
    "fat-tree": (("k",), ("servers_per_leaf",), ("leaf_spine",)),
    "single-switch": (("servers",), (), ()),
    "full-mesh": (("servers",), (), ("leaf_spine",)),
}


def multi_gpu(spec: dict) -> bool:
    """Servers are node switches with GPU hosts behind them."""
    return spec["server"]["gpus"] > 1 or spec["server"]["nics"] > 1


def check_kind(spec: dict, source: str) -> None:
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
    _check_link_classes(spec, kind, links, source)
    _check_servers(spec, source)


def _check_link_classes(spec: dict, kind: str, links: tuple, source: str) -> None:
    unused = {"leaf_spine": not links, "spine_core": kind != "fat-tree",
              "intra_node": not multi_gpu(spec)}
    for key, idle in unused.items():
        if idle and spec["links"][key] is not None:
            why = ("servers have one GPU and one NIC" if key == "intra_node"
                   else f"a {kind} fabric has no such links")
            raise FabricError(source, f"links.{key}", f"not used here: {why}")
    f = spec["fabric"]
    if kind == "full-mesh" and f["servers"] > MAX_MESH:
        raise FabricError(source, "fabric.servers", (
            f"expected at most {MAX_MESH} servers in a full mesh (it needs n(n-1)/2 links: "
            f"{f['servers'] * (f['servers'] - 1) // 2} for {f['servers']})"))


def _check_servers(spec: dict, source: str) -> None:
    srv = spec["server"]
    if srv["nics"] > srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected at most one NIC per GPU ({srv['gpus']}), got {srv['nics']}"))
    nets = [ipaddress.IPv4Network(spec["addressing"][k]) for k in ("subnet", "nvlink_subnet")]
    if multi_gpu(spec) and nets[0].overlaps(nets[1]):
        raise FabricError(source, "addressing.nvlink_subnet", (
            f"expected a network apart from addressing.subnet ({nets[0]}), got {nets[1]}"))
    if multi_gpu(spec) and spec["links"]["intra_node"] is None:
        raise FabricError(source, "links.intra_node", (
            "missing; servers with several GPUs need the rate of their NVLink-class "
            "interconnect (much faster than the network)"))


def check_policy(fabric) -> None:
    """stp turns every bridge into a learning switch: the switches inside a
    multi-GPU server would carry other servers' traffic."""
    if fabric.policy == "stp" and multi_gpu(fabric.spec):
        raise FabricError(fabric.source, "routing.policy", (
            "stp is not available with servers of several GPUs or NICs: spanning tree would "
            "make their NVSwitch and PCIe switches transit bridges; use ecmp or single-path"))


def check_whole(fabric) -> None:
    """Checks that need the derived fabric: sizes, collisions, name lengths."""
    source = fabric.source
    if len(fabric.endpoints) > MAX_SERVERS or len(fabric.switches) > MAX_SWITCHES:
        raise FabricError(source, "fabric", (
            f"too large for this host: {len(fabric.endpoints)} servers and "
            f"{len(fabric.switches)} switches; at most {MAX_SERVERS} servers and "
            f"{MAX_SWITCHES} switches can be emulated here"))
    per_leaf: Dict[str, int] = {}
    for h in fabric.endpoints:
        per_leaf[h.leaf] = per_leaf.get(h.leaf, 0) + 1
    crowded = [leaf for leaf, n in per_leaf.items() if n > MAX_PER_LEAF]
    if crowded:
        raise FabricError(source, "fabric", (
            f"too many endpoints behind {crowded[0]} ({per_leaf[crowded[0]]}); at most "
            f"{MAX_PER_LEAF} can be addressed behind one leaf"))
    names = [s.name for s in fabric.switches] + [h.name for h in fabric.endpoints]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise FabricError(source, "names", (
            f"expected prefixes that give every node its own name, but two nodes "
            f"would both be called {dup!r}"))
    _check_interface_names(fabric)


def _check_interface_names(fabric) -> None:
    role_of = {s.name: ("server" if s.role in ("node", "nvswitch") else s.role)
               for s in fabric.switches}
    role_of.update((h.name, "server") for h in fabric.endpoints)
    longest = {}
    for link in fabric.links:
        for node, intf in ((link.a, link.a_intf), (link.b, link.b_intf)):
            role = role_of[node]
            if len(intf) >= len(longest.get(role, "")):
                longest[role] = intf
    for role, intf in sorted(longest.items()):
        if len(intf) > IFNAME_MAX:
            raise FabricError(fabric.source, f"names.{role}", (
                f"expected a shorter prefix: it makes interface names like {intf!r} "
                f"({len(intf)} characters) and Linux allows {IFNAME_MAX}"))


# --- the loader ---------------------------------------------------------------------

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


def load_yaml(text_: str, source: str) -> Any:
    """The YAML document in `text_`, safely loaded; FabricError if it is not YAML."""
    try:
        return yaml.load(text_, Loader=_UniqueKeyLoader)  # noqa: S506 (safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FabricError(source, "", f"not valid YAML{where}: {problem}") from None


def read_text(path: Path) -> str:
    """A fabric file's text; FabricError if it cannot be read."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise FabricError(str(path), "", f"cannot read the fabric file: {reason}") from None


def normalise_fabric(raw: Any, source: str) -> dict:
    """The fabric section by section, kind-specific keys included."""
    spec = normalise(raw, SCHEMA, "", source)
    check_kind(spec, source)
    return spec
