"""Runs that can be told apart and made again: --version, the provenance in
every summary.json, and --check's answer as JSON with the sweep's expected
duration."""

import json
import os
import re
import time

import pytest

from harness import TOPOLOGIES
from harness.commands import run
from runs.provenance import fabric_digest, version
from topologies.fabric import load_fabric

H100 = TOPOLOGIES / "sim" / "hgx-h100-2x8.yaml"


def test_version_says_the_version_and_the_commit():
    out = run("--version")
    assert out.returncode == 0
    assert re.fullmatch(r"run_topology\.py \(fabric-lab\) \d+\.\d+\.\d+, commit "
                        r"([0-9a-f]{40}(\+changes)?|unknown)\n", out.stdout), out.stdout
    assert version() in out.stdout


def test_every_summary_says_where_it_came_from(tmp_path):
    before = time.time()
    out = run(str(H100), "-b", "8", "-e", "8", "--results", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    prov = json.loads(out.stdout)["provenance"]
    assert prov["command"] == f"run_topology.py {H100} -b 8 -e 8 --results {tmp_path} --json"
    assert prov["version"] == version()
    started = time.mktime(time.strptime(prov["started"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert before - 86400 < started < time.time() + 86400      # a local time, zone aside
    assert prov["host"]["cores"] == os.cpu_count() and prov["host"]["kernel"] == os.uname().release
    assert prov["fabric_sha256"] == fabric_digest(load_fabric(H100, emulate=False).spec)
    (folder,) = tmp_path.iterdir()
    assert json.loads((folder / "summary.json").read_text())["provenance"] == prov


def test_the_fabric_digest_is_of_what_was_read():
    a = load_fabric(H100, emulate=False)
    assert fabric_digest(a.spec) == fabric_digest(load_fabric(H100, emulate=False).spec)
    assert fabric_digest(a.with_policy("spray").spec) != fabric_digest(a.spec)
    assert re.fullmatch(r"[0-9a-f]{64}", fabric_digest(a.spec))


def test_check_json_is_what_check_says_with_the_expected_duration():
    out = run("--check", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["valid"] and got["shape"].startswith("2 spines x 2 leaves")
    assert got["experiment"]["algorithm"] == "auto" and got["compare"] == []
    # by hand: 32K + 128K + 512K + 2M bytes, 6 iterations each, 2(n-1)/n = 1.5 of them
    # over a 20 Mbit/s NIC: 2,785,280 x 6 x 1.5 x 8 / 20e6 s; then 5 s to build and tear
    # down, 1.5 s of idle latency and 0.8 s for each of the 4 sizes
    wire = 2_785_280 * 6 * 1.5 * 8 / 20e6
    assert got["expected_seconds"] == pytest.approx(5 + wire + 1.5 + 4 * 0.8)
    text = run("--check").stdout
    assert "  expected: about 20 s in all: 1 sweep of the sizes, 4 sizes in all, 10 s" in text
    twice = json.loads(run("--check", "--json", "--compare", "ring").stdout)
    assert twice["expected_seconds"] == pytest.approx(5 + 2 * (wire + 1.5 + 4 * 0.8))


def test_a_simulation_has_no_expected_link_time():
    got = json.loads(run("--check", "--json", str(H100)).stdout)
    assert got["expected_seconds"] is None and got["experiment"]["engine"] == "sim"
    assert "expected:" not in run("--check", str(H100)).stdout


def test_servers_of_several_nics_are_expected_to_use_them_all():
    """The SuperPOD unit's hierarchical AllReduce lays out by server: its 8
    NICs of 1 Mbit/s each carry an eighth. By hand: 2 iterations of 16 MiB,
    2(255)/256 of them, over 8 x 1 Mbit/s."""
    got = json.loads(run("--check", "--json", str(TOPOLOGIES / "superpod-su.yaml")).stdout)
    wire = 2 * 2 * 255 / 256 * (16 << 20) * 8 / 8e6
    assert got["expected_seconds"] == pytest.approx(5 + wire + 1.5 + 0.8)   # one size
    flat = json.loads(run("--check", "--json", str(TOPOLOGIES / "superpod-su.yaml"), "-a",
                          "ring", "--scale-up", "packets").stdout)
    assert flat["expected_seconds"] == pytest.approx(5 + 8 * wire + 1.5 + 0.8)
