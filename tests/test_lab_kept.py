"""The kept lab's request protocol (lab/kept/kept.py) and what its client prints
(lab/kept/kept_client.py), without a lab: JSON lines over a socket pair; and the
flags run_topology.py refuses with --up and --lab, in one sentence."""

import base64
import os
import socket
import threading
from types import SimpleNamespace

import pytest

from harness import REPO
from harness.commands import run
from lab.kept import kept, kept_client
from lab.kept.keeper import KeptRun, Keeper, forward, node_order, removed_text, with_hosts


def test_messages_cross_a_socket_whole_however_they_are_cut():
    a, b = socket.socketpair()
    with a, b:
        wire = kept.encode({"op": "run", "argv": ["-b", "32K"]}) + kept.encode({"out": "x\ny"})
        for k in range(0, len(wire), 7):             # in pieces of 7 bytes
            a.sendall(wire[k:k + 7])
        a.shutdown(socket.SHUT_WR)
        assert list(kept.messages(b)) == [{"op": "run", "argv": ["-b", "32K"]}, {"out": "x\ny"}]


def test_a_reader_interrupted_while_waiting_loses_nothing():
    """Ctrl-C in the client while it waits: the cancel it sends is answered
    on the same connection, so what was read so far must stay."""
    class Conn:
        chunks = [b'{"out": "a"}\n{"ex', KeyboardInterrupt, b'it": 130}\n', b""]

        def recv(self, _n):
            chunk = self.chunks.pop(0)
            if chunk is KeyboardInterrupt:
                raise KeyboardInterrupt
            return chunk
    reader = kept.Reader(Conn())
    assert reader.next() == {"out": "a"}
    with pytest.raises(KeyboardInterrupt):
        reader.next()
    assert reader.next() == {"exit": 130}
    assert reader.next() is None


def test_a_line_that_is_not_a_json_object_is_an_error_message():
    assert kept.decode(b"nonsense") == {"error": "the other end sent something that is not JSON"}
    assert kept.decode(b"[1]") == {"error": "expected a JSON object"}


def test_the_client_relays_output_and_returns_the_exit_status(monkeypatch, capsys):
    a, b = socket.socketpair()

    def keeper():
        request = next(kept.messages(b))
        kept.send(b, out=f"ran {request['argv'][0]}\n")
        kept.send(b, err="a note\n")
        kept.send(b, exit=3)
        b.close()
    threading.Thread(target=keeper).start()
    monkeypatch.setattr(kept, "connect", lambda: a)
    assert kept_client.run(["-b"], "/") == 3
    out, err = capsys.readouterr()
    assert (out, err) == ("ran -b\n", "a note\n")


def test_a_refusal_is_one_sentence_and_status_1(monkeypatch, capsys):
    a, b = socket.socketpair()
    threading.Thread(target=lambda: (next(kept.messages(b)),
                                     kept.send(b, error="no node 'x' in this lab"))).start()
    monkeypatch.setattr(kept, "connect", lambda: a)
    assert kept_client.execute("x", ["true"]) == 1
    assert capsys.readouterr().err == "error: no node 'x' in this lab\n"
    b.close()


def test_no_keeper_record_means_no_lab(monkeypatch, tmp_path):
    monkeypatch.setattr(kept, "RECORD", tmp_path / "kept.json")
    monkeypatch.setattr(kept.os, "geteuid", lambda: 0)
    with pytest.raises(kept.KeptError, match="no lab is up"):
        kept.connect(tmp_path / "kept.sock")
    kept.write_record(pid=2 ** 22 + 1, start_time=1, fabric="default", folder="/x")
    assert not kept.keeper_alive(kept.read_record())          # no such process
    with pytest.raises(kept.KeptError, match="a dead keeper's record is here"):
        kept.connect(tmp_path / "kept.sock")


