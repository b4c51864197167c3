"""The fabric YAML's schema: field validators, the schema itself, and the
checks that each kind of fabric gets exactly the keys it takes. What a kind
takes, and its own checks, are the kind's (topologies/kinds/): the
``fabric:`` section is made from the registered kinds.

A validator is a function ``check(value, fail)`` that returns the normalised
value or calls ``fail(message)``; `normalise` walks a schema (a dict of
``key: (validator or sub-schema, default)``) over the loaded YAML and turns
the first mistake into a `FabricError` naming the file, the key and what was
expected. Each validator also carries its JSON Schema (``check.json_schema``:
type, bounds, enum, pattern, description), from which topologies/jsonschema.py
derives the schema editors read: one schema, two uses. The same validators
check the ``experiment:`` section (its schema lives with the experiment, in
runs/experiment.py, which knows the collectives and engines) and the
planner's fabric inputs.

The error type and how values are quoted live in errors.py, the file reader
and the YAML loader in yaml_loader.py (both re-exported here); checks of the
derived fabric (sizes, physics, names) in sanity.py. Nothing in this module
touches the system.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import math
from fractions import Fraction
import re
from pathlib import Path
from typing import Any, Callable

from topologies import hardware, kinds
from topologies.units import RATE_PATTERN, parse_rate_mbit
from topologies.errors import FabricError, kind_of, printable, shown, shown_key  # noqa: F401
from topologies.roles import ROLES
from topologies.limits import (EMULATED_RATE_MBIT, IFNAME_MAX, MAX_GPUS,  # noqa: F401
                               MAX_PER_LEAF, MAX_RACK_GPUS, MAX_RATE_MBIT)
from topologies.yaml_loader import load_yaml, looks_numeric, read_text  # noqa: F401
from policies import all_policies
import networks

MIN_RATE_MBIT = 0.01        # 10 kbit/s: below that HTB's arithmetic stops being a rate
POLICIES = tuple(all_policies())       # the registry's (policies/), in its order


def _network_names() -> str:
    """"infiniband: ..., roce: ..., ...": each technology's one clause."""
    return "; ".join(t.summary for t in networks.all_networks().values())


def _policy_names() -> str:
    """"ecmp, single-path, stp (no controller), ... or adaptive"."""
    named = [name + ("" if p.controller else " (no controller)")
             for name, p in all_policies().items()]
    return ", ".join(named[:-1]) + " or " + named[-1]
DEFAULT_KIND = "leaf-spine"
SUBNET_PREFIXES = (8, 16)   # /8 .. /16: <net>.l.k needs 16 host bits; shorter is not meant


# --- validators -------------------------------------------------------------------

REQUIRED = object()
OPTIONAL_SECTION = None     # a sub-schema that may be absent (a link class some kinds lack)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PREFIX = re.compile(r"[a-z][a-z0-9]{0,9}")
_ENDPOINT = re.compile(r"[a-z][a-z0-9]{0,14}")
_SIZE = re.compile(r"([0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20}) ?"
                   r"(?:([KMGTkmgt])(?:[iI]?[bB])?|[bB])?")
_SCIENTIFIC = re.compile(r"[0-9]{1,20}(?:\.[0-9]{0,20})?[eE]\+?[0-9]{1,2}")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_SUBNET = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}/(?:[0-9]{{1,2}})")
_SUBNET_JSON = rf"^{_OCTET}(?:\.{_OCTET}){{3}}/(?:[89]|1[0-6])$"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
# A machine of a cluster: an IPv4 address, or a host name of dot-separated
# labels (letters, digits, inner '-'), not all digits and dots. It reaches ssh
# and shell command lines, so nothing else passes (no user@, no leading '-').
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"{_IPV4}|(?![0-9.]*$){_LABEL}(?:\.{_LABEL}){{0,126}}")
HOST_MAX = 253              # characters of a DNS name
MAX_MACHINES = 64
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
TUNNELS = ("vxlan", "ssh")


