"""One number syntax for the fabric files, the flags and the planner
(toolkit/units.py): counts with SI prefixes, rates with their units,
ratios as 2:1; each figure below worked out by hand."""

import pytest

from harness import TOPOLOGIES
from harness.commands import run
from planner import main as plan_main
from topologies.fabric import parse_fabric
from toolkit.units import parse_count, parse_rate_mbit, parse_ratio


@pytest.mark.parametrize("text,count", [
    ("200000", 200_000), ("200,000", 200_000), ("200_000", 200_000), ("2e5", 200_000),
    ("200k", 200_000), ("200K", 200_000), ("70B", 70 * 10 ** 9), ("70G", 70 * 10 ** 9),
    ("1.3e9", 1_300_000_000), ("2T", 2 * 10 ** 12), ("1P", 10 ** 15), ("4Ki", 4096),
    ("1Mi", 1 << 20), (" 8 ", 8), (512, 512)])
def test_counts_take_si_and_binary_prefixes(text, count):
    assert parse_count(text) == count


@pytest.mark.parametrize("text", ["", "k", "1.5", "1,00", "2,0000", "x", "1kk", "1e999999", True,
                                  float("nan"), "7 GPUs"])
def test_what_is_not_a_whole_count(text):
    assert parse_count(text) is None


@pytest.mark.parametrize("text,mbit", [
    ("400G", 400_000), ("400Gbit/s", 400_000), ("400 Gb/s", 400_000), ("400Gbps", 400_000),
    ("900GB/s", 7_200_000), ("50GBps", 400_000), ("100M", 100), ("100Mbit/s", 100),
    ("10k", 0.01), ("1T", 1_000_000), ("20", 20), (20, 20), ("8000000bps", 8)])
def test_rates_in_mbit_from_their_units(text, mbit):
    assert parse_rate_mbit(text) == pytest.approx(mbit)


def test_a_plain_rate_is_in_the_unit_the_key_or_flag_names():
    assert parse_rate_mbit("400", plain_mbit=1000.0) == 400_000       # --link-gbps 400
    assert parse_rate_mbit("400G", plain_mbit=1000.0) == 400_000      # its unit wins
    assert parse_rate_mbit("400 furlongs") is None and parse_rate_mbit("G") is None


@pytest.mark.parametrize("text,ratio", [("2:1", 2.0), ("3.92:1", 3.92), ("1:2", 0.5),
                                        ("2", 2.0), (3, 3.0)])
def test_ratios(text, ratio):
    assert parse_ratio(text) == ratio


def test_ratios_that_are_none():
    assert parse_ratio("1:0") is None and parse_ratio("2:") is None and parse_ratio("x") is None


def test_a_fabric_file_takes_rates_with_their_units():
    fabric = parse_fabric("""
fabric: {kind: leaf-spine, spines: 2, leaves: 2, servers_per_leaf: 1}
server: {gpus: 8, nics: 8}
links:
  intra_node: {rate_mbit: 900GB/s}
  server_leaf: {rate_mbit: 400G}
  leaf_spine: {rate_mbit: 400Gbit/s}
""", "t.yaml", emulate=False)
    rates = {k: v["rate_mbit"] for k, v in fabric.spec["links"].items() if v}
    assert rates == {"intra_node": 7_200_000, "server_leaf": 400_000, "leaf_spine": 400_000}


def test_the_planner_and_a_step_take_what_users_write(capsys):
    """The mistakes a new user made: 200k GPUs, 2:1, 400G and 70B parameters."""
    assert plan_main(["--gpus", "200k", "--oversubscription", "2:1", "--link-gbps", "400G",
                      "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["inputs"]["gpus"] == 200_000 and out["inputs"]["oversubscription"] == 2.0
    assert out["inputs"]["link_gbps"] == 400.0
    step = run("--check", str(TOPOLOGIES / "default.yaml"), "--engine", "sim", "--step",
               "--params", "70B")
    # 70e9 float32 gradients: 280e9 bytes, far more than a lab holds, and said so
    assert step.returncode == 2 and "(280,000,000,000 bytes)" in step.stderr
    sweep = run("--check", str(TOPOLOGIES / "default.yaml"), "-b", "1e6", "-e", "1e6")
    assert sweep.returncode == 0 and "1000000 to 1000000 B" in sweep.stdout, sweep.stderr


def test_the_edges_of_what_is_read():
    """Texts up to 64 characters are read (padding included), longer ones
    are not; bytes per second without a prefix; a fractional ratio; nothing
    infinite."""
    assert parse_count(" " * 60 + "200k") == 200_000 and parse_count(" " * 61 + "200k") is None
    assert parse_rate_mbit(" " * 60 + "400G") == 400_000
    assert parse_rate_mbit(" " * 61 + "400G") is None
    assert parse_ratio(" " * 61 + "2:1") == 2.0 and parse_ratio(" " * 62 + "2:1") is None
    assert parse_rate_mbit("1000000Bps") == pytest.approx(8.0)
    assert parse_rate_mbit("1000000B/s") == pytest.approx(8.0)
    assert parse_ratio("1.5") == 1.5 and parse_ratio(float("inf")) is None
    assert parse_rate_mbit(float("nan")) is None and parse_count(float("inf")) is None
    assert parse_ratio(None) is None and parse_rate_mbit(None) is None and parse_count(None) is None
