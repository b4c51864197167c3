"""A link between switches fails in the middle of a collective (--fail):
under every policy the collective ends right (#wrong 0), the event
is reported with the probe flows it stopped and for how long, the
iteration it fell in, and the link comes back; a failure with no duration
lasts to the end of the sweep and the link is back up for what follows."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness import REPO, TOPOLOGIES
from harness.commands import run
from harness.failover import idle_case
from harness.labs import built
from topologies.fabric import load_fabric

SWEEP = ["-b", "1M", "-e", "1M", "-n", "8", "-w", "1"]   # 9 iterations of >= 0.63 s at 20 Mbit/s


# Traffic that moves to another path comes back before the link does; traffic that
# waits for the link stops for about as long as it was down (to within the two
# set_link calls, which the down time includes). A quarter of the failure tells them apart.
MOVED = 0.75


def moved_while_down(event):
    """The probe's hit flows came back while the link was still down: on
    another path, not the failed link's return."""
    return event["probe"]["stopped_ms"] < MOVED * event["down_for_s"] * 1e3


def timed_as_scheduled(event, at, duration):
    """Down no earlier than scheduled and before it was due back; back up no
    earlier than scheduled (the failure thread's timers never fire early)."""
    assert event["at_s"] == at and event["duration_s"] == duration, event
    assert at <= event["down_at_s"] < at + duration, event
    assert event["down_for_s"] >= at + duration - event["down_at_s"] - 1e-3, event


def failed_run(tmp_path, *flags):
    proc = run(*SWEEP, *flags, "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    result = summary["collectives"]
    assert all(r["wrong"] == 0 and r["bad_chunk_elements"] == 0 for r in result["runs"])
    return proc.stdout, result["failures"]


@pytest.mark.parametrize("policy,link", [("ecmp", "leaf1-spine1"),
                                         # single-path pins leaf2's servers to spine2
                                         ("single-path", "leaf1-spine2"),
                                         ("flowlet", "leaf1-spine1"), ("spray", "leaf1-spine1"),
                                         ("adaptive", "leaf1-spine1"),
                                         # no controller: spanning tree's own recovery;
                                         # spine1 is the root, the link is on the tree
                                         ("stp", "leaf1-spine1")])
def test_a_failure_mid_collective_is_survived_and_reported(tmp_path, clean_host, policy, link):
    out, events = failed_run(tmp_path, "--policy", policy, "--fail", f"{link}@2+2")
    [event] = events
    assert event["link"] == link
    timed_as_scheduled(event, 2.0, 2.0)
    probe = event["probe"]
    assert (probe["src"], probe["dst"], probe["flows"]) == ("h1", "h3", 8)
    if policy == "stp":   # unblocking leaf1's port to spine2 takes listening + learning,
        # 2 x 4 s forward delay: longer than the failure, so traffic waits for the link
        assert probe["flows_hit"] == 8 and not moved_while_down(event), event
    else:                 # moved to another path while the link was still down
        assert moved_while_down(event), event
        # read from the hit flows together, the path came back as early
        assert (probe["path_stopped_ms"] or 0) < MOVED * event["down_for_s"] * 1e3, event
    if policy == "single-path":       # every flow to leaf2 took that link: the controller
        # had to move them (the flows take turns, so even a stop shorter than the
        # probe's interval costs some of them a packet)
        assert probe["flows_hit"] >= 1 and probe["stopped_ms"] > 0, event
    assert event["collective"]["size_bytes"] == 1 << 20
    assert f"failure  {link} down at" in out and "probe flows (h1 -> h3)" in out


def test_a_failure_without_a_duration_lasts_to_the_end(tmp_path, clean_host):
    _out, events = failed_run(tmp_path, "--fail", "leaf2-spine1@1.5", "--iperf-check",
                              "--streams", "16")     # 32 flows: never all on one spine
    [event] = events
    assert event["duration_s"] is None and event["down_for_s"] >= 1.0
    # the iperf3 check after the sweep finds the link back: leaf2 sends over it again
    summary = json.loads(next(tmp_path.glob("*/summary.json")).read_text())
    sent = summary["traffic"]["uplink_tx_bytes"]["leaf2"]
    assert all(v > 100_000 for v in sent.values()), sent


@pytest.mark.parametrize("bfd_ms", [0, 100])
def test_a_silent_failure_is_seen_only_with_bfd(tmp_path, clean_host, bfd_ms):
    """Frames lost with the carrier up for 2 s: without BFD nothing notices,
    and the probe flows hashed over the link stop for as long as it lasts;
    with BFD every 100 ms, its session times out (3 intervals), Open vSwitch
    stops reporting the port live, and traffic moves long before the link
    works again. (100 ms, not 10: under a collective on 2 cores Open vSwitch
    sent BFD messages up to 130 ms late, and sessions of healthy links timed
    out too.)"""
    fabric = tmp_path / "bfd.yaml"
    fabric.write_text((REPO / "topologies" / "default.yaml").read_text().replace(
        "bfd_ms: 0 ", f"bfd_ms: {bfd_ms} "))
    out, events = failed_run(tmp_path, str(fabric), "--fail", "leaf1-spine1@2+2:silent")
    [event] = events
    assert event["kind"] == "silent" and "silently down" in out
    probe = event["probe"]
    assert probe["flows_hit"] >= 1, probe      # the probe's ports hash some flows over spine1
    timed_as_scheduled(event, 2.0, 2.0)
    # with BFD the port stops being live after 3 intervals and traffic moves on; without
    # it the hit flows wait for the link
    assert moved_while_down(event) == bool(bfd_ms), event


def test_a_flapping_link_mid_collective(tmp_path, clean_host):
    out, events = failed_run(tmp_path, "--flap", "leaf1-spine1@2+2")
    [event] = events
    assert event["kind"] == "flap" and event["downs"] == 4
    assert "flapping (4 times down)" in out


def test_the_datapath_alone_moves_flows_off_a_dead_local_link(tmp_path_factory):
    """The leaves' ECMP groups watch each bucket's own port, so Open vSwitch
    skips a bucket whose link is down without the controller: with the
    controller stopped (SIGSTOP) from just before the link goes down until
    it is back up, the probe's flows hashed over the dead uplink still come
    back while it is down. (How fast is the benchmark's, docs/benchmarks.md.)"""
    with built(load_fabric(TOPOLOGIES / "default.yaml"), tmp_path_factory) as lab:
        groups = subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "leaf1"],
                                capture_output=True, text=True, check=True).stdout
        buckets = re.findall(r"watch_port:(\d+),actions=output:(\d+)", groups)
        assert "type=select" in groups and len(buckets) >= 2, groups
        assert all(watch == out for watch, out in buckets), groups
        controller, set_link = lab.controller.pid, lab.set_link

        def set_link_unseen(a, b, up, **kwargs):
            if not up:
                os.kill(controller, signal.SIGSTOP)
            try:
                set_link(a, b, up, **kwargs)
            finally:
                if up:
                    os.kill(controller, signal.SIGCONT)

        lab.set_link = set_link_unseen
        try:
            # ECMP hashes the probe's 8 flows over both uplinks, in no fixed
            # way, and the datapath may move them so soon that none misses a
            # packet: fail each uplink in turn. The flows h1 -> h3 leave leaf1
            # by one or the other, so at least one failure hit them; a flow
            # left on a dead link would have stopped for the whole second
            events = [idle_case(lab, link) for link in ("leaf1-spine1", "leaf1-spine2")]
        finally:
            os.kill(controller, signal.SIGCONT)
        assert all(moved_while_down(event) for event in events), events