class Section(dict):
    """A sub-schema, with what it is for (for the JSON Schema)."""

    def __init__(self, description: str, keys: dict):
        super().__init__(keys)
        self.description = description


def _meta(check: Callable, **json_schema) -> Callable:
    """`check` carrying its JSON Schema."""
    check.json_schema = json_schema
    return check


def described(description: str, check: Callable) -> Callable:
    """`check`, with a description for the JSON Schema."""
    def wrapped(v, fail):
        return check(v, fail)
    return _meta(wrapped, **getattr(check, "json_schema", {}), description=description)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _got(v: Any) -> str:
    """A value where a number was expected, as a message quotes it."""
    if isinstance(v, str) and looks_numeric(v.strip()):
        return f"the text {shown(v)}; write it without quotes"
    if isinstance(v, float) and not math.isfinite(v):
        return f"{shown(v)}, which is not a finite number"
    return shown(v)


def integer(lo: int, hi: int) -> Callable:
    def check(v, fail):
        if not is_int(v) or not lo <= v <= hi:
            fail(f"expected a whole number from {lo} to {hi}, got {_got(v)}")
        return v
    return _meta(check, type="integer", minimum=lo, maximum=hi)


def number(lo: float, hi: float, unit: str, below: str = "") -> Callable:
    """A finite number from lo to hi; with `below` (why), strictly below hi."""
    top = f"below {hi:g} ({unit}; {below})" if below else f"{hi:g} ({unit})"

    def check(v, fail):
        if (not _is_number(v) or (isinstance(v, float) and not math.isfinite(v))
                or not lo <= v <= hi or (below and v >= hi)):
            fail(f"expected a number from {lo:g} to {top}, got {_got(v)}")
        return v
    bound = {"exclusiveMaximum": hi} if below else {"maximum": hi}
    return _meta(check, type="number", minimum=lo, **bound)


def choice(*options: str) -> Callable:
    def check(v, fail):
        if not isinstance(v, str) or v not in options:
            fail(f"expected one of {', '.join(options)}, got {shown(v)}")
        return v
    return _meta(check, type="string", enum=list(options))


def flag(v, fail):
    if not isinstance(v, bool):
        fail(f"expected true or false, got {shown(v)}")
    return v


flag = _meta(flag, type="boolean")


def text(pattern: re.Pattern, what: str) -> Callable:
    """A text the whole of which matches `pattern` (no trailing newline slips by)."""
    def check(v, fail):
        if not isinstance(v, str) or not pattern.fullmatch(v):
            fail(f"expected {what}, got {shown(v)}")
        return v
    return _meta(check, type="string", pattern=f"^(?:{pattern.pattern})$")


def even(lo: int, hi: int) -> Callable:
    def check(v, fail):
        if not is_int(v) or not lo <= v <= hi or v % 2:
            fail(f"expected an even whole number from {lo} to {hi}, got {_got(v)}")
        return v
    return _meta(check, type="integer", minimum=lo, maximum=hi, multipleOf=2)


def subnet(v, fail):
    try:
        net = (ipaddress.IPv4Network(v, strict=True)
               if isinstance(v, str) and _SUBNET.fullmatch(v) else None)
    except ValueError:
        net = None
    lo, hi = SUBNET_PREFIXES
    if (net is None or not lo <= net.prefixlen <= hi or net.is_loopback or net.is_multicast
            or net.is_reserved or net.is_link_local or net.network_address.packed[0] == 0):
        fail(f"expected an IPv4 network from /{lo} to /{hi} such as 10.0.0.0/16 "
             f"(endpoint k of leaf l gets <net>.l.k), got {shown(v)}")
    return str(net)


_meta(subnet, type="string", pattern=_SUBNET_JSON)


