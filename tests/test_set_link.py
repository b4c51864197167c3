"""How a lab takes a link down and up (Lab.set_link), without a lab: the
switches' ends through Open vSwitch itself (an OpenFlow PORT_MOD on each
bridge's management socket, lab/portmod.py), both at once, so ovs-vswitchd
marks the port down and revalidates in that step instead of waiting for the
kernel's netlink notice; the servers' ends, a failed port-mod and a silent
failure through the node's shell."""

import socket
import struct
import threading

from lab import lifecycle, portmod
from lab.lifecycle import Lab
from topologies.fabric import LinkSpec


class Intf:
    def __init__(self, name):
        self.name = name


class Node:
    def __init__(self, name, ports=()):
        self.name, self.shell = name, []
        self.ports = {Intf(i): n for i, n in ports}

    def cmd(self, line):
        self.shell.append(line)


class Net:
    def __init__(self, switches, hosts):
        self.switches, self.hosts = switches, hosts

    def get(self, name):
        return next(n for n in self.switches + self.hosts if n.name == name)


class Link:
    def __init__(self, a, b, a_intf, b_intf):
        self.a, self.b, self.a_intf, self.b_intf = a, b, a_intf, b_intf
        self.spec = LinkSpec(20, 32, 0, 0)


class Fabric:
    endpoints, policy = {}, "ecmp"
    links = [Link("leaf1", "spine1", "leaf1-eth3", "spine1-eth1"),
             Link("h1", "leaf1", "h1-eth0", "leaf1-eth1")]


def lab_with(monkeypatch, fail=()):
    calls = []

    def set_ports(ports, up):
        calls.append((ports, up))
        return ["refused" if p[0] in fail else None for p in ports]
    monkeypatch.setattr(lifecycle.portmod, "set_ports", set_ports)
    monkeypatch.setattr(lifecycle.portmod, "hw_addr", lambda intf: f"mac-of-{intf}")
    lab = Lab(Fabric(), "/nonexistent", log=lambda text: None)
    lab.net = Net([Node("leaf1", [("leaf1-eth1", 1), ("leaf1-eth3", 3)]),
                   Node("spine1", [("spine1-eth1", 1)])], [Node("h1", [("h1-eth0", 0)])])
    return lab, calls


def test_a_link_between_switches_goes_down_and_up_through_open_vswitch_at_once(monkeypatch):
    lab, calls = lab_with(monkeypatch)
    lab.set_link("spine1", "leaf1", up=False)
    # one call for both ends: their port-mods leave together
    assert calls == [([("leaf1", 3, "mac-of-leaf1-eth3"), ("spine1", 1, "mac-of-spine1-eth1")],
                      False)]
    assert all(not n.shell for n in lab.net.switches)       # no `ip link` after it
    lab.set_link("leaf1", "spine1", up=True)
    assert calls[-1][1] is True and len(calls[-1][0]) == 2


def test_a_servers_end_and_a_failed_port_mod_fall_back_to_ip_link(monkeypatch):
    lab, calls = lab_with(monkeypatch, fail={"spine1"})
    lab.set_link("leaf1", "spine1", up=False)
    assert lab.net.get("spine1").shell == ["ip link set dev spine1-eth1 down"]
    assert lab.net.get("leaf1").shell == []
    lab.set_link("h1", "leaf1", up=False)
    assert lab.net.get("h1").shell == ["ip link set dev h1-eth0 down"]
    assert calls[-1] == ([("leaf1", 1, "mac-of-leaf1-eth1")], False)


def test_a_silent_failure_leaves_the_carrier_and_the_port_alone(monkeypatch):
    lab, calls = lab_with(monkeypatch)
    lab.set_link("leaf1", "spine1", up=False, silent=True)
    assert calls == []
    assert all(line.startswith("tc ") for line in lab.net.get("leaf1").shell)


def test_a_port_mod_sets_only_the_port_down_bit_of_one_port():
    msg = portmod.port_mod(3, "2a:c9:e1:28:d3:c5", up=False, xid=7)
    assert len(msg) == 40 and msg[:8] == struct.pack("!BBHI", 4, 16, 40, 7)
    port_no, mac, config, mask, advertise = struct.unpack("!I4x6s2xIII4x", msg[8:])
    assert (port_no, mac.hex(), config, mask, advertise) == (3, "2ac9e128d3c5", 1, 1, 0)
    assert struct.unpack("!I", portmod.port_mod(3, "2a:c9:e1:28:d3:c5", up=True)[24:28]) == (0,)


def fake_bridge(path, answer):
    """A management socket that reads one request whole and answers it."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    got = []

    def serve():
        conn, _ = server.accept()
        data = b""
        while len(data) < 56:
            data += conn.recv(4096)
        got.append(data)
        conn.sendall(answer)
        conn.close()
        server.close()
    threading.Thread(target=serve, daemon=True).start()
    return got


def test_each_bridge_gets_hello_port_mod_and_barrier_in_one_go_and_its_reply_is_read(
        tmp_path, monkeypatch):
    monkeypatch.setenv("OVS_RUNDIR", str(tmp_path))
    hello, barrier = portmod.header(0, 8, 0), portmod.header(21, 8, 2)
    error = portmod.header(1, 12, 1) + bytes.fromhex("00070001")
    ok = fake_bridge(tmp_path / "leaf1.mgmt", hello + barrier)
    bad = fake_bridge(tmp_path / "spine1.mgmt", hello + error)
    results = portmod.set_ports([("leaf1", 3, "00:00:00:00:00:01"),
                                 ("spine1", 1, "00:00:00:00:00:02"),
                                 ("leaf9", 1, "00:00:00:00:00:03")], up=False)
    assert results[0] is None and "error 00070001" in results[1] and "leaf9" in results[2]
    assert ok == [portmod.request(3, "00:00:00:00:00:01", False)]
    assert bad == [portmod.request(1, "00:00:00:00:00:02", False)]
