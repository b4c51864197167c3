"""Hostile and absurd fabric files: every one ends in one printable sentence
naming the file, the key, what was expected and what was got; never a
traceback, a hang, a flood of memory or silent acceptance. One table per
class of bad input: the file itself, the YAML's structure, YAML 1.1's
surprises, names and keys, numbers that cannot be meant (refused) or are
merely unwise (warned of); then the JSON Schema derived from the same schema."""

import json
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import topologies.fabric as fabric_module
from topologies.fabric import FabricError, load_fabric, parse_fabric, spec_counts
from topologies.jsonschema import json_schema
from toolkit.errors import shown
from toolkit.yaml_loader import load_yaml
from runs.experiment import experiment_from
from report.console import check_summary

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "topologies").glob("*.yaml"))
MAX_MESSAGE = 200

SMALL = "fabric: {kind: single-switch, servers: 2}\nlinks:\n  server_leaf: {rate_mbit: 10}\n"


def fabric_text(fabric=None, links=None, **sections) -> str:
    """A fabric file from sections (a single switch of 2 servers unless told)."""
    doc = {"fabric": fabric or {"kind": "single-switch", "servers": 2},
           "links": links or {"server_leaf": {"rate_mbit": 10}}, **sections}
    return yaml.safe_dump(doc)


def leaf_spine(spines=2, leaves=2, per_leaf=2, down=10, up=10, **fabric):
    return fabric_text({"spines": spines, "leaves": leaves, "servers_per_leaf": per_leaf,
                        **fabric}, {"server_leaf": {"rate_mbit": down},
                                    "leaf_spine": {"rate_mbit": up}})


def refusal(text_: str) -> FabricError:
    """The FabricError that parsing `text_` as t.yaml (and its experiment) ends in."""
    with pytest.raises(FabricError) as info:
        experiment_from(parse_fabric(text_, "t.yaml"))
    return info.value


def assert_one_sentence(error: FabricError, keypath: str, words, source: str = "t.yaml"):
    """One printable line, of at most MAX_MESSAGE characters besides the
    file's name, naming `keypath` and holding each of `words`."""
    message = str(error)
    assert message.startswith(f"{source}: ") and error.keypath == keypath, message
    assert "\n" not in message and message.isprintable(), message
    assert len(message) - len(source) <= MAX_MESSAGE, message
    for word in words:
        assert word in message, message


# --- 1. the file itself -----------------------------------------------------------------

def _sparse(size):
    def make(tmp_path):
        path = tmp_path / "big.yaml"
        with open(path, "wb") as f:
            f.truncate(size)
        return path
    return make


def _written(data: bytes, name="f.yaml"):
    def make(tmp_path):
        path = tmp_path / name
        path.write_bytes(data)
        return path
    return make


def _directory(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    return tmp_path / "dir.yaml"


def _symlink_loop(tmp_path):
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    return tmp_path / "a.yaml"


def _socket(tmp_path):                      # bound by a short relative path (the test is in
    sock = socket.socket(socket.AF_UNIX)    # tmp_path): AF_UNIX allows 108 bytes
    sock.bind("s.yaml")
    sock.close()
    return tmp_path / "s.yaml"


FILES = [
    # (what, make(tmp_path) -> path, expected words)
    ("a directory", _directory, ["is a directory; expected a fabric file"]),
    ("a character device", lambda _: Path("/dev/zero"), ["is a character device"]),
    ("a socket", _socket, ["is a socket"]),
    ("100 MB", _sparse(100_000_000), ["is 100 MB; a fabric file is at most 1 MiB"]),
    ("one byte over 1 MiB", _sparse((1 << 20) + 1), ["is 1.05 MB; a fabric file is at most"]),
    ("Latin-1", _written(b"name: caf\xe9\n"), ["is not UTF-8 text (byte 0xe9 at line 1)"]),
    ("UTF-16", _written("name: x\n".encode("utf-16")), ["is not UTF-8 text", "expected"]),
    ("a BOM, then Latin-1", _written(b"\xef\xbb\xbfa: 1\nname: caf\xe9\n"),
     ["is not UTF-8 text (byte 0xe9 at line 2)"]),
    ("empty", _written(b""), ["is empty; expected a mapping with keys name, fabric, server"]),
    ("only comments", _written(b"# nothing\n\n"), ["is empty; expected a mapping"]),
    ("missing", lambda p: p / "nope.yaml", ["cannot read the fabric file: No such file"]),
    ("a symlink loop", _symlink_loop, ["cannot read the fabric file: Too many levels"]),
    ("NUL bytes", _written(b"name: a\x00b\n"), ["not valid YAML at line 1, column 8",
                                                 "#x0000 is not allowed"]),
]


@pytest.mark.parametrize("what,make,words", FILES, ids=[f[0] for f in FILES])
def test_the_file_itself(tmp_path, monkeypatch, what, make, words):
    monkeypatch.chdir(tmp_path)
    path = make(tmp_path)
    with pytest.raises(FabricError) as info:
        load_fabric(path)
    assert_one_sentence(info.value, "", words, str(path))


def test_a_file_name_full_of_escapes_is_shown_printable(tmp_path):
    path = tmp_path / "\x1b[2J\nmy fabric.yaml"
    path.write_text(SMALL)
    assert load_fabric(path).name == "2J-my-fabric"          # it names the results folder
    path.write_text("fabric: 7\n")
    with pytest.raises(FabricError) as info:
        load_fabric(path)
    assert "\\x1b[2J\\nmy fabric.yaml: fabric: expected a mapping" in str(info.value)
    assert str(info.value).isprintable()


def test_a_utf8_bom_is_fine(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + SMALL.encode())
    assert len(load_fabric(path).endpoints) == 2


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-c", "import sys; from topologies.fabric import "
                           "load_fabric; load_fabric(sys.argv[1])", str(fifo)],
                          cwd=REPO, capture_output=True, text=True, timeout=30)
    assert "is a named pipe (FIFO); expected a fabric file" in proc.stderr