def parse_size(v, whole: bool = True, exact: bool = False):
    """Bytes from 65536, "64K", "2M", "1G", "1GiB" or "1.5T" (powers of 1024, as
    nccl-tests); None if not a size. With `whole`, None too for a fraction of
    a byte; without, the value as a float where it is not whole (the
    planner rounds gradient sizes such as 1.2G), or with `exact` as a
    Fraction (a float of 4e12 bytes can be a byte off)."""
    if is_int(v):
        return v
    if isinstance(v, str) and _SCIENTIFIC.fullmatch(v):            # 1e6: a million bytes
        value = Fraction(v)
        return (int(value) if value.denominator == 1 else None if whole else
                value if exact else float(value))
    m = _SIZE.fullmatch(v) if isinstance(v, str) else None
    if not m:
        return None
    unit = 1024 ** " KMGT".index((m.group(2) or " ").upper())
    integral, _, fraction = m.group(1).partition(".")
    numerator = int((integral + fraction) or "0") * unit
    denominator = 10 ** len(fraction)
    if numerator % denominator == 0:
        return numerator // denominator
    if whole:
        return None
    return Fraction(numerator, denominator) if exact else numerator / denominator


def size(lo: int, hi: int) -> Callable:
    def check(v, fail):
        n = parse_size(v)
        if n is None or not lo <= n <= hi:
            fail(f"expected a size in bytes from {lo} to {hi} (a number, or with K, M or G), "
                 f"got {shown(v)}")
        return n
    return _meta(check, anyOf=[{"type": "integer", "minimum": lo, "maximum": hi},
                               {"type": "string", "pattern": f"^(?:{_SIZE.pattern})$"},
                               {"type": "string", "pattern": f"^(?:{_SCIENTIFIC.pattern})$"}])


def rate(lo: float, hi: float) -> Callable:
    """A link rate in Mbit/s: a number, or a text with its unit (400G,
    400Gbit/s, 900GB/s: topologies/units.py); a number in quotes ("20") is
    refused, as every number in a fabric file is."""
    def check(v, fail):
        if isinstance(v, str) and looks_numeric(v.strip()):    # "20": a number in quotes
            fail(f"expected a number from {lo:g} to {hi:g} (Mbit/s), got {_got(v)}")
        mbit = parse_rate_mbit(v)
        if mbit is None or not lo <= mbit <= hi:
            unread = " (or a rate with its unit, such as 400G or 900GB/s)" if mbit is None \
                and isinstance(v, str) else ""
            got = shown(v) if isinstance(v, str) else _got(v)      # quotes are fine here
            fail(f"expected a number from {lo:g} to {hi:g} (Mbit/s), got {got}{unread}")
        return v if _is_number(v) and not isinstance(v, bool) else mbit
    return _meta(check, anyOf=[{"type": "number", "minimum": lo, "maximum": hi},
                               {"type": "string", "pattern": RATE_PATTERN}])


def optional(check: Callable) -> Callable:
    """A key that may be left out (None): the experiment's own default applies."""
    def wrapped(v, fail):
        return None if v is None else check(v, fail)
    return _meta(wrapped, anyOf=[getattr(check, "json_schema", {}), {"type": "null"}])


def endpoint_pair(v, fail):
    if (not isinstance(v, list) or len(v) != 2
            or not all(isinstance(x, str) and _ENDPOINT.fullmatch(x) for x in v)):
        fail(f"expected two server names such as [h1, h4], got {shown(v)}")
    return v


_meta(endpoint_pair, type="array", minItems=2, maxItems=2,
      items={"type": "string", "pattern": f"^(?:{_ENDPOINT.pattern})$"})


# A link failure during a run: LINK@SECONDS[+DURATION][:KIND], LINK a link's
# two nodes (leaf1-spine2) or `random`; seconds after the sweep starts; KIND
# down (the carrier drops, the default), silent (frames lost, carrier up) or
# flap (down and up every FLAP_PERIOD_S for the duration).
FAILURE_KINDS = ("down", "silent", "flap")
MAX_FAILURES, MAX_FAIL_SECONDS = 16, 86400
_SECONDS = r"[0-9]{1,5}(?:\.[0-9]{1,3})?"
_FAILURE = re.compile(rf"(random|{_ENDPOINT.pattern}-{_ENDPOINT.pattern})@({_SECONDS})"
                      rf"(?:\+({_SECONDS}))?(?::({'|'.join(FAILURE_KINDS)}))?")


