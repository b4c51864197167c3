"""run_topology.py as a user runs it on a real lab: the default fabric end to
end, the tables, interruption at any moment leaving nothing behind, --cleanup
after a SIGKILL, netem, the STP baseline, the YAML experiment and cross
traffic."""

import json
import os
import signal
import time

import pytest

from tests.helpers import EXPERIMENT_YAML, REPO, TOPOLOGIES, host_state, run, start


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
    verdict = result["fidelity"]                 # a verdict, and advice when it is bad
    assert verdict["trustworthy"] in (True, False) and (verdict["trustworthy"] or verdict["advice"])
    for r in runs:                               # no link faster than its rate, unless flagged
        assert r["busbw_over_link"] <= 1.0 or "over-rate" in r["flags"], r["size_bytes"]
        assert max(l["peak_util"] for l in r["links"].values()) <= 1.0, r["size_bytes"]
        assert (r["size_bytes"] in verdict["flagged_sizes"]) == bool(r["flags"])
    if verdict["flagged_sizes"]:
        assert not verdict["trustworthy"] and "too small to measure" in verdict["advice"]
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


BIG = str(TOPOLOGIES / "leaf-spine-4x8.yaml")


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
