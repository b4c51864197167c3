"""The one error every mistake in a fabric file becomes, and how a user's
value, key or file name appears in its message: printable, on one line,
shortened. Nothing a file holds can turn a one-sentence message into a
screenful, a traceback or an escape sequence that drives the terminal.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

SHOWN_MAX = 40
SOURCE_MAX = 120            # a file name as messages print it
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}")


def printable(text_: str, limit: int, tail: bool = False) -> str:
    """`text_` with control characters, escape codes and line breaks as
    \\x.. escapes, at most `limit` characters: longer ones end with '...'
    (or, with `tail`, start with it, keeping the end: a file's name)."""
    part = text_[-limit * 4:] if tail else text_[:limit * 4]
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                  for c in part)
    if len(out) <= limit:
        return out
    return "..." + out[3 - limit:] if tail else out[:limit - 3] + "..."


class FabricError(Exception):
    """A fabric the user described wrongly: one sentence naming file and key."""

    def __init__(self, source: str, keypath: str, message: str):
        self.source, self.keypath, self.message = source, keypath, message
        where = printable(str(source), SOURCE_MAX, tail=True)
        if keypath:
            where += f": {keypath}"
        super().__init__(f"{where}: {message}")


def shown(value: Any, limit: int = SHOWN_MAX) -> str:
    """`value` as a message quotes it: printable (control characters and
    escape codes as \\x.. escapes), on one line,
    at most `limit` characters (longer ones end with '...'), so no input can
    turn a one-sentence message into a screenful or drive the terminal.
    Booleans and null as YAML writes them."""
    if isinstance(value, (dict, list, tuple, set)):
        text_ = _brief_container(value, limit)
    elif isinstance(value, bool) or value is None:
        text_ = {True: "true", False: "false", None: "null"}[value]
    elif isinstance(value, str):
        text_ = repr(value[:limit * 4])
    else:
        text_ = str(value)
    return printable(text_, limit)


def shown_key(key: Any) -> str:
    """A key as it appears in a key path: as written when it is a plain
    name, else quoted and escaped as `shown` does."""
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        return key
    return shown(key, 24)


def kind_of(value: Any) -> str:
    """What a YAML value is, in words: 'the number 3', 'the text 'x''..."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {shown(value)}"
    if isinstance(value, (int, float)):
        return f"the number {shown(value)}"
    if isinstance(value, str):
        return f"the text {shown(value)}"
    if isinstance(value, dict):
        return f"a mapping {shown(value)}"
    if isinstance(value, list):
        return f"a list {shown(value)}"
    return f"{type(value).__name__} {shown(value)}"


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


MESSAGE_MAX = 200          # an argparse message quoting what the user typed


class OneLineParser(argparse.ArgumentParser):
    """argparse whose mistakes raise `error_class` (one line, printable, at
    most MESSAGE_MAX characters) instead of printing the usage and exiting;
    an unknown argument is one of those mistakes, shown shortened."""

    error_class = ValueError

    def error(self, message):
        raise self.error_class(printable(message, MESSAGE_MAX))

    def parse_args(self, args=None, namespace=None):
        known, extra = self.parse_known_args(args, namespace)
        if extra:
            more = f" and {len(extra) - 1} more" if len(extra) > 1 else ""
            self.error(f"unrecognised argument {shown(extra[0])}{more}; see --help")
        return known