def split_failure(item: str):
    """(link, at, duration or None, kind) of a checked failure."""
    m = _FAILURE.fullmatch(item)
    return (m.group(1), float(m.group(2)), float(m.group(3)) if m.group(3) else None,
            m.group(4) or "down")


def failures(v, fail):
    """1..MAX_FAILURES link failures, each LINK@SECONDS[+DURATION]."""
    if not isinstance(v, list) or not 1 <= len(v) <= MAX_FAILURES:
        fail(f"expected 1 to {MAX_FAILURES} failures such as [leaf1-spine1@2+1], got "
             f"{kind_of(v) if not isinstance(v, list) else f'{len(v)} of them'}")
    for item in v:
        m = _FAILURE.fullmatch(item) if isinstance(item, str) else None
        if not m:
            fail(f"expected LINK@SECONDS[+DURATION][:down|silent|flap] such as "
                 f"leaf1-spine1@2+1 (the link's two nodes, or random), got {shown(item)}")
        at, duration = float(m.group(2)), float(m.group(3) or 1)
        if at > MAX_FAIL_SECONDS or not 0 < duration <= MAX_FAIL_SECONDS:
            fail(f"{shown(item)}: expected seconds from 0 to {MAX_FAIL_SECONDS} and a duration "
                 f"above 0")
        if m.group(4) == "flap" and not m.group(3):
            fail(f"{shown(item)}: a flap needs a duration, such as leaf1-spine1@2+3:flap")
    return v


_meta(failures, type="array", minItems=1, maxItems=MAX_FAILURES,
      items={"type": "string", "pattern": f"^(?:{_FAILURE.pattern})$"})


def host(v, fail):
    if not isinstance(v, str) or len(v) > HOST_MAX or not _HOST.fullmatch(v):
        fail(f"expected a host name such as gpu-node1 or an IPv4 address such as "
             f"10.77.0.11, got {shown(v)}")
    return v


_meta(host, type="string", pattern=f"^(?:{_HOST.pattern})$")


def machines(v, fail):
    """1..MAX_MACHINES distinct hosts (ssh destinations)."""
    if not isinstance(v, list) or not 1 <= len(v) <= MAX_MACHINES:
        got = (kind_of(v) if not isinstance(v, list)
               else "an empty list" if not v else f"{len(v)} machines")
        fail(f"expected a list of 1 to {MAX_MACHINES} machines (host names or IPv4 "
             f"addresses), got {got}")
    for i, item in enumerate(v):
        host(item, lambda message: fail(f"{message} as machine {i + 1}"))
        if item in v[:i]:
            fail(f"expected each machine once, got {shown(item)} twice")
    return list(v)


_meta(machines, type="array", minItems=1, maxItems=MAX_MACHINES, uniqueItems=True,
      items=host.json_schema)


def passed_on(v, fail):
    """A section another module validates (the experiment, in traffic/): kept as written."""
    return copy.deepcopy(v)


_meta(passed_on, type="object")


def normalise(value: Any, schema: dict, path: str, source: str) -> dict:
    """`value` checked against `schema`, defaults filled in; FabricError at the
    first mistake, naming its key path."""
    def fail_at(key_path):
        def fail(message):
            raise FabricError(source, key_path, message)
        return fail

    if not isinstance(value, dict):
        if value is None and not path:
            fail_at(path)(f"is empty; expected a mapping with keys {', '.join(schema)}")
        fail_at(path)(f"expected a mapping with keys {', '.join(schema)}, got {kind_of(value)}")
    _check_keys(value, schema, path, fail_at)
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


def _check_keys(value: dict, schema: dict, path: str, fail_at) -> None:
    """Every key a name of the schema's; a near miss suggested."""
    expected = ", ".join(schema)
    for key in value:
        if not isinstance(key, str):
            fail_at(path)(f"expected names as keys ({expected}), got {kind_of(key)} as a key")
        if key not in schema:
            close = difflib.get_close_matches(key, schema, n=1) if len(key) <= 64 else []
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            listed = ("" if close and len(schema) > 10 else
                      f"; expected one of {expected}" if len(expected) <= 150 else
                      "; the keys are in docs/fabric.md")
            fail_at(_join(path, key))(f"unknown key{hint}{listed}")