def test_a_link_taken_down_through_open_vswitch_is_dead_in_the_kernel_and_comes_back(
        tmp_path_factory):
    """set_link takes a switch-to-switch link down with a port-mod at each
    end (ovs-vswitchd marks the port down before the kernel's notice): both
    veths are down in the kernel too, so the link carries nothing, and both
    OpenFlow ports read down at once; up, everything is as before."""
    def state(lab, intf, bridge):
        kernel = subprocess.run(["ip", "-o", "link", "show", "dev", intf], capture_output=True,
                                text=True, check=True).stdout
        flags = re.search(r"<([^>]*)>", kernel).group(1).split(",")
        show = subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", "show", bridge],
                              capture_output=True, text=True, check=True).stdout
        port = re.search(rf"\({re.escape(intf)}\):.*?config:\s+(\S+)\s+state:\s+(\S+)",
                         show, re.S)
        return "UP" in flags, "LOWER_UP" in flags, port.group(1), port.group(2)

    with built(load_fabric(TOPOLOGIES / "default.yaml"), tmp_path_factory) as lab:
        [link] = [l for l in lab.fabric.links if {l.a, l.b} == {"leaf1", "spine1"}]
        ends = [(link.a_intf, link.a), (link.b_intf, link.b)]
        assert [state(lab, i, n) for i, n in ends] == [(True, True, "0", "LIVE")] * 2
        lab.set_link("leaf1", "spine1", up=False)
        for intf, node in ends:          # read as soon as set_link returns
            up, carrier, config, port_state = state(lab, intf, node)
            assert not up and not carrier and config == "PORT_DOWN", (intf, config)
        lab.set_link("leaf1", "spine1", up=True)
        deadline = time.monotonic() + 5
        while [state(lab, i, n) for i, n in ends] != [(True, True, "0", "LIVE")] * 2:
            assert time.monotonic() < deadline, [state(lab, i, n) for i, n in ends]
            time.sleep(0.05)
