"""Numbers as users write them: one syntax for the fabric files, the
command-line flags and the planner.

- **counts** (GPUs, parameters, FLOPs, ports): ``200000``, ``200,000``,
  ``200_000``, ``2e5``, ``200k``, ``70B`` (billion), ``1.3G``, ``2T``: SI
  prefixes, powers of 1000 (k or K, M, G or B, T, P); ``Ki``, ``Mi``,
  ``Gi``, ``Ti`` for powers of 1024.
- **sizes** in bytes (toolkit.validators.parse_size): as nccl-tests takes
  them, K, M, G and T are powers of 1024 (``64K``, ``1G``, ``1GiB``); ``1e6``
  is a million bytes.
- **rates**: a plain number is in the unit the key or flag names (Mbit/s
  for ``rate_mbit``, Gbit/s for ``--link-gbps``); with a unit, bits or
  bytes per second with SI prefixes: ``400G``, ``400Gbit/s``, ``400Gb/s``,
  ``400Gbps``; ``900GB/s`` or ``900GBps`` are bytes (x 8).
- **ratios**: ``2:1``, ``3.92:1``, or the number ``2``.

Each parser returns None for a text it cannot read; the caller's message
names the key or flag.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Optional, Union

Number = Union[int, float]

_DIGITS = r"(?:[0-9]{1,3}(?:[,_][0-9]{3})+|[0-9]+)(?:\.[0-9]*)?|\.[0-9]+"
_NUMBER = rf"(?P<num>[+-]?(?:{_DIGITS})(?:[eE][+-]?[0-9]{{1,3}})?)"
SI = {"": 1, "k": 10 ** 3, "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "B": 10 ** 9,
      "T": 10 ** 12, "P": 10 ** 15}
BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
_COUNT = re.compile(rf"\s*{_NUMBER}\s*(?P<unit>[KMGT]i|[kKMGBTP])?\s*")
_RATE = re.compile(rf"\s*{_NUMBER}\s*(?P<prefix>[kKMGT])?(?P<per>bit/s|bps|b/s|B/s|Bps)?\s*")
_RATIO = re.compile(rf"\s*{_NUMBER}\s*:\s*(?P<den>{_DIGITS})\s*")
RATE_PATTERN = (r"^\s*[0-9][0-9.,_eE+-]*\s*([kKMGT](bit/s|bps|b/s|B/s|Bps)?|bit/s|bps|b/s|B/s"
                r"|Bps)\s*$")                # a text has its unit: a plain number is unquoted
MBIT = {"": None, "k": 1e-3, "K": 1e-3, "M": 1.0, "G": 1e3, "T": 1e6}


def _value(text: str) -> Fraction:
    """The exact value of a number as written (commas and _ between groups)."""
    return Fraction(text.replace(",", "").replace("_", ""))


def parse_count(v, whole: bool = True) -> Optional[Number]:
    """A count from a number or a text with an SI or binary suffix (the
    module docstring); with `whole`, None where it is not a whole number."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        value = Fraction(v) if math.isfinite(v) else None
    else:
        m = _COUNT.fullmatch(v) if isinstance(v, str) and len(v) <= 64 else None
        if not m:
            return None
        unit = m.group("unit") or ""
        value = _value(m.group("num")) * (BINARY[unit] if unit in BINARY else SI[unit])
    if value is None:
        return None
    if value.denominator == 1:
        return int(value)
    return None if whole else _float(value)


def _float(value: Fraction) -> Optional[float]:
    """A Fraction as a float; None beyond a float's range (1e400)."""
    try:
        return float(value)
    except OverflowError:
        return None


def parse_rate_mbit(v, plain_mbit: float = 1.0) -> Optional[float]:
    """Mbit/s from a number (in units of `plain_mbit` Mbit/s: 1 for a
    ``rate_mbit`` key, 1000 for a Gbit/s flag) or a text with a unit."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) * plain_mbit if math.isfinite(v) else None
    m = _RATE.fullmatch(v) if isinstance(v, str) and len(v) <= 64 else None
    if not m:
        return None
    prefix, per = m.group("prefix") or "", m.group("per") or ""
    value = _float(_value(m.group("num")))
    if value is None:
        return None
    if not prefix and not per:
        return value * plain_mbit
    if not prefix:
        return value * 1e-6 * (8 if per in ("B/s", "Bps") else 1)     # bits (or bytes) per second
    return value * MBIT[prefix] * (8 if per in ("B/s", "Bps") else 1)


def parse_ratio(v) -> Optional[float]:
    """A ratio from ``2:1`` (or a number): the first over the second."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    m = _RATIO.fullmatch(v) if isinstance(v, str) and len(v) <= 64 else None
    if m:
        den = _value(m.group("den"))
        return _float(_value(m.group("num")) / den) if den else None
    value = parse_count(v, whole=False)
    return None if value is None else _float(Fraction(value))
