"""A lab that stays up (scripts/lab up): up on the default fabric, inspect
(also into a reader that stops reading), exec in a server's namespace (its
stdin passed, the lab's names resolved, a missing command 127),
experiments one after another in their own folders after one that Ctrl-C
stopped (and not the lab), a second up refused, down leaving nothing;
SIGTERM to the keeper doing the same; and a keeper killed with SIGKILL,
then --cleanup or down, leaving nothing either. The tests run in this
file's order, on one kept lab (the last three bring up their own)."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from harness import REPO, TOPOLOGIES
from harness.commands import ENV, RUN_TOPOLOGY, run
from harness.labs import our_state, sandbox_of, wait_until_moving
from lab import records
from lab.kept import kept

LAB = REPO / "scripts" / "lab"
DEFAULT = str(TOPOLOGIES / "default.yaml")
# the kept labs of these tests have their own name: a user's kept lab, or a
# second test run's, may be up beside them (each lab in its own sandbox)
NAME = f"test{os.getpid()}"
SMALL = ("-b", "32K", "-e", "32K", "-n", "1", "-w", "0")


def lab(command, *args, timeout=120) -> subprocess.CompletedProcess:
    """scripts/lab inspect, exec or down of this file's kept lab, as a user
    types it."""
    return subprocess.run([str(LAB), command, "--name", NAME, *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV)


def kept_run(*args, **kw) -> subprocess.CompletedProcess:
    """run_topology.py --up or --lab, for this file's kept lab."""
    return run(*args, "--name", NAME, **kw)


@pytest.fixture(scope="module", autouse=True)
def selected():
    """kept.RECORD and kept.SOCKET below are this file's kept lab's."""
    kept.select(NAME)
    yield
    kept.select()


def wait_gone(pid, timeout=60):
    """Until process `pid` has exited (a cap, however slow the host)."""
    deadline = time.monotonic() + timeout
    while records.pid_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} still runs"
        time.sleep(0.05)