def _join(path: str, key: Any) -> str:
    return f"{path}.{shown_key(key)}" if path else shown_key(key)


# --- the fabric's schema ------------------------------------------------------------

LINK = {
    "rate_mbit": (described("the rate, both directions, in Mbit/s or with its unit (400G, "
                            f"900GB/s); HTB's when emulated, at most {EMULATED_RATE_MBIT:,} "
                            "Mbit/s there", rate(MIN_RATE_MBIT, MAX_RATE_MBIT)), REQUIRED),
    "queue_packets": (described("egress queue of every interface (pfifo), in packets",
                                integer(1, 100_000)), 100),
    "delay_ms": (described("one-way delay; needs the kernel's sch_netem",
                           number(0, 10_000, "ms")), 0),
    "loss_percent": (described("random loss; needs sch_netem", number(
        0, 100, "%", below="at 100 nothing would arrive")), 0),
}


def _prefix(role: str, example: str) -> Callable:
    return described(f"name prefix of the {role}", text(
        _PREFIX, f"a lowercase name prefix such as '{example}' (a-z, 0-9)"))


def _count(key: str, count: kinds.Count) -> Callable:
    """A count of `fabric:`, described with the kinds that take it."""
    takers = ", ".join(k.name for k in kinds.kinds() if key in k.takes())
    description = f"{count.what} ({takers}){count.note}" if count.named and takers else count.what
    check = even(count.lo, count.hi) if count.even else integer(count.lo, count.hi)
    return described(description, optional(check))


def _fabric_section() -> Section:
    """`fabric:` as the registered kinds make it: the kind, every count a kind
    takes, the MTU."""
    keys = {"kind": (described("the kind of fabric", choice(*kinds.names())), DEFAULT_KIND)}
    keys.update((key, (_count(key, count), None)) for key, count in kinds.counts().items())
    keys["mtu"] = (described("MTU of every interface", integer(1280, 9216)), 1500)
    return Section("what to build: the kind of fabric and its counts", keys)


