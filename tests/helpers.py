"""What the tests share: small fabrics written inline as a user would write
them, a real lab that must leave nothing behind, run_topology.py as a user
runs it, and flow generators and counters for checking where traffic went."""

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

from lab import records
from topologies.fabric import parse_fabric

REPO = Path(__file__).resolve().parent.parent


def host_state() -> dict:
    """The host's lab state (lab/records.py), counting only the processes
    this test run started (tests/conftest.py sets FABRIC_LAB_OWNER): another
    test run or lab on the host is not this run's leak."""
    return records.host_state(owner=os.environ.get(records.OWNER_VARIABLE))
TOPOLOGIES = REPO / "topologies"
CMD = [sys.executable, "-u", str(REPO / "run_topology.py")]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


# --- fabrics -------------------------------------------------------------------------

def leaf_spine(spines, leaves, servers, parallel=1, policy="ecmp", rate=50, prefix="",
               **extra_links):
    """A leaf-spine fabric. `prefix` (a few letters) goes before every node's
    name, so that two labs of a module can exist at once: names are unique
    on a host."""
    link = {"rate_mbit": rate, **extra_links}
    names = (f"names: {{spine: {prefix}spine, leaf: {prefix}leaf, server: {prefix}h}}\n"
             if prefix else "")
    text = f"""
name: {prefix}t{spines}x{leaves}
fabric: {{spines: {spines}, leaves: {leaves}, servers_per_leaf: {servers}, uplinks_per_spine: {parallel}}}
links:
  server_leaf: {link}
  leaf_spine: {link}
routing: {{policy: {policy}}}
{names}"""
    return parse_fabric(text, f"{prefix}t{spines}x{leaves}.yaml")


# An experiment section as a user writes it: 4 servers, a small AllGather.
EXPERIMENT_YAML = """
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
links:
  server_leaf: {rate_mbit: 20, queue_packets: 32}
  leaf_spine: {rate_mbit: 20, queue_packets: 32}
experiment: {collective: allgather, minbytes: 16K, maxbytes: 16K, iters: 3, warmup: 0,
             channels: 2, probe: [h2, h3]}
"""


# --- labs ----------------------------------------------------------------------------

@contextlib.contextmanager
def built(fabric, tmp_path_factory):
    """A real lab of `fabric`; afterwards the host must be as it was."""
    from lab.lifecycle import Lab
    before = host_state()
    with Lab(fabric, tmp_path_factory.mktemp(fabric.name)) as lab:
        yield lab
    assert host_state() == before, "the lab left something behind"


def run(*args, timeout=120, input=None):
    """run_topology.py with these arguments (and what a user types, if
    `input`), as a user runs it."""
    return subprocess.run(CMD + list(args), capture_output=True, text=True, timeout=timeout,
                          env=ENV, cwd=REPO, input=input)


def start(*args):
    """run_topology.py started in the background (to interrupt it)."""
    return subprocess.Popen(CMD + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)


# --- traffic and counters ----------------------------------------------------------------

def flows_command(*args: str) -> List[str]:
    """The command line of programs/flows.py for a server's namespace."""
    return [sys.executable, "-m", "programs.flows", *args]


def read_counter(intf: str, name: str = "tx_bytes") -> int:
    return int(Path(f"/sys/class/net/{intf}/statistics/{name}").read_text())


def settled(read, quiet: float = 0.3, cap: float = 15.0):
    """`read()` once it has stopped changing for `quiet` seconds (what was
    still queued or inside the switch has arrived), however slow the host."""
    last, since, deadline = read(), time.monotonic(), time.monotonic() + cap
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
    return last


def uplink_bytes(lab, leaf, run_traffic) -> Dict[str, int]:
    """Bytes `leaf` sent to each spine while `run_traffic()` ran (and until
    its last packets had left)."""
    spine_of = {l.a_intf: l.b for l in lab.fabric.uplinks(leaf)}
    before = {i: read_counter(i) for i in spine_of}
    run_traffic()
    after = settled(lambda: {i: read_counter(i) for i in spine_of})
    return {spine_of[i]: after[i] - before[i] for i in spine_of}


