"""Reading a fabric file and loading its YAML, so that no file can hang the
reader, exhaust memory, recurse without end or be read differently from how
it reads: every problem becomes one FabricError sentence.

- The file: only a regular file is opened (a FIFO would block, /dev/zero
  never ends), of at most MAX_FILE_BYTES, in UTF-8.
- The YAML: one document, nesting at most MAX_DEPTH levels, at most
  MAX_VALUES values once aliases are expanded (an "alias bomb" of a few
  lines expands to billions), counted while it is composed, before anything
  walks it. Duplicate keys and keys that are lists or mappings are refused.
- Values resolve as in YAML 1.2's core schema, not PyYAML's YAML 1.1: only
  true and false (any case) are booleans (``yes``, ``no``, ``on``, ``off`` are
  text); integers are decimal, 0x.. or 0o..; floats include 1e2, .inf and
  .nan; ``12:30``, ``0b101`` and ``1_000`` are text. Merge keys (``<<: *a``)
  work; explicit tags other than the core ones are refused.
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from toolkit.errors import FabricError, printable, shown

MAX_FILE_BYTES = 1 << 20        # a fabric file is a page or two: 1 MiB is 1,000 times that
MAX_DEPTH = 32                  # a fabric file nests 4 levels (links.server_leaf.rate_mbit)
MAX_VALUES = 10_000             # ... and holds a few dozen values
MAX_NUMBER_CHARS = 100          # a number longer than this is not a count or a rate
TAG = "tag:yaml.org,2002:"

_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_BOOL = re.compile(r"(?i:true|false)")


def looks_numeric(text_: str) -> bool:
    """Whether a text would be a number had it been written without quotes."""
    return bool(_INT.fullmatch(text_) or _FLOAT.fullmatch(text_))


# --- the file -----------------------------------------------------------------------

_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def _refuse_special(mode: int, source: str) -> None:
    if not stat.S_ISREG(mode):
        what = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
        raise FabricError(source, "", f"is {what}; expected a fabric file (a regular YAML file)")


def _refuse_size(n_bytes: int, source: str) -> None:
    if n_bytes > MAX_FILE_BYTES:
        raise FabricError(source, "", f"is {quantity(n_bytes)}; a fabric file is at most "
                                      f"{quantity(MAX_FILE_BYTES)}")


def quantity(n_bytes: float) -> str:
    """A number of bytes for a message: '100 MB', '1 MiB', '3.2 kB'."""
    if n_bytes == 1 << 20:
        return "1 MiB"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"


def read_text(path: Path) -> str:
    """A fabric file's text; FabricError if it is not a regular file of at
    most MAX_FILE_BYTES of UTF-8, or cannot be read. The file's kind is
    checked before it is opened, and again on what was opened (it may have
    been swapped): a FIFO must not block, a device must not be read."""
    source = str(path)
    try:
        info = os.stat(path)
        _refuse_special(info.st_mode, source)
        _refuse_size(info.st_size, source)
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | os.O_CLOEXEC
        fd = os.open(path, flags)
        try:
            info = os.fstat(fd)
            _refuse_special(info.st_mode, source)
            data = _read_at_most(fd, MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)
    except (OSError, ValueError) as exc:             # ValueError: a NUL in the path
        reason = getattr(exc, "strerror", None) or printable(str(exc), 60)
        raise FabricError(source, "", f"cannot read the fabric file: {reason}") from None
    _refuse_size(len(data), source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text_ = exc.object                  # after a BOM, if any: where exc.start counts
        line = text_[:exc.start].count(b"\n") + 1
        raise FabricError(source, "", (
            f"is not UTF-8 text (byte 0x{text_[exc.start]:02x} at line {line}); expected a "
            "YAML file in UTF-8")) from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, total = [], 0
    while total < limit:
        chunk = os.read(fd, min(1 << 16, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


# --- the YAML -----------------------------------------------------------------------

class _TooMuch(yaml.YAMLError):
    """A document past one of the bounds: its own sentence, with where."""

    def __init__(self, what: str, expected: str, mark):
        where = f" (at line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        self.sentence = f"{what}{where}; {expected}"
        super().__init__(self.sentence)


class _BoundedComposer(Composer):
    """Composes nodes counting depth and values, aliases expanded: the
    counts are made as the document is read, so a bomb is refused after
    MAX_VALUES steps however large it would expand."""

    def __init__(self):
        super().__init__()
        self.depth, self.values, self.sizes = 0, 0, {}

    def _count(self, n: int, mark) -> None:
        self.values += n
        if self.values > MAX_VALUES:
            raise _TooMuch(f"holds more than {MAX_VALUES:,} values once its aliases are "
                           "expanded", f"expected at most {MAX_VALUES:,} (a fabric file holds a few dozen; "
                           "an alias bomb?)", mark)

    def compose_node(self, parent, index):
        event = self.peek_event()
        if self.check_event(AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:
                if id(node) not in self.sizes:
                    raise ComposerError(None, None, f"the alias *{printable(event.anchor, 24)} "
                                        "is inside the value it refers to", event.start_mark)
                self._count(self.sizes[id(node)], event.start_mark)
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _TooMuch(f"nests deeper than {MAX_DEPTH} levels",
                           f"expected at most {MAX_DEPTH} (a fabric file needs 4)",
                           event.start_mark)
        start = self.values
        self._count(1, event.start_mark)
        node = super().compose_node(parent, index)
        self.depth -= 1
        self.sizes[id(node)] = self.values - start
        return node


class _CoreResolver(BaseResolver):
    """YAML 1.2's core schema (and merge keys)."""


