"""run_topology.py as a user runs it on a real lab: the default fabric end to
end, the tables, interruption at any moment leaving nothing behind, --cleanup
after a SIGKILL, netem, the STP baseline, the YAML experiment and cross
traffic."""

import json
import os
import select
import signal
import time

import pytest

from harness import REPO, TOPOLOGIES
from harness.commands import run, start
from harness.fabrics import EXPERIMENT_YAML
from harness.labs import in_sandbox, our_state, sandbox_of, wait_until_moving
from harness.verdicts import assert_verdict_follows_from_runs


def test_default_fabric_end_to_end(tmp_path, clean_host):
    """No arguments: the default fabric, all pairs, an AllReduce sweep
    running per size what NCCL would (-a auto): Ring or Tree, whichever the
    lab's own costs price quicker."""
    proc = run("--json", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["reachability"]["ok"] == summary["reachability"]["total"] == 12
    assert summary["datapath"] in ("user", "kernel") and summary["openflow"] == ["OpenFlow15"]
    # the default technology, RoCE, marks with ECN: the lab does what this kernel can, and says it
    from lab.ecn import kernel_support
    have = kernel_support()
    assert summary["network"]["technology"] == "roce"
    assert summary["ecn"] == {"asked": True, "marking": have["red"], "dctcp": have["dctcp"],
                              "note": summary["ecn"]["note"]}
    assert ("this kernel has no" in summary["ecn"]["note"]) != (have["red"] and have["dctcp"])
    result = summary["collectives"]
    runs = result["runs"]
    assert [r["size_bytes"] for r in runs] == [32768, 131072, 524288, 2097152]
    for r in runs:
        assert (r["collective"], r["engine"], r["ranks"]) == ("allreduce", "agents", 4)
        weighed = r["auto"]["predicted_s"]
        assert set(weighed) == {"ring", "tree"}
        assert r["algorithm"] == r["auto"]["nccl"] == min(weighed, key=weighed.get)
        assert r["wrong"] == 0 and r["bad_chunk_elements"] == 0
        assert r["time_s"] > 0 and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 1.5)
        assert set(r["latency"]) >= {"p50_us", "p99_us", "max_us"}
        assert all({"tx_bytes", "drops", "peak_util"} <= set(l) for l in r["links"].values())
    for r in runs:                               # the simulator beside every size
        assert r["simulated_s"] > 0 and r["measured_over_simulated"] == pytest.approx(
            r["time_s"] / r["simulated_s"])
    for r in runs:                               # no link faster than its rate
        assert max(l["peak_util"] for l in r["links"].values()) <= 1.0, r["size_bytes"]
    # the verdict, and its advice, as these sizes' own figures decide it
    assert_verdict_follows_from_runs(result["fidelity"], runs)
    folder = tmp_path / os.path.basename(summary["results"])
    assert json.loads((folder / "summary.json").read_text())["reachability"] == summary["reachability"]
    assert len((folder / "results.csv").read_text().splitlines()) == 1 + len(runs)
    assert json.loads((folder / "samples.json").read_text()) and (folder / "probes.json").exists()