SCHEMA = {
    "name": (described("names the results folder (default: the file name)", text(
        _NAME, "a name of letters, digits, '.', '_' or '-' (at most 64)")), None),
    "fabric": None,             # the kinds' section: `_fabric_section`
    "server": (Section("what a server holds (default: one GPU, one NIC)", {
        "gpus": (described(f"GPUs per server; each GPU is a rank (above {MAX_GPUS}: a "
                           "rack-scale server.model)", integer(1, MAX_RACK_GPUS)), 1),
        "nics": (described("NICs per server, at most one per GPU", integer(1, MAX_RACK_GPUS)),
                 1),
        "model": (described("the server as sold (hgx-h100, ...): the simulator then prices "
                            "collectives with NCCL's channels, algorithms and protocols "
                            "(docs/simulator.md)", optional(choice(*hardware.SERVERS))), None),
        "interconnect": (described("how a server's GPUs meet: nvswitch (each GPU on the "
                                   "server's NVSwitch) or mesh (a direct link between every "
                                   "pair, AMD's Infinity Fabric; a NIC per GPU); default: the "
                                   "model's, else nvswitch", optional(choice(*hardware.SCALEUP))),
                         None),
        "nvlink_domain": (described("GPUs per NVLink domain, NCCL's node (default: the "
                                    "model's, at most server.gpus): a rack-scale model split "
                                    "into partitions such as NVL8", optional(
                                        integer(1, MAX_RACK_GPUS))), None),
    }), {}),
    "links": (Section("the rate and queue of each class of link", {
        "server_leaf": (Section("server (or NIC) to its leaf", LINK), REQUIRED),
        "leaf_spine": (Section("leaf to spine; fat-tree: edge to aggregation; full mesh: "
                               "the mesh cables", LINK), OPTIONAL_SECTION),
        "spine_core": (Section("fat-tree aggregation to core (default: as leaf_spine)", LINK),
                       OPTIONAL_SECTION),
        "intra_node": (Section("GPU to NVSwitch, or GPU to GPU on a mesh (and to the PCIe "
                               "switch when GPUs share NICs): servers with several GPUs or "
                               "NICs", LINK),
                       OPTIONAL_SECTION)}), REQUIRED),
    "network": (Section("the scale-out network technology (docs/networks.md): what its "
                        "switches and transport cost, how it routes by default, what it does "
                        "when a queue fills", {
        "technology": (described(_network_names(), choice(*networks.NETWORKS)),
                       networks.DEFAULT),
        "switch_latency_us": (described("one switch crossed, port to port, in microseconds "
                                        "(default: the technology's)",
                                        optional(number(0, 100, "us"))), None),
        "pfc": (described("roce: lossless by priority flow control (default true)",
                          optional(flag)), None),
        "ecn": (described("roce, roce-lossy: ECN marking with DCQCN rate control (default "
                          "true)", optional(flag)), None),
        "qps_per_connection": (described("roce, roce-lossy: queue pairs NCCL opens per "
                                         "connection (NCCL_IB_QPS_PER_CONNECTION, default 1): "
                                         "the flows ECMP hashes", optional(integer(1, 16))),
                               None),
        "sharp": (described("infiniband: the switches reduce (SHARP, NCCL's CollNet; default "
                            "false)", optional(flag)), None)}), {}),
    "routing": (Section("how the fabric is routed", {
        "policy": (described(f"{_policy_names()} (docs/routing.md; default: the network "
                             "technology's, ecmp on Ethernet, dmodk on InfiniBand)",
                             optional(choice(*POLICIES))), None),
        "entropy": (described("connections (source ports) a sender spreads each peer's pieces "
                              "over under flowlet and spray", integer(2, 64)), 16),
        "flowlet_gap_ms": (described("flowlet: the idle time, with everything sent "
                                     "acknowledged, after which a sender may change path",
                                     number(0, 10_000, "ms")), 1),
        "adaptive_interval_ms": (described("adaptive: how often the controller reads the "
                                           "switches' flow counters and re-places elephants",
                                           number(50, 10_000, "ms")), 200),
        "bfd_ms": (described("BFD on every link between switches at this interval (0: off): "
                             "a silent failure, frames lost with the carrier up, is then seen "
                             "within about 3 intervals", integer(0, 1000)), 0)}), {}),
    "addressing": (Section("IPv4 networks of the endpoints", {
        "subnet": (described("endpoint k behind leaf l gets <net>.l.k", subnet),
                   "10.0.0.0/16"),
        "nvlink_subnet": (described("the GPUs' NVSwitch addresses, apart from subnet", subnet),
                          "172.31.0.0/16")}), {}),
    "experiment": (described("what run_topology.py replays (checked by the experiment: see "
                             "docs/fabric.md)", passed_on), {}),
    "names": (Section("name prefixes, lowercase letters and digits", {
        name: (_prefix(what, default), default) for name, what, default in (
            *((r.name, r.names, r.name) for r in ROLES.values() if r.names),
            ("server", "servers", "h"))}), {}),
    "cluster": (Section("the machines a cluster run spreads the fabric over (docs/fabric.md)", {
        "machines": (described("ssh destinations, host names or IPv4 addresses", machines),
                     REQUIRED),
        "user": (described("the user ssh logs in as (root, or one with passwordless sudo)",
                           text(_USER, "a user name such as root (a-z, 0-9, '_', '-')")),
                 "root"),
        "tunnel": (described("how links between machines are carried: vxlan, or ssh "
                             "(Tunnel=Ethernet)", choice(*TUNNELS)), "vxlan"),
        "controller": (described("address the controller listens on (default: the one this "
                                 "machine reaches the first machine from)", optional(host)),
                       None),
        "tls": (described("OpenFlow between the machines' switches and the controller over "
                          "TLS, with a CA and certificates made for each run (false: plain "
                          "TCP, for comparison)", flag), True)}), OPTIONAL_SECTION),
}