def test_exec_forwards_output_and_exit_status():
    import subprocess
    a, b = socket.socketpair()
    with a, b:
        proc = subprocess.Popen(["sh", "-c", "echo out; echo err >&2; exit 4"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        assert forward(proc, a, kept.Reader(a)) == 4
        a.shutdown(socket.SHUT_WR)
        got = list(kept.messages(b))
    assert {"out": "out\n"} in got and {"err": "err\n"} in got


def test_inspect_text_names_nodes_links_and_runs():
    info = {"fabric": "default", "source": "topologies/default.yaml", "shape": "2 leaves",
            "policy": "ecmp", "datapath": "kernel", "folder": "/r/x-lab", "since": 0,
            "uptime_s": 3725, "reach": "12/12 server pairs reach each other",
            "keeper": {"pid": 10, "log": "/r/x-lab/keeper.log"},
            "controller": {"pid": 11, "port": 6653, "log": "/r/x-lab/controller.log"},
            "servers": [{"name": "h1", "ip": "10.0.0.1", "mac": "00:00:00:00:00:01",
                         "leaf": "leaf1", "pid": 12}],
            "switches": [{"name": "leaf1", "role": "leaf", "dpid": 1, "pid": 13}],
            "links": [{"kind": "server_leaf", "a": "h1-eth0", "b": "leaf1-eth1",
                       "rate_mbit": 1000.0, "queue_packets": 100, "delay_ms": 0.5,
                       "loss_percent": 0}],
            "experiments": [vars(KeptRun(1, ["--lab", "-b", "32K"], 0, 0, "/r/e1", 2.0))],
            "running": False}
    text = kept_client.inspect_text(info)
    assert "up 1h 2m 05s" in text and "keeper   pid 10" in text and "control  pid 11, port 6653" in text
    assert "  h1         10.0.0.1" in text and "leaf1      leaf   dpid 1" in text
    assert "h1-eth0        -- leaf1-eth1     server_leaf  1000 Mbit/s, queue 100 packets, " \
           "0.5 ms delay" in text
    assert "  1. --lab -b 32K: exit 0, /r/e1" in text


def test_node_names_sort_by_their_number():
    assert sorted(["h10", "leaf1", "h2", "h1"], key=node_order) == ["h1", "h2", "h10", "leaf1"]


def test_down_says_what_it_removed():
    class Lab:
        tag, run_dir, timings = "7-1", "/r/x-lab", {"teardown_s": 1.25}
    text = removed_text({"bridges": ["a", "b"], "interfaces": ["i"] * 8, "processes": 5}, Lab)
    assert text == ("down     removed 2 bridges, 8 interfaces and 5 processes of lab 7-1 "
                    "(teardown 1.2 s), its record and socket; folder /r/x-lab\n")


@pytest.mark.parametrize("args,sentence", [
    (["--up", "-b", "32K"], "error: --up builds a lab and keeps it up, and -b/--minbytes "
                            "belongs to an experiment on it: run that afterwards with --lab\n"),
    (["--lab", "--datapath", "user"], "error: --lab runs an experiment on the lab that is up, "
     "which is built already, so --datapath would do nothing: `sudo scripts/lab down`, then "
     "`sudo scripts/lab up` with it\n"),
    (["--up", "--lab"], "error: --up builds a lab and --lab runs an experiment on it: use one "
                        "of them\n"),
])
def test_flags_up_and_lab_would_ignore_are_refused(args, sentence):
    proc = run(*args)
    assert (proc.returncode, proc.stderr) == (2, sentence)


@pytest.mark.parametrize("name", ["lab", "b2", "x_y-1", "9", "a" * 32])
def test_a_kept_labs_name_can_be(name):
    assert kept.check_name(name) == name


@pytest.mark.parametrize("name", ["", "A", "-x", "_x", "a/b", "a b", "a.b", "a" * 33, "ü"])
def test_a_kept_labs_name_cannot_be(name):
    with pytest.raises(ValueError, match="a kept lab's name is 1 to 32 of a-z, 0-9, - and _"):
        kept.check_name(name)


def test_each_name_has_its_own_record_and_socket(monkeypatch, tmp_path):
    monkeypatch.setattr(kept, "RECORDS", tmp_path)
    try:
        kept.select("b")
        assert (kept.RECORD, kept.SOCKET) == (tmp_path / "kept-b.json", tmp_path / "kept-b.sock")
        assert kept.name_flag() == " --name b"
        kept.write_record(pid=1, fabric="x")
        kept.select()                          # the default one keeps its old names
        assert (kept.RECORD, kept.SOCKET) == (tmp_path / "kept.json", tmp_path / "kept.sock")
        assert kept.name_flag() == "" and kept.read_record() is None
        kept.write_record(pid=2, fabric="y")
        (tmp_path / "kept-Bad.json").write_text("{}")        # not a name: not listed
        assert kept.names() == ["b", "lab"]
    finally:
        kept.select()


def test_take_name_selects_it_and_leaves_the_rest(monkeypatch, tmp_path):
    monkeypatch.setattr(kept, "RECORDS", tmp_path)
    try:
        assert kept.take_name(["h1", "--name", "x", "--", "cmd", "--name", "y"]) == \
            ["h1", "--", "cmd", "--name", "y"]                # after --: the command's own
        assert kept.SELECTED == "x" and kept.RECORD == tmp_path / "kept-x.json"
        assert kept.take_name(["--name=z", "--json"]) == ["--json"] and kept.SELECTED == "z"
        with pytest.raises(ValueError, match="--name needs the kept lab's name"):
            kept.take_name(["--name"])
        with pytest.raises(ValueError, match="a kept lab's name"):
            kept.take_name(["--name", "Nope"])
    finally:
        kept.select()


def test_no_lab_of_that_name_says_which_are_up(monkeypatch, tmp_path):
    monkeypatch.setattr(kept, "RECORDS", tmp_path)
    monkeypatch.setattr(kept.os, "geteuid", lambda: 0)
    try:
        kept.select("other")
        kept.write_record(pid=2 ** 22 + 1, start_time=1, fabric="default", folder="/x")
        kept.select("mine")
        with pytest.raises(kept.KeptError) as err:
            kept.connect()
        assert str(err.value) == ("no lab named 'mine' is up: `sudo scripts/lab up [FABRIC] "
                                  "--name mine` starts one; kept labs here: other (--name)")
    finally:
        kept.select()


def test_the_kept_client_refuses_a_bad_name_in_one_sentence(capsys):
    assert kept_client.main(["inspect", "--name", "Bad!"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: a kept lab's name is 1 to 32") and err.count("\n") == 1
    assert kept.SELECTED == kept.DEFAULT_NAME


def _stdin_messages(data: bytes) -> bytes:
    """What the client sends to an exec's stdin: `data` in pieces, then its end."""
    pieces = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    return b"".join(kept.encode({"op": "stdin", "data": base64.b64encode(p).decode()})
                    for p in pieces) + kept.encode({"op": "stdin", "eof": True})


@pytest.mark.parametrize("command,data,out,status", [
    ("cat", b"hi\nthere\n", "hi\nthere\n", 0),
    ("wc -c", b"x" * 300_000, "300000\n", 0),
    ("echo done; exit 3", b"y" * 1_000_000, "done\n", 3),     # reads none of it
])
def test_exec_passes_the_clients_stdin_to_the_command(command, data, out, status):
    """The request and the stdin behind it may come in one read: the
    reader that read the request hands the rest to forward."""
    import subprocess
    a, b = socket.socketpair()
    with a, b:
        feeder = threading.Thread(target=b.sendall, args=(
            kept.encode({"op": "exec"}) + _stdin_messages(data),), daemon=True)
        feeder.start()
        reader = kept.Reader(a)
        assert reader.next() == {"op": "exec"}
        proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        code = forward(proc, a, reader)
        a.shutdown(socket.SHUT_WR)
        got = "".join(m.get("out", "") for m in kept.messages(b))
    assert (code, got) == (status, out)


def test_exec_of_a_missing_command_is_127_and_one_sentence(tmp_path, monkeypatch, capsys):
    keeper = Keeper(lab=None, ready=None, experiment=None, folder=str(tmp_path))
    keeper.nodes = {"h1": 1}
    a, b = socket.socketpair()
    with a, b:
        keeper._exec(a, {"node": "h1", "argv": ["no-such-command", "-x"]}, kept.Reader(a))
        a.shutdown(socket.SHUT_WR)
        replies = list(kept.messages(b))
    assert replies == [{"err": "error: h1 has no command 'no-such-command' (not found on "
                               "PATH)\n"}, {"exit": 127}]
    c, d = socket.socketpair()
    d.sendall(b"".join(kept.encode(r) for r in replies))
    monkeypatch.setattr(kept, "connect", lambda: c)
    assert kept_client.execute("h1", ["no-such-command"]) == 127
    assert capsys.readouterr().err == replies[0]["err"]
    d.close()


def test_exec_sees_the_labs_server_names_in_a_hosts_file_of_its_own(tmp_path):
    class Fabric:
        name = "leaf-spine-2x2"
        endpoints = [SimpleNamespace(name="h1", ip="10.0.1.1"),
                     SimpleNamespace(name="h4", ip="10.0.2.2")]
    keeper = Keeper(lab=SimpleNamespace(fabric=Fabric), ready=None, experiment=None,
                    folder=str(tmp_path))
    keeper._write_hosts()
    text = (tmp_path / "hosts").read_text()
    assert text.startswith(open("/etc/hosts").read().rstrip("\n"))
    assert text.endswith("10.0.1.1\th1\n10.0.2.2\th4\n")
    argv = with_hosts(tmp_path / "hosts", ["ping", "-c1", "h4"])
    assert argv[:2] == ["unshare", "--mount"] and argv[-4:] == [str(tmp_path / "hosts"),
                                                                 "ping", "-c1", "h4"]


def test_inspect_into_a_closed_pipe_exits_141_without_a_traceback():
    import subprocess
    import sys
    script = ("import os, sys; from lab.kept import kept_client; os.geteuid = lambda: 0; "
              "kept_client.inspect = lambda: {'servers': ['h'] * 100000}; "
              "sys.exit(kept_client.main(['inspect', '--json']))")
    read, write = os.pipe()
    os.close(read)                                  # the reader is gone before it starts
    try:
        proc = subprocess.run([sys.executable, "-c", script], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")