def test_a_nul_in_the_path_is_a_sentence_too():
    with pytest.raises(FabricError, match="cannot read the fabric file"):
        load_fabric("a\x00b.yaml")


# --- 2. the YAML's structure ------------------------------------------------------------

def _bomb(levels=9, width=9):
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _merge_bomb(levels=12):
    lines = ["a0: &a0 {x0: 1, y0: 2}"]
    lines += [f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], x{i}: 1}}" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _block_nest(depth):
    return "".join(f"{'  ' * i}k{i}:\n" for i in range(depth)) + f"{'  ' * depth}v\n"


STRUCTURE = [
    # (what, text, expected words)
    ("deep flow nesting", "name: " + "[" * 100_000 + "]" * 100_000 + "\n",
     ["nests deeper than 32 levels (at line 1, column", "expected at most 32"]),
    ("deep block nesting", _block_nest(40), ["nests deeper than 32 levels"]),
    ("deep mapping nesting", "a: " + "{a: " * 50 + "1" + "}" * 50 + "\n", ["nests deeper"]),
    ("billion laughs", _bomb(), ["holds more than 10,000 values once its aliases are expanded",
                                "alias bomb"]),
    ("a bomb by merge keys", _merge_bomb(), ["holds more than 10,000 values"]),
    ("many plain values", "name: [" + ", ".join(["1"] * 20_000) + "]\n",
     ["holds more than 10,000 values"]),
    ("a recursive alias", "name: &r [1, *r]\n", ["the alias *r is inside the value it refers"]),
    ("two documents", SMALL + "---\n" + SMALL,
     ["holds more than one YAML document (another starts at line 4); expected one"]),
    ("a document after an end marker", SMALL + "...\n---\nname: x\n",
     ["more than one YAML document"]),
    ("content after an end marker", SMALL + "...\nname: x\n", ["not valid YAML at line 5"]),
    ("an unclosed list", "fabric: [1, 2\nlinks: 3\n", ["not valid YAML at line 2, column"]),
    ("bad indentation", "fabric:\n  kind: leaf-spine\n kind: x\n", ["not valid YAML at line 3"]),
    ("a tab", "fabric:\n\tkind: x\n", ["not valid YAML at line 2, column 1", "'\\t'"]),
    ("a bad escape", 'name: "a\\qb"\n', ["not valid YAML at line 1", "escape character"]),
    ("an unterminated quote", "name: 'abc\n", ["not valid YAML at line 2"]),
    ("a duplicate key", SMALL + "fabric: {}\n", ["line 4, column 1: duplicate key 'fabric'"]),
    ("a duplicate anchor", "a: &x 1\nb: &x 2\n", ["an anchor defined a second time (first"]),
    ("an undefined alias", "name: *nowhere\n", ["found undefined alias"]),
    ("a Python tag", "name: !!python/object/apply:os.system [ls]\n",
     ["expected plain values, lists and mappings, got the tag !!python/object/apply:os.system"]),
    ("a custom tag", "name: !secret x\n", ["got the tag !secret"]),
    ("a timestamp tag", "name: !!timestamp nonsense\n", ["got the tag !!timestamp"]),
    ("a bad explicit int", "fabric: {servers: !!int many}\n", ["expected a whole number, got"]),
    ("a bad explicit bool", "fabric: {servers: !!bool yes}\n", ["expected true or false"]),
    ("a list as a key", "? [a, b]\n: 1\n", ["a key must be a plain name, not a list"]),
    ("a mapping as a key", "? {a: b}\n: 1\n", ["a key must be a plain name, not a mapping"]),
    ("a control character", "name: a\x07b\n", ["the character #x0007 is not allowed"]),
    ("an escape sequence", SMALL + "\x1b[31mred: 1\n", ["#x001b is not allowed"]),
    ("a 500-digit number", "fabric: {servers: " + "9" * 500 + "}\n",
     ["a number of 500 characters; expected at most 100"]),
]


class _TooMuchWork(BaseException):
    """Past the work budget (a BaseException, so no `except Exception` in the
    code under test swallows it)."""