_built_for = [-1]                 # the registry's version SCHEMA's fabric section is of


def current() -> dict:
    """SCHEMA, its fabric section made anew when a kind was registered since."""
    if _built_for[0] != kinds.REGISTRY.version:
        SCHEMA["fabric"] = (_fabric_section(), REQUIRED)
        _built_for[0] = kinds.REGISTRY.version
    return SCHEMA


current()


def name_from_file(source: str) -> str:
    """A fabric's name when its file gives none: the file's stem, made a
    valid name (it names the results folder and is printed)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source).stem).strip("-._")[:64]
    return stem if _NAME.fullmatch(stem) else "fabric"


def multi_gpu(spec: dict) -> bool:
    """Servers are node switches with GPU hosts behind them."""
    return spec["server"]["gpus"] > 1 or spec["server"]["nics"] > 1


def normalise_fabric(raw: Any, source: str) -> dict:
    """The fabric section by section, kind-specific keys included; the
    network technology's options and default routing."""
    if isinstance(raw, dict) and isinstance(raw.get("network"), str):
        raw = {**raw, "network": {"technology": raw["network"]}}   # `network: infiniband`
    spec = normalise(raw, current(), "", source)
    check_kind(spec, source)
    _check_network(spec, source)
    return spec


def _check_network(spec: dict, source: str) -> None:
    """Each option the technology takes, no other; its routing by default
    (sanity.check_policy: one it can run)."""
    net = spec["network"]
    tech = networks.network(net["technology"])
    for key, value in net.items():
        if key in ("technology", "switch_latency_us") or value is None:
            continue
        if key not in tech.options:
            takers = [t.name for t in networks.all_networks().values() if key in t.options]
            raise FabricError(source, f"network.{key}", (
                f"not an option of {tech.name} ({tech.summary.split(': ', 1)[1]}); "
                f"{' and '.join(takers)} take{'s' if len(takers) == 1 else ''} it"))
    if spec["routing"]["policy"] is None:
        spec["routing"]["policy"] = tech.routing


# --- what each kind takes ---------------------------------------------------------

def check_kind(spec: dict, source: str) -> None:
    """Keys that only some kinds take: each kind gets exactly its own, then
    the kind's own checks (topologies/kinds/)."""
    f, name = spec["fabric"], spec["fabric"]["kind"]
    kind = kinds.kind(name)
    takes = ", ".join(kind.takes())
    for key in kind.required:
        if f[key] is None:
            raise FabricError(source, f"fabric.{key}", f"missing; a {name} fabric needs it "
                                                       f"(it takes {takes})")
    for key, value in f.items():
        if key not in ("kind", "mtu") + kind.takes() and value is not None:
            raise FabricError(source, f"fabric.{key}", f"not used by a {name} fabric "
                                                       f"(it takes {takes})")
    for key in kind.links:
        if spec["links"][key] is None:
            raise FabricError(source, f"links.{key}", f"missing; a {name} fabric needs this "
                                                      "link class")
    _check_link_classes(spec, kind, source)
    kind.check(spec, source)
    _check_servers(spec, source)


def _check_link_classes(spec: dict, kind: kinds.FabricKind, source: str) -> None:
    unused = {c: c not in kind.links + kind.optional_links for c in SCHEMA["links"][0]
              if c not in ("server_leaf", "intra_node")}
    unused["intra_node"] = not multi_gpu(spec)
    for key, idle in unused.items():
        if idle and spec["links"][key] is not None:
            why = ("servers have one GPU and one NIC" if key == "intra_node"
                   else f"a {kind.name} fabric has no such links")
            raise FabricError(source, f"links.{key}", f"not used here: {why}")


