"""The validators every input of the project is checked with (a fabric
file, an experiment section, the planner's and the command lines' values):
a validator is a function ``check(value, fail)`` that returns the normalised
value or calls ``fail(message)``; `normalise` walks a schema (a dict of
``key: (validator or sub-schema, default)``) over loaded YAML and turns the
first mistake into a `FabricError` naming the file, the key and what was
expected. Each validator carries its JSON Schema (``check.json_schema``:
type, bounds, enum, pattern, description), from which
topologies/jsonschema.py derives the schema editors read.

What a fabric is (its sections, its kinds, its limits) is the model's,
topologies/schema.py; these know nothing of it.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import math
import re
from fractions import Fraction
from typing import Any, Callable

from toolkit.errors import FabricError, kind_of, shown, shown_key
from toolkit.units import RATE_PATTERN, parse_rate_mbit
from toolkit.yaml_loader import looks_numeric

SUBNET_PREFIXES = (8, 16)   # /8 .. /16: <net>.l.k needs 16 host bits; shorter is not meant

REQUIRED = object()
OPTIONAL_SECTION = None     # a sub-schema that may be absent (a link class some kinds lack)
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
    400Gbit/s, 900GB/s: toolkit/units.py); a number in quotes ("20") is
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