def settle(before, timeout=60):
    """Until the host is as it was (what a SIGKILL leaves takes a moment to go)."""
    deadline = time.monotonic() + timeout
    while our_state() != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert our_state() == before


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    assert not kept.keeper_alive(kept.read_record()), "a kept lab is up already on this host"
    before = our_state()
    results = tmp_path_factory.mktemp("kept")
    proc = kept_run("--up", DEFAULT, "--results", str(results), timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    yield {"before": before, "results": results, "out": proc.stdout}
    if kept.keeper_alive(kept.read_record()):         # a test failed half-way: take it down
        lab("down")


def test_up_prints_what_inspect_prints(up):
    out = up["out"]
    assert out.startswith("lab      leaf-spine-2x2 (") and "12/12 server pairs reach each other" in out
    assert "servers  4" in out and "links    8" in out
    record = kept.read_record()
    assert record["state"] == "up" and f"keeper   pid {record['pid']}" in out
    assert oct(os.stat(kept.SOCKET).st_mode & 0o777) == "0o600"


def test_inspect_lists_servers_links_controller_and_keeper(up):
    proc = lab("inspect", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert [h["name"] for h in info["servers"]] == ["h1", "h2", "h3", "h4"]
    assert all(re.fullmatch(r"10\.\d+\.\d+\.\d+", h["ip"]) for h in info["servers"])
    assert len(info["links"]) == 8 and all(l["rate_mbit"] > 0 and l["queue_packets"] > 0
                                           for l in info["links"])
    assert records.pid_alive(info["controller"]["pid"]) and info["controller"]["port"] > 0
    assert info["keeper"]["pid"] == kept.read_record()["pid"] and info["uptime_s"] >= 0
    text = lab("inspect").stdout
    assert "h1-eth0" in text and "Mbit/s, queue" in text


def test_exec_runs_in_a_servers_namespace(up):
    info = json.loads(lab("inspect", "--json").stdout)
    h4 = next(h["ip"] for h in info["servers"] if h["name"] == "h4")
    proc = lab("exec", "h1", "--", "ping", "-c1", "-W5", h4)
    assert proc.returncode == 0 and "1 received" in proc.stdout, proc.stdout + proc.stderr
    assert lab("exec", "h1", "--", "false").returncode == 1         # its exit status
    unknown = lab("exec", "h99", "--", "true")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: no node 'h99' in this lab: its nodes are h1, h2")
    assert unknown.stderr.count("\n") == 1



def exec_with(stdin, *argv) -> subprocess.CompletedProcess:
    """scripts/lab exec of this file's kept lab, `stdin` piped into it."""
    return subprocess.run([str(LAB), "exec", "--name", NAME, *argv], capture_output=True,
                          text=True, timeout=120, env=ENV, input=stdin)


def test_exec_passes_its_stdin_to_the_command(up):
    proc = exec_with("hi\nthere\n", "h1", "--", "cat")
    assert proc.returncode == 0 and proc.stdout == "hi\nthere\n", proc.stdout + proc.stderr
    counted = exec_with("x" * 1_000_000, "h2", "--", "wc", "-c")
    assert counted.stdout.strip() == "1000000", counted.stdout + counted.stderr
    # a command that reads none of it: its output and status come all the same
    ignored = exec_with("y" * 1_000_000, "h3", "--", "sh", "-c", "echo done; exit 3")
    assert ignored.returncode == 3 and ignored.stdout == "done\n", ignored.stderr


def test_exec_resolves_the_labs_server_names_without_touching_etc_hosts(up):
    machine = open("/etc/hosts").read()
    info = json.loads(lab("inspect", "--json").stdout)
    h4 = next(h["ip"] for h in info["servers"] if h["name"] == "h4")
    looked_up = lab("exec", "h1", "--", "getent", "hosts", "h4")
    assert looked_up.returncode == 0 and looked_up.stdout.split() == [h4, "h4"], looked_up
    proc = lab("exec", "h1", "--", "ping", "-c1", "-W5", "h4")        # as docs/running.md shows
    assert proc.returncode == 0 and "1 received" in proc.stdout and h4 in proc.stdout, proc
    assert open("/etc/hosts").read() == machine
    assert subprocess.run(["getent", "hosts", "h4"], capture_output=True).stdout.split()[:1] \
        != [h4]


def test_exec_of_a_command_the_node_lacks_exits_127_in_one_sentence(up):
    proc = lab("exec", "h1", "--", "no-such-command", "-x")
    assert proc.returncode == 127 and proc.stdout == ""
    assert proc.stderr == "error: h1 has no command 'no-such-command' (not found on PATH)\n"


def test_inspect_into_a_reader_that_stops_reading_prints_no_traceback(up):
    for _ in range(5):
        proc = subprocess.run(f"{LAB} inspect --name {NAME} --json | head -c 10", shell=True,
                              capture_output=True, text=True, timeout=120, env=ENV)
        assert proc.stdout == '{\n "fabric' and proc.stderr == "", proc.stderr

def test_ctrl_c_stops_the_experiment_not_the_lab(up):
    proc = subprocess.Popen(RUN_TOPOLOGY + ["--lab", "--name", NAME, "-b", "4M", "-e", "4M",
                                            "-n", "50", "--results", str(up["results"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=REPO)
    try:
        def running():
            info = json.loads(lab("inspect", "--json").stdout)
            return info["running"] and len(info["experiments"]) == 1
        deadline = time.monotonic() + 120
        while not running():
            assert time.monotonic() < deadline and proc.poll() is None, "it never started"
            time.sleep(0.1)
        keeper = kept.read_record()["pid"]
        wait_until_moving(sandbox=sandbox_of(keeper))  # in the collective itself
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "the lab stays up" in err, err
    info = json.loads(lab("inspect", "--json").stdout)
    assert info["experiments"][-1]["exit"] == 130 and not info["running"]
    assert lab("exec", "h2", "--", "true").returncode == 0


def test_experiments_run_one_after_another_in_their_own_folders(up):
    folders = []
    for _ in range(2):
        proc = kept_run("--lab", *SMALL, "--results", str(up["results"]), timeout=300)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        rows = [l.split() for l in proc.stdout.splitlines()
                if l.startswith("       ") and l.split()[0] == "32768"]
        assert rows and rows[0][8] == "0", proc.stdout           # #wrong
        folders.append(re.search(r"results in (\S+)", proc.stdout).group(1))
    assert folders[0] != folders[1]
    for folder in folders:
        summary = json.loads(open(f"{folder}/summary.json").read())
        assert summary["collectives"]["runs"][0]["wrong"] == 0
    info = json.loads(lab("inspect", "--json").stdout)        # after the one stopped
    assert [e["results"] for e in info["experiments"]][1:] == folders
    assert [e["exit"] for e in info["experiments"]] == [130, 0, 0]


def test_a_second_up_is_refused(up):
    proc = kept_run("--up", DEFAULT, "--results", str(up["results"]))
    record = kept.read_record()
    assert proc.returncode == 1
    assert proc.stderr == (f"error: a lab is already up: {kept.running_text(record)}; "
                           f"`sudo scripts/lab down --name {NAME}` takes it down, or "
                           "`--name NAME` keeps another one beside it\n")


def test_down_leaves_nothing(up):
    keeper = kept.read_record()["pid"]
    proc = lab("down")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"removed 4 bridges, \d+ interfaces and \d+ processes", proc.stdout)
    wait_gone(keeper)
    assert our_state() == up["before"]
    assert not kept.RECORD.exists() and not kept.SOCKET.exists()
    assert not [p for p in records.records() if records.record_owner(p) == keeper]
    assert f"no lab named '{NAME}' is up" in lab("inspect").stderr


def test_sigterm_to_the_keeper_takes_the_lab_down(tmp_path):
    assert not kept.keeper_alive(kept.read_record())
    before = our_state()
    proc = kept_run("--up", DEFAULT, "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = kept.read_record()
    os.kill(record["pid"], signal.SIGTERM)
    wait_gone(record["pid"])
    assert our_state() == before
    assert not kept.RECORD.exists() and not kept.SOCKET.exists()
    assert "interrupted (SIGTERM): the lab was torn down" in open(record["log"]).read()


@pytest.mark.parametrize("how", ["cleanup", "down"])
def test_a_killed_keeper_then_cleanup_or_down_leaves_nothing(tmp_path, how):
    assert not kept.keeper_alive(kept.read_record())
    before = our_state()
    proc = kept_run("--up", DEFAULT, "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    keeper = kept.read_record()["pid"]
    os.kill(keeper, signal.SIGKILL)
    wait_gone(keeper)
    assert our_state() != before, "a SIGKILLed keeper should have left its lab"
    out = run("--cleanup") if how == "cleanup" else lab("down")
    assert out.returncode == 0 and "cleaned up after lab" in out.stdout, out.stdout
    assert "removed the record and socket of the kept lab" in out.stdout
    settle(before)
    assert not kept.RECORD.exists() and not kept.SOCKET.exists()
    assert "nothing to clean up" in run("--cleanup").stdout