def work(fn, budget: int) -> int:
    """The function calls (Python's and C's) `fn` makes, counted by a profile
    hook: a measure of work that does not depend on the host's speed. Past
    `budget` calls the run is stopped (a hang becomes a failure, not a wait)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1
            if calls > budget:
                sys.setprofile(None)
                raise _TooMuchWork(f"more than {budget:,} calls")
    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


# Refusing any of these takes at most ~1.5 million calls (10,000 plain values
# composed, then refused); a loader that expanded an alias bomb (9^9 values)
# or walked past the bounds would take hundreds of millions
STRUCTURE_WORK = 3_000_000


@pytest.mark.parametrize("what,text_,words", STRUCTURE, ids=[s[0] for s in STRUCTURE])
def test_the_yaml_structure(what, text_, words):
    """Refused in one sentence, within a fixed budget of work."""
    errors = []
    work(lambda: errors.append(refusal(text_)), STRUCTURE_WORK)
    assert_one_sentence(errors[0], "", words)


@pytest.mark.parametrize("what,small,large", [
    ("deep flow nesting", "name: " + "[" * 50_000 + "]" * 50_000 + "\n",
     "name: " + "[" * 200_000 + "]" * 200_000 + "\n"),
    ("many plain values", "name: [" + ", ".join(["1"] * 20_000) + "]\n",
     "name: [" + ", ".join(["1"] * 80_000) + "]\n"),
    ("billion laughs", _bomb(9), _bomb(12)),
    ("a bomb by merge keys", _merge_bomb(12), _merge_bomb(16)),
], ids=["deep flow nesting", "many plain values", "billion laughs", "a bomb by merge keys"])
def test_past_a_bound_the_work_does_not_grow_with_the_document(what, small, large):
    """A document four times larger (or a bomb of more levels) past a bound
    costs about the same work to refuse: the loader stops at the bound
    instead of reading on."""
    a, b = work(lambda: refusal(small), STRUCTURE_WORK), work(lambda: refusal(large),
                                                               STRUCTURE_WORK)
    assert b <= 1.1 * a + 1000, (a, b)


def test_merge_keys_still_work():
    f = parse_fabric("fabric: {kind: leaf-spine, spines: 2, leaves: 2, servers_per_leaf: 2}\n"
                     "links:\n  server_leaf: &link {rate_mbit: 10, queue_packets: 32}\n"
                     "  leaf_spine: {<<: *link, rate_mbit: 20}\n", "t.yaml")
    assert f.spec["links"]["leaf_spine"]["rate_mbit"] == 20
    assert f.spec["links"]["leaf_spine"]["queue_packets"] == 32


# --- 3. YAML 1.1's surprises ------------------------------------------------------------

READ_AS_YAML_1_2 = [
    # (YAML value, what it is)
    ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("Y", "Y"),
    ("true", True), ("False", False), ("TRUE", True),
    ("1e2", 100.0), ("1E2", 100.0), ("-2.5e-3", -0.0025), (".5", 0.5), ("5.", 5.0),
    ("0x1f", 31), ("0o17", 15), ("017", 17), ("+4", 4), ("-0", 0),
    ("12:30", "12:30"), ("1_000", "1_000"), ("0b101", "0b101"), ("2001-12-14", "2001-12-14"),
    ("~", None), ("null", None), ("Null", None), ("", None), ("=", "="),
]


@pytest.mark.parametrize("written,value", READ_AS_YAML_1_2, ids=[r[0] or "empty" for r in
                                                                  READ_AS_YAML_1_2])
def test_values_read_as_yaml_1_2_core(written, value):
    assert load_yaml(f"v: {written}\n", "t.yaml") == {"v": value}


def test_nan_and_infinities_are_floats():
    got = load_yaml("a: .nan\nb: .inf\nc: -.Inf\nd: 1e999\n", "t.yaml")
    assert got["a"] != got["a"] and got["b"] == got["d"] == float("inf")
    assert got["c"] == float("-inf")


YAML_1_1 = [
    # (what, text, key path, expected words)
    ("yes as a key", "yes: 1\n" + SMALL, "yes", ["yes: unknown key; expected one of name"]),
    ("on as a key", SMALL + "routing: {on: 1}\n", "routing.on", ["unknown key"]),
    ("off as a policy", SMALL + "routing: {policy: off}\n", "routing.policy",
     ["expected one of ecmp, single-path, stp, flowlet, spray, adaptive, dmodk, got 'off'"]),
    ("a rate in an unknown unit", fabric_text(links={"server_leaf": {"rate_mbit": "20 furlongs"}}),
     "links.server_leaf.rate_mbit", ["got '20 furlongs' (or a rate with its unit, such as 400G"]),
    ("a count in quotes", 'fabric: {kind: single-switch, servers: "4"}\n'
                          "links: {server_leaf: {rate_mbit: 10}}\n", "fabric.servers",
     ["expected a whole number from 1 to 200000, got the text '4'; write it without quotes"]),
    ("an exponent in quotes", SMALL.replace("10}", '"1e9"}'),
     "links.server_leaf.rate_mbit", ["to 1e+08 (Mbit/s), got the text '1e9'; write it without "
                                     "quotes"]),
    ("a rate in quotes", SMALL.replace("10}", '"20"}'), "links.server_leaf.rate_mbit",
     ["to 1e+08 (Mbit/s), got the text '20'; write it without quotes"]),
    ("a NaN rate", SMALL.replace("10}", ".nan}"), "links.server_leaf.rate_mbit",
     ["got nan, which is not a finite number"]),
    ("an infinite rate", SMALL.replace("10}", ".inf}"), "links.server_leaf.rate_mbit",
     ["got inf, which is not a finite number"]),
    ("an overflowing rate", SMALL.replace("10}", "1e999}"), "links.server_leaf.rate_mbit",
     ["not a finite number"]),
    ("a 100-digit rate", SMALL.replace("10}", "1" + "0" * 99 + "}"),
     "links.server_leaf.rate_mbit", ["got 1000000000000000000000000000000000000..."]),
    ("a negative infinite delay", SMALL.replace("10}", "10, delay_ms: -.inf}"),
     "links.server_leaf.delay_ms", ["got -inf, which is not a finite number"]),
    ("a NaN step factor", SMALL + "experiment: {stepfactor: .nan}\n", "experiment.stepfactor",
     ["not a finite number"]),
    ("an infinite count", SMALL.replace("servers: 2", "servers: .inf"), "fabric.servers",
     ["expected a whole number from 1 to 200000, got inf"]),
    ("sexagesimal", SMALL.replace("servers: 2", "servers: 1:30"), "fabric.servers",
     ["got '1:30'"]),
    ("underscores", SMALL.replace("servers: 2", "servers: 1_0"), "fabric.servers",
     ["got '1_0'"]),
    ("a boolean count", SMALL.replace("servers: 2", "servers: TRUE"), "fabric.servers",
     ["got true"]),
]


@pytest.mark.parametrize("what,text_,keypath,words", YAML_1_1, ids=[y[0] for y in YAML_1_1])
def test_yaml_1_1_surprises(what, text_, keypath, words):
    assert_one_sentence(refusal(text_), keypath, words)


def test_numbers_as_yaml_1_2_reads_them():
    f = parse_fabric("fabric: {kind: single-switch, servers: 0x10}\n"
                     "links: {server_leaf: {rate_mbit: 1e2}}\n", "t")
    assert len(f.endpoints) == 16 and f.spec["links"]["server_leaf"]["rate_mbit"] == 100.0
    assert parse_fabric(SMALL + "name: yes\n", "t").name == "yes"


# --- 4. names and keys ------------------------------------------------------------------

NAMES = [
    # (what, text, key path, expected words)
    ("a name ending in a newline", fabric_text(name="ab\n"), "name", ["got 'ab\\n'"]),
    ("a name with an escape", fabric_text(name="a\x1b[2Jb"), "name", ["got 'a\\x1b[2Jb'"]),
    ("a very long name", fabric_text(name="x" * 5000), "name", ["got 'xxxx", "..."]),
    ("a prefix ending in a newline", fabric_text(names={"server": "h\n"}), "names.server",
     ["expected a lowercase name prefix", "got 'h\\n'"]),
    ("a probe ending in a newline", fabric_text(experiment={"probe": ["h1\n", "h2"]}),
     "experiment.probe", ["expected two server names"]),
    ("a size ending in a newline", fabric_text(experiment={"maxbytes": "2M\n"}),
     "experiment.maxbytes", ["got '2M\\n'"]),
    ("a size in Arabic digits", fabric_text(experiment={"maxbytes": "\u0662M"}),
     "experiment.maxbytes", ["expected a size in bytes"]),
    ("a subnet ending in a newline", fabric_text(addressing={"subnet": "10.0.0.0/16\n"}),
     "addressing.subnet", ["expected an IPv4 network"]),
    ("a key with an escape code", SMALL + '"\\e[31mred": 1\n', "'\\x1b[31mred'",
     ["unknown key; expected one of name"]),
    ("a key with a newline", SMALL + 'links2: {"a\\nb": 1}\n', "links2", ["unknown key"]),
    ("a nested key with a newline", SMALL.replace("{rate_mbit: 10}", '{"rate\\n": 10}'),
     "links.server_leaf.'rate\\n'", ["unknown key; expected one of rate_mbit"]),
    ("a very long key", SMALL + '? "' + "k" * 5000 + '"\n: 1\n', "'kkkkkkkkkkkkkkkkkkkk...",
     ["unknown key"]),
    ("a number as a key", SMALL.replace("servers: 2", "servers: 2, 1: 2"), "fabric",
     ["expected names as keys (kind, spines", "got the number 1 as a key"]),
    ("a boolean as a key", "true: 1\n" + SMALL, "", ["got the boolean true as a key"]),
    ("null as a key", SMALL + "links2: {~: 1}\n", "links2", ["unknown key"]),
    ("null as a nested key", SMALL.replace("{rate_mbit: 10}", "{rate_mbit: 10, ~: 1}"),
     "links.server_leaf", ["got nothing (null) as a key"]),
    ("a float as a key", SMALL + "routing: {1.5: x}\n", "routing",
     ["got the number 1.5 as a key"]),
    ("a section that is a number", SMALL + "routing: 7\n", "routing",
     ["expected a mapping with keys policy, entropy, flowlet_gap_ms, adaptive_interval_ms, bfd_ms, got the number 7"]),
]


@pytest.mark.parametrize("what,text_,keypath,words", NAMES, ids=[n[0] for n in NAMES])
def test_names_and_keys(what, text_, keypath, words):
    assert_one_sentence(refusal(text_), keypath, words)


def test_shown_keeps_any_value_to_one_printable_line():
    for value in ("a\nb", "\x1b[31m", "x" * 1000, "\u202e", {"k": ["v"] * 100}, True, None):
        assert shown(value).isprintable() and len(shown(value)) <= 40


# --- 5. numbers that cannot be meant, and unwise ones -----------------------------------

ABSURD = [
    # (what, text, key path, expected words)
    ("a frame takes seconds", fabric_text({"kind": "single-switch", "servers": 2, "mtu": 9216},
                                          {"server_leaf": {"rate_mbit": 0.01}}),
     "links.server_leaf.rate_mbit",
     ["0.01 Mbit/s takes 7.4 s to send one 9230-byte frame", "expected at most 1 s",
      "at least 0.074 Mbit/s"]),
    ("a frame takes over a second", fabric_text(links={"server_leaf": {"rate_mbit": 0.011}}),
     "links.server_leaf.rate_mbit", ["takes 1.1 s"]),
    ("queues of gigabytes", fabric_text(
        {"spines": 4, "leaves": 4, "servers_per_leaf": 8, "mtu": 9216},
        {"server_leaf": {"rate_mbit": 10, "queue_packets": 100_000},
         "leaf_spine": {"rate_mbit": 10, "queue_packets": 100_000}}),
     "links.server_leaf.queue_packets",
     ["queues would hold up to 88.6 GB", "expected at most 2 GiB in all"]),
    ("oversubscription 100:1", leaf_spine(1, 2, 10, down=100, up=10),
     "fabric", ["oversubscription 100:1", "expected at most 64:1"]),
    ("oversubscription of a fat-tree", fabric_text(
        {"kind": "fat-tree", "k": 2, "servers_per_leaf": 64},
        {"server_leaf": {"rate_mbit": 10}, "leaf_spine": {"rate_mbit": 5}}),
     "fabric", ["oversubscription 128:1"]),
    ("oversubscription by rates", leaf_spine(2, 2, 8, down=100, up=5),
     "fabric", ["oversubscription 80:1"]),
    ("loss of 100%", fabric_text(links={"server_leaf": {"rate_mbit": 10, "loss_percent": 100}}),
     "links.server_leaf.loss_percent",
     ["expected a number from 0 to below 100 (%; at 100 nothing would arrive), got 100"]),
    ("a /1 subnet", fabric_text(addressing={"subnet": "128.0.0.0/1"}), "addressing.subnet",
     ["expected an IPv4 network from /8 to /16", "got '128.0.0.0/1'"]),
    ("a /7 subnet", fabric_text(addressing={"subnet": "10.0.0.0/7"}), "addressing.subnet",
     ["from /8 to /16"]),
    ("a /24 subnet", fabric_text(addressing={"subnet": "10.0.0.0/24"}), "addressing.subnet",
     ["from /8 to /16"]),
    ("2,048 GPUs", fabric_text(
        {"spines": 2, "leaves": 32, "servers_per_leaf": 8}, server={"gpus": 8, "nics": 8},
        links={"server_leaf": {"rate_mbit": 1}, "leaf_spine": {"rate_mbit": 1},
               "intra_node": {"rate_mbit": 10}}),
     "fabric", ["too large for this host: 2,048 GPUs (256 servers x 8); at most 512 GPUs"]),
    ("GPUs sharing a NIC", fabric_text(
        {"kind": "single-switch", "servers": 100}, server={"gpus": 16, "nics": 1},
        links={"server_leaf": {"rate_mbit": 1}, "intra_node": {"rate_mbit": 10}}),
     "fabric", ["1,600 GPUs (100 servers x 16)"]),
    ("6,400 servers", leaf_spine(2, 100, 64), "fabric",
     ["too large for this host: 6,400 servers; at most 512 servers"]),
    ("320 switches", fabric_text({"kind": "fat-tree", "k": 16, "servers_per_leaf": 1},
                                 {"server_leaf": {"rate_mbit": 10},
                                  "leaf_spine": {"rate_mbit": 10}}),
     "fabric", ["320 switches; at most 128 switches"]),
    ("4,160 links", leaf_spine(64, 64, 1), "fabric", ["4,160 links; at most 2,048 links"]),
]


ABSURD_TEXT = {what: text_ for what, text_, _, _ in ABSURD}
TOO_LARGE = ("2,048 GPUs", "GPUs sharing a NIC", "6,400 servers", "320 switches", "4,160 links")


@pytest.mark.parametrize("what,text_,keypath,words", ABSURD, ids=[a[0] for a in ABSURD])
def test_absurd_values_are_refused(what, text_, keypath, words):
    assert_one_sentence(refusal(text_), keypath, words)


def test_a_fabric_too_large_is_refused_before_it_is_built(monkeypatch):
    def never(*_args, **_kwargs):
        raise AssertionError("built a fabric that its spec already shows is too large")
    monkeypatch.setattr(fabric_module, "fabric_from_spec", never)
    for what in TOO_LARGE:
        assert "too large for this host" in str(refusal(ABSURD_TEXT[what]))


@pytest.mark.parametrize("servers", [100 * 64, 128 * 64])
def test_refusing_a_fabric_too_large_does_not_grow_with_it(servers):
    """Refusing 6,400 or 8,192 servers costs no more work than refusing 576
    (just past the 512 limit): the counts come from the spec's numbers,
    not from enumerating the servers."""
    errors = []
    just_past = work(lambda: errors.append(refusal(leaf_spine(2, 9, 64))), 100_000)
    larger = work(lambda: errors.append(refusal(leaf_spine(2, servers // 64, 64))), 100_000)
    assert len(errors) == 2 and all("too large for this host" in str(e) for e in errors), errors
    assert larger <= 1.1 * just_past + 500, (just_past, larger)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_spec_counts_match_what_is_built(path):
    f = load_fabric(path)
    assert spec_counts(f.spec) == {
        "servers": len({h.server for h in f.endpoints}), "endpoints": len(f.endpoints),
        "switches": len(f.switches), "links": len(f.links)}


UNWISE = [
    # (what, text, the key path of the warning, expected words)
    ("a frame takes 72 ms", fabric_text({"kind": "single-switch", "servers": 2, "mtu": 9000},
                                        {"server_leaf": {"rate_mbit": 1}}),
     "links.server_leaf.rate_mbit", ["one 9014-byte frame takes 72 ms at 1 Mbit/s"]),
    ("a queue of 2.4 s", fabric_text(links={"server_leaf": {"rate_mbit": 10,
                                                            "queue_packets": 2000}}),
     "links.server_leaf.queue_packets", ["a full queue of 2000 frames takes 2.42 s"]),
    ("oversubscription 16:1", leaf_spine(1, 2, 16), "fabric", ["oversubscription 16:1",
                                                                "above 8:1"]),
    ("NVLink slower than the NIC", fabric_text(
        {"kind": "single-switch", "servers": 2}, server={"gpus": 2, "nics": 2},
        links={"server_leaf": {"rate_mbit": 10}, "intra_node": {"rate_mbit": 5}}),
     "links.intra_node.rate_mbit", ["NVLink-class links at 5 Mbit/s are slower than the NICs"]),
    ("20% loss", fabric_text(links={"server_leaf": {"rate_mbit": 10, "loss_percent": 20}}),
     "links.server_leaf.loss_percent", ["20% loss; above 10%"]),
]


@pytest.mark.parametrize("what,text_,keypath,words", UNWISE, ids=[u[0] for u in UNWISE])
def test_unwise_values_load_with_a_warning(what, text_, keypath, words):
    f = parse_fabric(text_, "t.yaml")
    mine = [w for w in f.warnings if w.startswith(keypath + ": ")]
    assert len(mine) == 1, f.warnings
    assert all(word in mine[0] for word in words), mine[0]
    assert "\n" not in mine[0] and len(mine[0]) <= MAX_MESSAGE
    assert f"  warning: {mine[0]}" in check_summary(f, experiment_from(f)).splitlines()
    assert f.with_policy("single-path").warnings == f.warnings


def test_a_tidy_fabric_has_no_warnings():
    assert parse_fabric(leaf_spine(), "t.yaml").warnings == ()
    assert parse_fabric(leaf_spine(2, 2, 16), "t.yaml").warnings == ()      # 8:1 is allowed


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads_without_refusal(path):
    f = load_fabric(path)
    assert all(isinstance(w, str) and "\n" not in w for w in f.warnings)


# --- anything else: mutated examples ------------------------------------------------------

SPECIAL = list("{}[]:,&*!|>'\"%@`#-?~\t\n\x00\x1b ") + ["<<", "yes", ".nan", "1e9", "0x",
                                                         "---", "...", "\\", "\u202e"]


def _mutated(rng: random.Random, text_: str) -> str:
    for _ in range(rng.randint(1, 4)):
        at, op = rng.randrange(len(text_) + 1), rng.random()
        if op < 0.4:
            text_ = text_[:at] + rng.choice(SPECIAL) + text_[at:]
        elif op < 0.7:
            text_ = text_[:at] + text_[at + rng.randint(1, 5):]
        else:
            start = rng.randrange(len(text_) + 1)
            text_ = text_[:at] + text_[start:start + 20] + text_[at:]
    return text_


def test_mutated_examples_end_in_a_fabric_or_one_sentence():
    """A thousand random edits of the examples: each loads or is refused
    in one printable line; nothing else escapes."""
    rng = random.Random(1)
    texts = [p.read_text() for p in EXAMPLES if "superpod" not in p.name]
    for _ in range(1000):
        text_ = _mutated(rng, rng.choice(texts))
        try:
            experiment_from(parse_fabric(text_, "t.yaml"))
        except FabricError as error:
            message = str(error)
            assert "\n" not in message and message.isprintable(), (text_, message)
            assert len(message) <= MAX_MESSAGE + 30, (text_, message)


# --- run_topology.py --check, as a user runs it -------------------------------------------

CLI = [
    # (what, make(tmp_path) -> path, expected words)
    ("a FIFO", lambda p: (os.mkfifo(p / "f.yaml"), p / "f.yaml")[1], "is a named pipe (FIFO)"),
    ("/dev/zero", lambda _: Path("/dev/zero"), "is a character device"),
    ("a directory", _directory, "is a directory"),
    ("100 MB", _sparse(100_000_000), "is 100 MB"),
    ("an alias bomb", _written(_bomb().encode()), "holds more than 10,000 values"),
    ("deep nesting", _written(("name: " + "[" * 50_000 + "]" * 50_000).encode()),
     "nests deeper than 32 levels"),
    ("a rate in an unknown unit", _written(fabric_text(
        links={"server_leaf": {"rate_mbit": "20 furlongs"}}).encode()), "with its unit"),
    ("2,048 GPUs", _written(ABSURD_TEXT["2,048 GPUs"].encode()),
     "2,048 GPUs"),
    ("an escape code", _written((SMALL + '"\\e]0;owned\\a": 1\n').encode()), "unknown key"),
]


@pytest.mark.parametrize("what,make,expected", CLI, ids=[c[0] for c in CLI])
def test_check_prints_one_error_line_and_exits_2(tmp_path, what, make, expected):
    path = make(tmp_path)
    proc = subprocess.run([sys.executable, str(REPO / "run_topology.py"), "--check", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert lines[0].isprintable() and "Traceback" not in proc.stderr and not proc.stdout


def test_check_prints_the_warnings(tmp_path):
    path = tmp_path / "unwise.yaml"
    path.write_text(leaf_spine(1, 2, 16))
    proc = subprocess.run([sys.executable, str(REPO / "run_topology.py"), "--check", str(path)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "  warning: fabric: oversubscription 16:1" in proc.stdout


# --- 6. the JSON Schema -----------------------------------------------------------------

KEYWORDS = {"$schema", "title", "description", "type", "properties", "additionalProperties",
            "required", "enum", "const", "minimum", "maximum", "exclusiveMaximum",
            "multipleOf", "pattern", "anyOf", "allOf", "if", "then", "else", "items",
            "minItems", "maxItems", "uniqueItems", "default"}
TYPES = {"object": dict, "array": list, "string": str, "null": type(None), "boolean": bool}


def _is(value, type_):
    if type_ in ("integer", "number"):
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        return numeric and (type_ == "number" or float(value).is_integer())
    return isinstance(value, TYPES[type_])


def schema_errors(value, schema, at="$"):
    """What `value` breaks of `schema`: the part of draft 2020-12 the fabric
    schema uses (jsonschema is not a dependency of this project)."""
    if isinstance(schema, bool):
        return [] if schema else [f"{at}: not allowed"]
    if "type" in schema and not _is(value, schema["type"]):
        return [f"{at}: expected {schema['type']}"]
    errors = [f"{at}: not {schema['const']!r}"] if "const" in schema and value != schema[
        "const"] else []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{at}: not one of {schema['enum']}")
    if _is(value, "number"):
        errors += [f"{at}: {value} breaks {k}" for k, ok in (
            ("minimum", lambda b: value >= b), ("maximum", lambda b: value <= b),
            ("exclusiveMaximum", lambda b: value < b), ("multipleOf", lambda b: value % b == 0))
            if k in schema and not ok(schema[k])]
    if isinstance(value, str) and "pattern" in schema and not re.search(
            re.sub(r"\$$", r"\\Z", schema["pattern"]), value):       # ECMA-262's $: the very end
        errors.append(f"{at}: does not match {schema['pattern']}")
    errors += _object_errors(value, schema, at) + _array_errors(value, schema, at)
    for sub in schema.get("allOf", []):
        errors += schema_errors(value, sub, at)
    if "anyOf" in schema and all(schema_errors(value, s, at) for s in schema["anyOf"]):
        errors.append(f"{at}: matches none of anyOf")
    if "if" in schema:
        branch = "then" if not schema_errors(value, schema["if"], at) else "else"
        errors += schema_errors(value, schema.get(branch, True), at)
    return errors


def _object_errors(value, schema, at):
    if not isinstance(value, dict):
        return []
    errors = [f"{at}.{k}: required" for k in schema.get("required", []) if k not in value]
    for key, item in value.items():
        if key in schema.get("properties", {}):
            errors += schema_errors(item, schema["properties"][key], f"{at}.{key}")
        elif schema.get("additionalProperties") is False:
            errors.append(f"{at}.{key}: not a known key")
    return errors


def _array_errors(value, schema, at):
    if not isinstance(value, list):
        return []
    errors = [f"{at}: too few items"] if len(value) < schema.get("minItems", 0) else []
    errors += [f"{at}: too many items"] if len(value) > schema.get("maxItems", len(value)) else []
    if schema.get("uniqueItems") and len(set(map(json.dumps, value))) < len(value):
        errors.append(f"{at}: items not unique")
    for i, item in enumerate(value):
        errors += schema_errors(item, schema.get("items", True), f"{at}[{i}]")
    return errors


def _keywords(schema):
    if isinstance(schema, dict):
        for key, sub in schema.items():
            yield key
            if key in ("properties",):
                for s in sub.values():
                    yield from _keywords(s)
            elif key in ("allOf", "anyOf"):
                for s in sub:
                    yield from _keywords(s)
            elif key in ("if", "then", "else", "items"):
                yield from _keywords(sub)


def test_the_committed_schema_is_the_generated_one():
    committed = json.loads((REPO / "docs" / "fabric.schema.json").read_text())
    assert committed == json_schema()
    assert committed["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(_keywords(committed)) <= KEYWORDS


def test_python_m_topologies_jsonschema_prints_it():
    proc = subprocess.run([sys.executable, "-m", "topologies.jsonschema"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout) == json_schema()
    assert proc.stdout == (REPO / "docs" / "fabric.schema.json").read_text()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_against_the_schema(path):
    assert schema_errors(load_yaml(path.read_text(), str(path)), json_schema()) == []


SHIPPED = sorted((REPO / "topologies").glob("*.yaml")) + sorted(
    (REPO / "topologies" / "sim").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO / "topologies")))
def test_every_shipped_fabric_validates_as_an_editor_validates_it(path):
    """The generated schema read by a real draft 2020-12 validator, as an
    editor reads it, against every fabric file shipped, its short forms
    (`network: infiniband`) included. The jsonschema package is no
    dependency of this project (the traces extra brings it along)."""
    jsonschema = pytest.importorskip(
        "jsonschema", reason="the jsonschema package is not installed (no dependency of this "
        "project; the traces extra brings it): the home-made validator above still runs")
    jsonschema.Draft202012Validator.check_schema(json_schema())
    validator = jsonschema.Draft202012Validator(json_schema())
    errors = [f"$.{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(load_yaml(path.read_text(), str(path)))]
    assert errors == []


def test_the_schema_takes_a_technology_by_its_name_alone():
    doc = {"fabric": {"spines": 2, "leaves": 2, "servers_per_leaf": 2},
           "links": {"server_leaf": {"rate_mbit": 10}, "leaf_spine": {"rate_mbit": 10}}}
    for network in ("infiniband", {"technology": "roce", "pfc": False}):
        assert schema_errors({**doc, "network": network}, json_schema()) == []
        parse_fabric(yaml.safe_dump({**doc, "network": network}), "t.yaml")


SCHEMA_REFUSES = [
    # (what, the change to a valid leaf-spine fabric (section, key, value), expected error)
    ("an unknown technology", (None, "network", "infiniband-xdr"),
     "$.network: matches none of anyOf"),
    ("an unknown key", (None, "fabrik", 1), "$.fabrik: not a known key"),
    ("a key of another kind", ("fabric", "k", 4), "$.fabric.k: expected null"),
    ("a missing count", ("fabric", "kind", "fat-tree"), "$.fabric.k: required"),
    ("a missing link class", ("links", "leaf_spine", None), "$.links.leaf_spine: required"),
    ("NVLink on one-GPU servers", ("links", "intra_node", {"rate_mbit": 1}),
     "$.links.intra_node: expected null"),
    ("no NVLink for GPUs", (None, "server", {"gpus": 4}), "$.links.intra_node: required"),
    ("a tiny MTU", ("fabric", "mtu", 100), "$.fabric.mtu: 100 breaks minimum"),
    ("loss of 100%", ("links", "server_leaf", {"rate_mbit": 1, "loss_percent": 100}),
     "breaks exclusiveMaximum"),
    ("a /24 subnet", (None, "addressing", {"subnet": "10.0.0.0/24"}),
     "$.addressing.subnet: does not match"),
    ("a name with a newline", (None, "name", "a\n"), "$.name: does not match"),
    ("a count as text", ("fabric", "spines", "2"), "$.fabric.spines: matches none of anyOf"),
]


@pytest.mark.parametrize("what,change,expected", SCHEMA_REFUSES,
                         ids=[s[0] for s in SCHEMA_REFUSES])
def test_the_schema_refuses_what_the_loader_refuses(what, change, expected):
    doc = {"fabric": {"spines": 2, "leaves": 2, "servers_per_leaf": 2},
           "links": {"server_leaf": {"rate_mbit": 10}, "leaf_spine": {"rate_mbit": 10}}}
    assert schema_errors(doc, json_schema()) == []
    section, key, value = change
    target = doc[section] if section else doc
    if value is None:
        del target[key]
    else:
        target[key] = value
    errors = schema_errors(doc, json_schema())
    assert any(expected in e for e in errors), errors
    with pytest.raises(FabricError):
        parse_fabric(yaml.safe_dump(doc), "t.yaml")


def test_the_schema_knows_each_kind():
    for fabric in ({"kind": "fat-tree", "k": 5}, {"kind": "full-mesh", "servers": 17},
                   {"kind": "single-switch", "servers": 2, "spines": 2}):
        doc = {"fabric": fabric, "links": {"server_leaf": {"rate_mbit": 10},
                                           "leaf_spine": {"rate_mbit": 10}}}
        assert schema_errors(doc, json_schema()), fabric
        with pytest.raises(FabricError):
            parse_fabric(yaml.safe_dump(doc), "t.yaml")
