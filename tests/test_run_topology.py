"""run_topology.py as a user runs it: the default fabric end to end, bad input,
and interruption at any moment leaving nothing behind."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, host_state

CMD = [sys.executable, "-u", str(REPO / "run_topology.py")]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def run(*args, timeout=120):
    return subprocess.run(CMD + list(args), capture_output=True, text=True, timeout=timeout,
                          env=ENV, cwd=REPO)


def test_help_explains_every_option():
    out = run("--help").stdout
    for option in ("--check", "--policy", "--datapath", "--seconds", "--streams",
                   "--no-traffic", "--cli", "--results", "--json", "--cleanup", "--verbose"):
        assert option in out


def test_check_validates_without_building(clean_host):
    proc = run("--check")
    assert proc.returncode == 0 and "default.yaml: valid" in proc.stdout
    assert "2 spines x 2 leaves x 2 servers per leaf = 4 servers" in proc.stdout


@pytest.mark.parametrize("text,message", [
    ("fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}\n",
     "bad.yaml: links: missing; this key is required"),
    ("fabric: {spines: 0, leaves: 2, servers_per_leaf: 2}\nlinks: {}\n",
     "bad.yaml: fabric.spines: expected a whole number from 1 to 64, got 0"),
])
@pytest.mark.parametrize("mode", [[], ["--check"]], ids=["build", "check"])
def test_bad_input_is_one_sentence_and_touches_nothing(tmp_path, clean_host, text, message, mode):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    proc = run(*mode, str(bad))
    assert proc.returncode == 2
    assert proc.stderr == f"error: {bad.parent}/{message}\n"


@pytest.mark.privileged
def test_default_fabric_end_to_end(tmp_path, clean_host):
    """No arguments: the default fabric, all pairs, a ring AllReduce sweep."""
    proc = run("--json", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["reachability"]["ok"] == summary["reachability"]["total"] == 12
    assert summary["datapath"] in ("user", "kernel") and summary["openflow"] == ["OpenFlow15"]
    result = summary["collectives"]
    runs = result["runs"]
    assert [r["size_bytes"] for r in runs] == [32768, 131072, 524288, 2097152]
    for r in runs:
        assert (r["collective"], r["algorithm"], r["engine"], r["ranks"]) == ("allreduce", "ring", "agents", 4)
        assert r["wrong"] == 0 and r["bad_chunk_elements"] == 0
        assert r["time_s"] > 0 and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 1.5)
        assert set(r["latency"]) >= {"p50_us", "p99_us", "max_us"}
        assert all({"tx_bytes", "drops", "peak_util"} <= set(l) for l in r["links"].values())
    assert "trustworthy" in result["fidelity"]
    folder = tmp_path / os.path.basename(summary["results"])
    assert json.loads((folder / "summary.json").read_text())["reachability"] == summary["reachability"]
    assert len((folder / "results.csv").read_text().splitlines()) == 1 + len(runs)
    assert json.loads((folder / "samples.json").read_text()) and (folder / "probes.json").exists()


@pytest.mark.privileged
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


def start(*args):
    return subprocess.Popen(CMD + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)


def wait_for_line(proc, prefix, timeout=60):
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting {prefix!r}: {lines}")


BIG = str(REPO / "topologies" / "leaf-spine-4x8.yaml")


@pytest.mark.privileged
@pytest.mark.parametrize("signals,args,after,delay", [
    ([signal.SIGTERM], ["--cli", "--no-traffic"], "reach", 1),
    ([signal.SIGINT], ["-b", "2M", "-e", "2M", "-n", "20"], "reach", 1.5),
    ([signal.SIGINT], ["--no-traffic"], "fabric", 0),
    ([signal.SIGTERM], ["--no-traffic", BIG], "fabric", 1.5),
    ([signal.SIGINT, signal.SIGINT, signal.SIGTERM], ["--no-traffic", BIG], "fabric", 2),
], ids=["sigterm-in-the-cli", "ctrl-c-during-a-collective", "ctrl-c-while-starting",
        "sigterm-while-mininet-builds", "ctrl-c-ctrl-c-sigterm-while-building"])
def test_interruption_tears_down_everything(tmp_path, clean_host, signals, args, after, delay):
    proc = start(*args, "--results", str(tmp_path))
    try:
        wait_for_line(proc, after)
        time.sleep(delay)              # in the CLI, in iperf3, or mid-build
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err


@pytest.mark.privileged
@pytest.mark.parametrize("args,after,delay", [
    (["--cli", "--no-traffic"], "reach", 0),
    (["--no-traffic", BIG], "fabric", 1.5),
], ids=["killed-when-ready", "killed-mid-build"])
def test_cleanup_removes_what_a_killed_lab_left(tmp_path, args, after, delay):
    before = host_state()
    proc = start(*args, "--results", str(tmp_path))
    wait_for_line(proc, after)
    time.sleep(delay)
    proc.kill()
    proc.communicate(timeout=30)
    assert host_state() != before, "a SIGKILLed lab should have left something"
    out = run("--cleanup")
    assert out.returncode == 0 and "cleaned up after lab" in out.stdout
    deadline = time.monotonic() + 10
    while host_state() != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert host_state() == before
    assert "nothing to clean up" in run("--cleanup").stdout


@pytest.mark.privileged
def test_delay_needs_netem_and_says_so(clean_host):
    from topologies.system import netem_available
    proc = run("--check", str(REPO / "topologies" / "oversubscribed-delay.yaml"))
    if netem_available():
        assert proc.returncode == 0 and "0.5 ms delay" in proc.stdout
    else:
        assert proc.returncode == 2
        assert proc.stderr == (
            f"error: {REPO}/topologies/oversubscribed-delay.yaml: links.leaf_spine asks for "
            "delay or loss, which needs the kernel's sch_netem qdisc, and this kernel has none: "
            "set delay_ms and loss_percent to 0 here, or use the Vagrant lab VM\n")


@pytest.mark.privileged
def test_stp_baseline_converges_and_reaches_every_pair(tmp_path, clean_host):
    proc = run("--policy", "stp", "--json", "--no-traffic", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["policy"] == "stp" and summary["openflow"] == []
    assert summary["reachability"]["ok"] == summary["reachability"]["total"] == 12


EXPERIMENT_YAML = """
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
links:
  server_leaf: {rate_mbit: 20, queue_packets: 32}
  leaf_spine: {rate_mbit: 20, queue_packets: 32}
