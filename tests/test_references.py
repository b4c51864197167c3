"""Sizes against references that do not come from the parser: values worked
out by hand, exact fractions (Python's Fraction reads "1.4" as 7/5), and a
round trip through the flags' own size formatter. A size of a fraction of a
byte is refused where bytes must be whole (parse_size), kept exact where they
need not be, and rounded to the nearest whole count by the planner's
gradient bytes and a step's parameter count."""

from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.inputs import parse_bytes
from toolkit.validators import parse_size
from runs.experiment import size_text
from sim.training_step import params_of

PROPERTY = settings(max_examples=400, deadline=None)
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _refuse(message):
    raise ValueError(message)


# (text, bytes exactly, the nearest whole byte), by hand: K is 1024
FRACTIONS = [
    ("1.4K", 1433.6, 1434),           # nearest is up (down: 1433)
    ("1.6K", 1638.4, 1638),           # nearest is down (up: 1639)
    ("0.3K", 307.2, 307),
    ("1.2G", 1288490188.8, 1288490189),
    ("2.7M", 2831155.2, 2831155),
]


@pytest.mark.parametrize("text,exact,nearest", FRACTIONS, ids=[f[0] for f in FRACTIONS])
def test_a_fraction_of_a_byte_is_refused_kept_exact_or_rounded_to_nearest(text, exact, nearest):
    """parse_size refuses it (whole bytes), keeps it exact (whole=False), and
    the planner rounds it to the nearest whole byte, neither up nor down."""
    assert parse_size(text) is None
    assert parse_size(text, whole=False) == exact
    assert parse_bytes(text) == nearest


# (text, the count by hand): counts take SI prefixes, powers of 1000
COUNTS = [("1.4K", 1400), ("0.3k", 300), ("1.2G", 1_200_000_000), ("70B", 70_000_000_000),
          ("2.7M", 2_700_000), ("1.5", 2), ("2.5", 2), ("1Ki", 1024)]


@pytest.mark.parametrize("text,count", COUNTS, ids=[c[0] for c in COUNTS])
def test_a_parameter_count_takes_si_prefixes_and_rounds_to_nearest_even(text, count):
    """70B parameters are 70e9, not 70 bytes' worth; a fraction rounds as
    Python rounds (half to even)."""
    assert params_of(text, _refuse) == count


# (text, bytes), by hand
WHOLE = [("0.5K", 512), ("1.5K", 1536), (".5M", 524288), ("64K", 65536), ("2M", 2097152),
         ("1G", 1 << 30), ("1GiB", 1 << 30), ("1.5T", 3 << 39), ("3 k", 3072), ("7b", 7),
         ("0.25K", 256), ("1.0625K", 1088), ("65536", 65536), (4096, 4096)]


@pytest.mark.parametrize("text,want", WHOLE, ids=[str(w[0]) for w in WHOLE])
def test_whole_sizes_parse_to_their_bytes(text, want):
    """Sizes that come to whole bytes, fractions of a unit among them."""
    assert parse_size(text) == want
    assert parse_size(text, whole=False) == want


@pytest.mark.parametrize("text", ["", "K", "1.2.3K", "-1K", "1X", "1e3K", "1.5e0", "1 KB B",
                                  "1e-3", None, 1.5])
def test_what_is_not_a_size(text):
    assert parse_size(text) is None


def test_a_size_in_scientific_notation_is_that_many_bytes():
    assert parse_size("1e6") == 1_000_000 and parse_size("1.5e3") == 1500
    assert parse_size("1.5e0", whole=False) == 1.5


@PROPERTY
@given(st.integers(1, 1 << 50))
def test_a_size_the_flags_print_parses_back(n):
    """size_text (4M, 64K, 1G or the number) and parse_size are inverses."""
    assert parse_size(size_text(n)) == n


@PROPERTY
@given(st.integers(0, 10 ** 6), st.sampled_from(sorted(UNITS)), st.sampled_from(("", "B", "iB")))
def test_a_whole_number_of_units_is_that_many_powers_of_1024(k, unit, suffix):
    assume(unit or not suffix.startswith("i"))
    text = f"{k}{unit}{suffix}"
    assert parse_size(text) == k * UNITS[unit]


@PROPERTY
@given(st.integers(0, 10 ** 4), st.text("0123456789", min_size=1, max_size=6),
       st.sampled_from(("K", "M", "G")))
def test_a_decimal_size_is_its_exact_fraction(whole, digits, unit):
    """k.ddd of a unit is the exact fraction of it: a whole byte count when it
    is one (else refused), the exact quotient without `whole`, and the
    nearest whole byte in the planner."""
    text = f"{whole}.{digits}{unit}"
    exact = Fraction(f"{whole}.{digits}") * UNITS[unit]
    if exact.denominator == 1:
        assert parse_size(text) == int(exact)
    else:
        assert parse_size(text) is None
    assert parse_size(text, whole=False) == float(exact)
    assume(exact >= 1 and exact.denominator != 2)          # no ties: their rule is not ours
    nearest = int(exact + Fraction(1, 2))
    assert parse_bytes(text) == nearest
