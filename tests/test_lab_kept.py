"""The kept lab's request protocol (lab/kept.py) and what its client prints
(lab/kept_client.py), without a lab: JSON lines over a socket pair; and the
flags run_topology.py refuses with --up and --lab, in one sentence."""

import socket
import threading

import pytest

from harness.commands import run
from lab import kept, kept_client
from runs.keeper import Experiment, forward, node_order, removed_text


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
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        assert forward(proc, a) == 4
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
            "experiments": [vars(Experiment(1, ["--lab", "-b", "32K"], 0, 0, "/r/e1", 2.0))],
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