experiment: {collective: allgather, minbytes: 16K, maxbytes: 16K, iters: 3, warmup: 0,
             channels: 2, probe: [h2, h3]}
"""


def test_the_yaml_experiment_is_checked_and_flags_override_it(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT_YAML)
    out = run("--check", str(path)).stdout
    assert ("experiment: allgather (ring), engine agents, 16384 to 16384 B x4, 3 iterations "
            "after 0 warm-up, 2 connection(s) per peer") in out
    out = run("--check", str(path), "-c", "alltoall", "-n", "1", "--channels", "4").stdout
    assert "experiment: alltoall (pairwise), engine agents, 16384 to 16384 B x4, 1 iterations" in out
    bad = run("--check", str(path), "-a", "tree")
    assert bad.returncode == 2 and bad.stderr == (
        "error: no 'tree' algorithm for allgather; expected one of ring\n")
    for flags, message in ((["-w", "-3"], "argument -w/--warmup: expected a whole number"),
                           (["--channels", "17"], "expected 1 to 16 connections per peer"),
                           (["--probe", "h1,h1"], "probe needs two different servers, got h1,h1"),
                           (["--cross", "h1,h9"], "--cross h1,h9: not servers of this fabric"),
                           (["--csv", "/nonexistent/x.csv"], "the folder /nonexistent does not exist")):
        bad = run("--check", str(path), *flags)
        assert bad.returncode == 2 and message in bad.stderr and "Traceback" not in bad.stderr
    path.write_text(EXPERIMENT_YAML.replace("collective: allgather", "collective: allgather, algorithm: rhd"))
    bad = run("--check", str(path))
    assert bad.stderr == (f"error: {path}: experiment: no 'rhd' algorithm for allgather; "
                          "expected one of ring\n")


@pytest.mark.privileged
def test_the_yaml_experiment_runs(tmp_path, clean_host):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT_YAML)
    proc = run(str(path), "--json", "-n", "2", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["collectives"]
    assert result["probe"] == ["h2", "h3"] and result["experiment"]["channels"] == 2
    [r] = result["runs"]
    assert (r["collective"], r["size_bytes"], r["iterations"], r["wrong"]) == ("allgather", 16384, 2, 0)


@pytest.mark.privileged
def test_cross_traffic_shares_the_fabric_with_the_collective(tmp_path, clean_host):
    proc = run("-b", "256K", "-e", "256K", "-n", "2", "--cross", "h2,h3", "--json",
               "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["collectives"]
    assert result["runs"][0]["wrong"] == 0
    cross = result["cross_traffic"]
    assert (cross["src"], cross["dst"]) == ("h2", "h3") and cross["mbit_s"] > 1