def nvlink_domain(srv: dict) -> int:
    """GPUs per NVLink domain (NCCL's node): the file's, else the model's,
    never more than the server's GPUs."""
    if srv.get("nvlink_domain"):
        return srv["nvlink_domain"]
    sold = srv.get("model") and hardware.SERVERS[srv["model"]]
    return min(sold.gpus, srv["gpus"]) if sold else srv["gpus"]


def _check_domain(srv: dict, sold, source: str) -> None:
    domain = srv["nvlink_domain"]
    if domain is None:
        return
    if domain > srv["gpus"] or srv["gpus"] % domain:
        raise FabricError(source, "server.nvlink_domain", (
            f"expected a divisor of server.gpus ({srv['gpus']}): each NVLink domain is a whole "
            f"share of the server, got {domain}"))
    if sold and domain != min(sold.gpus, srv["gpus"]):
        try:
            hardware.partition(sold, domain)
        except ValueError as exc:
            raise FabricError(source, "server.nvlink_domain", str(exc)) from None


def interconnect(srv: dict) -> str:
    """How a server's GPUs meet (`server.interconnect`): the file's, else the
    model's GPUs', else an NVSwitch."""
    sold = srv.get("model") and hardware.SERVERS[srv["model"]]
    return srv.get("interconnect") or (sold.gpu.scaleup if sold else "nvswitch")


def _check_interconnect(srv: dict, sold, source: str) -> None:
    """A mesh as the model has it, a NIC per GPU, not split into domains;
    the file's choice (or the model's) written into the spec."""
    given, way = srv["interconnect"], interconnect(srv)
    if sold and given and given != sold.gpu.scaleup:
        raise FabricError(source, "server.interconnect", (
            f"expected {sold.gpu.scaleup} for a {sold.name} (server.model), whose "
            f"{sold.gpu.name} GPUs {'are fully meshed' if sold.gpu.mesh else 'sit on NVSwitches'}"
            f", got {given}"))
    if way == "mesh" and srv["nics"] != srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected a NIC per GPU ({srv['gpus']}) with server.interconnect mesh: GPUs sharing "
            f"NICs through a PCIe switch are not modelled on a mesh, got {srv['nics']}"))
    if way == "mesh" and nvlink_domain(srv) != srv["gpus"]:
        raise FabricError(source, "server.nvlink_domain", (
            f"expected all {srv['gpus']} GPUs with server.interconnect mesh: a full mesh of links "
            f"has no switches a partition could divide, got {nvlink_domain(srv)}"))
    srv["interconnect"] = way


def _check_servers(spec: dict, source: str) -> None:
    srv = spec["server"]
    if srv["nics"] > srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected at most one NIC per GPU ({srv['gpus']}), got {srv['nics']}"))
    sold = srv["model"] and hardware.SERVERS[srv["model"]]
    if sold and srv["gpus"] > sold.gpus:
        raise FabricError(source, "server.gpus", (
            f"expected at most the {sold.gpus} GPUs of a {sold.name} (server.model), "
            f"got {srv['gpus']}"))
    if not sold and srv["gpus"] > MAX_GPUS:
        racks = ", ".join(n for n, s in hardware.SERVERS.items() if s.gpus > MAX_GPUS)
        raise FabricError(source, "server.gpus", (
            f"expected at most {MAX_GPUS} without a rack-scale server.model ({racks}), whose "
            f"NVLink domain holds them, got {srv['gpus']}"))
    _check_domain(srv, sold, source)
    _check_interconnect(srv, sold, source)
    nets = [ipaddress.IPv4Network(spec["addressing"][k]) for k in ("subnet", "nvlink_subnet")]
    if multi_gpu(spec) and nets[0].overlaps(nets[1]):
        raise FabricError(source, "addressing.nvlink_subnet", (
            f"expected a network apart from addressing.subnet ({nets[0]}), got {nets[1]}"))
    if multi_gpu(spec) and spec["links"]["intra_node"] is None:
        raise FabricError(source, "links.intra_node", (
            "missing; servers with several GPUs need the rate of their NVLink-class "
            "interconnect (much faster than the network)"))