for _tag, _pattern, _first in (
        ("bool", _BOOL, "tTfF"), ("int", _INT, "-+0123456789"),
        ("float", _FLOAT, "-+0123456789."), ("null", re.compile(r"~|null|Null|NULL|"),
                                             ["~", "n", "N", ""]),
        ("merge", re.compile(r"<<"), "<")):
    _CoreResolver.add_implicit_resolver(TAG + _tag, re.compile(rf"(?:{_pattern.pattern})\Z"),
                                        list(_first))


class _CoreConstructor(SafeConstructor):
    """The core schema's values only; duplicate keys and keys that are not
    plain values refused."""

    yaml_constructors = {}

    def construct_bool(self, node):
        value = self.construct_scalar(node)
        if not _BOOL.fullmatch(value):
            raise ConstructorError(None, None, f"expected true or false, got {shown(value)}",
                                   node.start_mark)
        return value.lower() == "true"

    def construct_int(self, node):
        value = self._number_text(node, _INT, "a whole number")
        if value[:2] in ("0x", "0o"):
            return int(value[2:], 16 if value[1] == "x" else 8)
        return int(value, 10)

    def construct_float(self, node):
        value = self._number_text(node, _FLOAT, "a number")
        if value.lower().endswith(".inf"):
            return -math.inf if value.startswith("-") else math.inf
        return math.nan if value.lower() == ".nan" else float(value)

    def _number_text(self, node, pattern, what: str) -> str:
        value = self.construct_scalar(node)
        if len(value) > MAX_NUMBER_CHARS:
            raise ConstructorError(None, None, f"a number of {len(value):,} characters; "
                                   f"expected at most {MAX_NUMBER_CHARS}", node.start_mark)
        if not pattern.fullmatch(value):
            raise ConstructorError(None, None, f"expected {what}, got {shown(value)}",
                                   node.start_mark)
        return value

    def construct_map(self, node):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == TAG + "merge":
                continue
            if not isinstance(key_node, ScalarNode):
                what = "a list" if key_node.id == "sequence" else "a mapping"
                raise ConstructorError(None, None, f"a key must be a plain name, not {what}",
                                       key_node.start_mark)
            key = self.construct_object(key_node)
            if key in seen:
                raise ConstructorError(None, None, f"duplicate key {shown(key)}",
                                       key_node.start_mark)
            seen.add(key)
        return self.construct_yaml_map(node)

    def construct_unknown_tag(self, node):
        tag = "!!" + node.tag[len(TAG):] if node.tag.startswith(TAG) else node.tag
        raise ConstructorError(None, None, "expected plain values, lists and mappings, got "
                               f"the tag {printable(tag, 48)}", node.start_mark)


for _tag, _constructor in (
        ("null", SafeConstructor.construct_yaml_null), ("bool", _CoreConstructor.construct_bool),
        ("int", _CoreConstructor.construct_int), ("float", _CoreConstructor.construct_float),
        ("str", SafeConstructor.construct_yaml_str), ("seq", SafeConstructor.construct_yaml_seq),
        ("map", _CoreConstructor.construct_map)):
    _CoreConstructor.add_constructor(TAG + _tag, _constructor)
_CoreConstructor.add_constructor(None, _CoreConstructor.construct_unknown_tag)


class _Loader(Reader, Scanner, Parser, _BoundedComposer, _CoreConstructor, _CoreResolver):

    def __init__(self, stream):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BoundedComposer.__init__(self)
        _CoreConstructor.__init__(self)
        _CoreResolver.__init__(self)


def load_yaml(text_: str, source: str) -> Any:
    """The one YAML document in `text_`, within the bounds above; FabricError
    in one line (with line and column where known) if it is not."""
    if len(text_) > MAX_FILE_BYTES:
        raise FabricError(source, "", f"is {quantity(len(text_))}; a fabric file is at most "
                                      f"{quantity(MAX_FILE_BYTES)}")
    loader = None
    try:
        loader = _Loader(text_)             # the reader checks every character here
        return loader.get_single_data()
    except _TooMuch as exc:
        raise FabricError(source, "", exc.sentence) from None
    except yaml.YAMLError as exc:
        raise FabricError(source, "", _yaml_problem(exc, text_)) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(exc: yaml.YAMLError, text_: str) -> str:
    if isinstance(exc, ComposerError) and exc.context == "expected a single document in the " \
                                                         "stream":
        line = exc.problem_mark.line + 1 if exc.problem_mark else "?"
        return f"holds more than one YAML document (another starts at line {line}); expected one"
    if isinstance(exc, yaml.reader.ReaderError):
        line = text_[:exc.position].count("\n") + 1
        column = exc.position - (text_.rfind("\n", 0, exc.position) + 1) + 1
        return (f"not valid YAML at line {line}, column {column}: the character "
                f"#x{exc.character:04x} is not allowed in YAML" if isinstance(exc.character, int)
                else f"not valid YAML at line {line}: {printable(exc.reason, 80)}")
    if isinstance(exc, ComposerError) and (exc.context or "").startswith("found duplicate anchor"):
        first = exc.context_mark.line + 1 if exc.context_mark else "?"
        line = exc.problem_mark.line + 1 if exc.problem_mark else "?"
        return (f"not valid YAML at line {line}: an anchor defined a second time (first at "
                f"line {first}); expected each &name once")
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = (getattr(exc, "problem", None) or getattr(exc, "context", None)
               or (str(exc).splitlines() or ["unreadable"])[0])
    return f"not valid YAML{where}: {printable(problem, 120)}"
