"""What the planner accepts: the ranges of its inputs, the validators every
other module checks its arguments with, and PlanError, the one-sentence
refusal naming the parameter (the flag, on the command line)."""

from __future__ import annotations

import math

from toolkit.validators import parse_size
from toolkit.errors import shown

MIN_GPUS, MAX_GPUS = 2, 10_000_000
MIN_RADIX, MAX_RADIX = 4, 1024
MAX_GPUS_PER_SERVER = 72
MAX_GRADIENT_BYTES = 1 << 50       # 1 PiB
# The command line's other ranges: wide enough for any real cluster, narrow
# enough that every figure the report prints is a finite number.
MIN_GBPS, MAX_GBPS = 1e-5, 1e6     # 10 kbit/s (the emulator's slowest link) to 1 Pbit/s
MAX_OVERSUBSCRIPTION = MAX_RADIX - 1   # one uplink per leaf
MIN_PFLOPS, MAX_PFLOPS = 1e-6, 1e4     # per GPU: 1 GFLOP/s to 10 EFLOP/s
MAX_FLOPS = 1e30                   # a training run (today's largest are near 1e26)
MAX_ALPHA_US = 1e6                 # one second per step


class PlanError(ValueError):
    """An input the planner cannot use: one sentence naming the parameter."""


def number(name, value, what="a number"):
    """`value` if it is a finite int or float (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or (isinstance(value, float) and not math.isfinite(value)):
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return value


def whole(name, value, lo, hi, what=None):
    """An int from `lo` to `hi`; a float is accepted when it is whole (2e5)."""
    what = what or f"a whole number from {lo:,} to {hi:,}"
    number(name, value, what)
    if isinstance(value, float):
        if not value.is_integer():
            raise PlanError(f"{name} must be {what}, got {shown(value)}")
        value = int(value)
    if not lo <= value <= hi:
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return value


def positive(name, value):
    what = "a number greater than 0"
    if number(name, value, what) <= 0:
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return float(value)


def at_least_one(name, value):
    what = "a number of at least 1"
    if number(name, value, what) < 1:
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return float(value)


def non_negative(name, value):
    what = "a number of at least 0"
    if number(name, value, what) < 0:
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return value


def fraction(name, value):
    what = "a number greater than 0 and at most 1"
    if not 0 < number(name, value, what) <= 1:
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return float(value)


def between(name, value, lo, hi):
    """A finite number from `lo` to `hi`, as a float."""
    what = f"a number from {_figure(lo)} to {_figure(hi)}"
    if not lo <= number(name, value, what) <= hi:
        raise PlanError(f"{name} must be {what}, got {shown(value)}")
    return float(value)


def _figure(x) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e7 else f"{x:g}"


def radix(name, value):
    """Ports per switch: an even whole number from MIN_RADIX to MAX_RADIX."""
    what = f"an even whole number from {MIN_RADIX} to {MAX_RADIX:,} (ports per switch)"
    value = whole(name, value, MIN_RADIX, MAX_RADIX, what)
    if value % 2:
        raise PlanError(f"{name} must be {what}, got {value}")
    return value


def nics_per_server(value, gpus_per_server):
    """NICs of a server: at least one, at most one per GPU."""
    return whole("nics_per_server", value, 1, gpus_per_server,
                 f"a whole number from 1 to gpus_per_server ({gpus_per_server})")


def parse_bytes(text, name="gradient bytes") -> int:
    """'1G' -> 1073741824, '512M', '64K', '1.5K', '1048576' (K/M/G/T are powers
    of 1024; a trailing B or iB is allowed: 1GiB), from 1 byte to 1 PiB. The
    project's one size syntax: topologies.schema.parse_size."""
    value = parse_size(text if isinstance(text, (int, str)) else str(text), whole=False,
                       exact=True)
    if value is None:
        raise PlanError(f"{name} must be a size such as 1048576, 512M or 1G, got {shown(text)}")
    if not 1 <= value <= MAX_GRADIENT_BYTES:
        raise PlanError(f"{name} must be from 1 byte to 1 PiB, got {shown(text)}")
    return int(round(value))          # the exact fraction's nearest (a float's can be one off)