def udp_flows(lab, src, dst, sports="40000:40015", packets=60):
    """16 UDP flows, paced so the sender's shaped link does not drop them."""
    ip = lab.fabric.endpoint(dst).ip
    proc = lab.popen(src, flows_command("udp", "--dst", ip, "--sports", sports,
                                        "--packets", str(packets), "--pps", "200"), text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["packets_sent"] == 16 * packets


def tcp_flows(lab, src, dst, sports="41000:41015", nbytes=200_000):
    """16 TCP flows of `nbytes` each, every byte checked at the sink."""
    ip = lab.fabric.endpoint(dst).ip
    sink = lab.popen(dst, flows_command("sink", "--port", "5001", "--connections", "16"),
                     text=True)
    assert json.loads(sink.stdout.readline()) == {"listening": 5001}
    sender = lab.popen(src, flows_command("tcp", "--dst", ip, "--sports", sports,
                                          "--bytes", str(nbytes)), text=True)
    _, err = sender.communicate(timeout=60)
    assert sender.returncode == 0, err
    received = json.loads(sink.communicate(timeout=60)[0])["received"]
    lo, hi = (int(p) for p in sports.split(":"))
    assert received == {str(p): nbytes for p in range(lo, hi + 1)}


def group_bucket_packets(switch: str, group_id: int) -> List[int]:
    """Packets per bucket of one select group, from Open vSwitch."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-group-stats", switch],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if f"group_id={group_id}," in line:
            return [int(n) for n in re.findall(r"bucket\d+:packet_count=(\d+)", line)]
    return []


# --- what a run's own figures decide -----------------------------------------------------

def assert_verdict_follows_from_runs(verdict: dict, runs: List[dict]) -> None:
    """The fidelity verdict (traffic/measure/fidelity.py) as the run's own
    figures decide it, whichever way it goes: a size is flagged over-rate
    exactly when its busbw beat the link rate, below-resolution exactly when
    the shaper's unpaid bound is over a fifth of its serialisation time; the
    run is trustworthy exactly when every queued link kept its rate and no
    size is flagged; the advice names the flagged sizes and the shortfall,
    and there is none to give when the verdict is clean (one-GPU servers)."""
    from traffic.measure.fidelity import CPU_BUSY_WARN, OVS_BUSY, SIM_HOST_BOUND, SLOWER, UNPAID_SHARE
    for r in runs:
        size = r["size_bytes"]
        assert ("over-rate" in r["flags"]) == (r["busbw_over_link"] > 1.0), (size, r["flags"])
        assert ("below-resolution" in r["flags"]) == (
            r["shaper_unpaid_bound_s"] > UNPAID_SHARE * r["serialisation_s"]), (size, r["flags"])
        if SLOWER in r["flags"]:
            assert r["measured_over_simulated"] > SIM_HOST_BOUND, (size, r)
        elif not verdict.get("host_bound"):
            assert (r.get("measured_over_simulated") or 0) <= SIM_HOST_BOUND, (size, r)
    assert verdict["host_kept_up"] == (verdict["saturated_intervals_below_rate"] == 0), verdict
    flagged = [r["size_bytes"] for r in runs if r["flags"]]
    assert verdict["flagged_sizes"] == flagged, verdict
    assert verdict["trustworthy"] == (verdict["host_kept_up"] and not flagged), verdict
    advice = verdict.get("advice", "")
    if not verdict["host_kept_up"]:
        assert "could not keep queued links at their rate" in advice, verdict
    small = [str(r["size_bytes"]) for r in runs if set(r["flags"]) - {SLOWER}]
    if small:
        assert f"{', '.join(small)} B are too small to measure" in advice, verdict
    slow = [str(r["size_bytes"]) for r in runs if SLOWER in r["flags"]]
    if slow:
        assert f"{', '.join(slow)} B took up to" in advice, verdict
        assert "the simulated time with the links at their rates" in advice, verdict
    if verdict.get("host_bound"):
        assert "set the pace" in advice, verdict
    busy = verdict["max_cpu_busy_pct"] > CPU_BUSY_WARN or verdict["max_ovs_core_pct"] > OVS_BUSY
    if verdict["trustworthy"] and not verdict.get("host_bound") and not busy:
        assert "advice" not in verdict, verdict          # nothing to advise on a clean run


def ensure_no_testbed() -> None:
    """No test bed is up when a test is to bring its own: a live one fails
    the test (a privileged test never passes by skipping); the record of one
    whose machines are all gone is removed by lab/testbed.py's own teardown,
    which touches only what that record names."""
    import pytest
    from lab import testbed
    if not testbed.RECORD.exists():
        return
    with testbed.locked():
        record = testbed.load_record()
        if record is None:
            pytest.fail(f"{testbed.RECORD} exists but cannot be read: "
                        "`sudo scripts/lab testbed status`, then `down`")
        alive = [m["name"] for m in record.get("machines", []) if testbed.running(m)]
        if alive:
            pytest.fail(f"a test bed is already up ({', '.join(alive)} running): "
                        "`sudo scripts/lab testbed down` first")
        left = testbed.teardown(record)
    assert not left, f"a dead test bed's remains would not go: {left}"
    assert not testbed.RECORD.exists()