def test_the_table_is_nccl_tests_shaped_and_the_iperf3_check_reports_uplinks(tmp_path, clean_host):
    proc = run("-b", "32K", "-e", "64K", "-f", "2", "-n", "1", "--iperf-check", "--seconds", "1",
               "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "#       size         count      type   redop    root     time   algbw   busbw  #wrong" in out
    rows = [l.split() for l in out.splitlines() if l.startswith("       ") and l.split()[0].isdigit()]
    assert [r[:5] for r in rows[:2]] == [["32768", "8192", "float", "sum", "-1"],
                                         ["65536", "16384", "float", "sum", "-1"]]
    assert "# Avg bus bandwidth    :" in out and "# Fidelity:" in out
    assert "traffic  4 iperf3 TCP tests x 4 flows" in out
    assert "uplinks  bytes each leaf sent towards each spine during the check" in out


def wait_for(proc, stream, text, timeout=120):
    """Read `stream` of `proc` (its stdout or stderr) until `text` appears;
    the deadline holds even when the process prints nothing."""
    seen, deadline = "", time.monotonic() + timeout
    fd = stream.fileno()
    while text not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError(f"no {text!r} within {timeout} s: {seen[-500:]!r}")
        chunk = os.read(fd, 4096).decode(errors="replace")
        if not chunk:
            raise AssertionError(f"the run ended before {text!r}: {seen[-500:]!r}")
        seen += chunk


def wait_until_building(proc, timeout=120):
    """Until Mininet has started making the 4x8 fabric's links in the run's
    own namespace (and has not yet finished the whole build: it takes over a
    second), however fast or slow the host."""
    sandbox = sandbox_of(proc.pid, proc)
    deadline = time.monotonic() + timeout
    while "leaf1-eth1" not in in_sandbox(sandbox, ["ip", "-o", "link", "show"]):
        assert time.monotonic() < deadline and proc.poll() is None, "no link appeared"
        time.sleep(0.01)


def wait_until_bridged(proc, timeout=120):
    """Until the lab's Open vSwitch holds its bridges (Mininet makes them all
    at once, after the links)."""
    sandbox = sandbox_of(proc.pid, proc)
    deadline = time.monotonic() + timeout
    while not in_sandbox(sandbox, ["ovs-vsctl", "--timeout=5", "list-br"]).strip():
        assert time.monotonic() < deadline and proc.poll() is None, "no bridge appeared"
        time.sleep(0.01)


BIG = str(TOPOLOGIES / "leaf-spine-4x8.yaml")

# when to interrupt: after a line on stdout, once the build has begun, or
# once a collective moves data
IN_THE_CLI = ("stdout", "reach")
STARTING = ("stdout", "fabric")
BUILDING = ("building", None)
BRIDGED = ("bridged", None)
IN_A_COLLECTIVE = ("moving", "reach")


def wait_for_moment(proc, moment):
    where, text = moment
    if where == "building":
        wait_until_building(proc)
    elif where == "bridged":
        wait_until_bridged(proc)
    elif where == "moving":
        wait_for(proc, proc.stdout, text)
        wait_until_moving(sandbox=sandbox_of(proc.pid, proc))
    else:
        wait_for(proc, getattr(proc, where), text)


@pytest.mark.parametrize("signals,args,moment", [
    ([signal.SIGTERM], ["--cli", "--no-traffic"], IN_THE_CLI),
    ([signal.SIGINT], ["-b", "2M", "-e", "2M", "-n", "20"], IN_A_COLLECTIVE),
    ([signal.SIGINT], ["--no-traffic"], STARTING),
    ([signal.SIGTERM], ["--no-traffic", BIG], BUILDING),
    ([signal.SIGINT, signal.SIGINT, signal.SIGTERM], ["--no-traffic", BIG], BUILDING),
], ids=["sigterm-in-the-cli", "ctrl-c-during-a-collective", "ctrl-c-while-starting",
        "sigterm-while-mininet-builds", "ctrl-c-ctrl-c-sigterm-while-building"])
def test_interruption_tears_down_everything(tmp_path, clean_host, signals, args, moment):
    proc = start(*args, "--results", str(tmp_path))
    try:
        wait_for_moment(proc, moment)
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


@pytest.mark.parametrize("args,moment", [
    (["--cli", "--no-traffic"], IN_THE_CLI),
    (["--no-traffic", BIG], BRIDGED),
], ids=["killed-when-ready", "killed-mid-build"])
def test_cleanup_removes_what_a_killed_lab_left(tmp_path, args, moment):
    before = our_state()
    proc = start(*args, "--results", str(tmp_path))
    wait_for_moment(proc, moment)
    proc.kill()
    proc.communicate(timeout=30)
    assert our_state() != before, "a SIGKILLed lab should have left something"
    out = run("--cleanup")
    assert out.returncode == 0 and "cleaned up after lab" in out.stdout
    deadline = time.monotonic() + 60            # a cap, however slow the host: the state decides
    while our_state() != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert our_state() == before
    assert "nothing to clean up" in run("--cleanup").stdout


def test_delay_needs_netem_and_says_so(clean_host):
    from lab.host import netem_available
    proc = run("--check", str(REPO / "topologies" / "oversubscribed-delay.yaml"))
    if netem_available():
        assert proc.returncode == 0 and "0.5 ms delay" in proc.stdout
    else:
        assert proc.returncode == 2
        assert proc.stderr == (
            f"error: {REPO}/topologies/oversubscribed-delay.yaml: links.leaf_spine asks for "
            "delay or loss, which needs the kernel's sch_netem qdisc, and this kernel has none: "
            "set delay_ms and loss_percent to 0 here, or use the Vagrant lab VM\n")


def test_stp_baseline_converges_and_reaches_every_pair(tmp_path, clean_host):
    proc = run("--policy", "stp", "--json", "--no-traffic", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["policy"] == "stp" and summary["openflow"] == []
    assert summary["reachability"]["ok"] == summary["reachability"]["total"] == 12


def test_the_yaml_experiment_runs(tmp_path, clean_host):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT_YAML)
    proc = run(str(path), "--json", "-n", "2", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["collectives"]
    assert result["probe"] == ["h2", "h3"] and result["experiment"]["channels"] == 2
    [r] = result["runs"]
    assert (r["collective"], r["size_bytes"], r["iterations"], r["wrong"]) == ("allgather", 16384, 2, 0)


def test_cross_traffic_shares_the_fabric_with_the_collective(tmp_path, clean_host):
    proc = run("-b", "256K", "-e", "256K", "-n", "2", "--cross", "h2,h3", "--json",
               "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["collectives"]
    assert result["runs"][0]["wrong"] == 0
    cross = result["cross_traffic"]
    assert (cross["src"], cross["dst"]) == ("h2", "h3") and cross["mbit_s"] > 1
