"""lab/datapath.py: what a lab's private Open vSwitch starts with and what
each port gets, as data."""

from lab import datapath


def test_the_adopted_datapath_keeps_every_frame_on_the_qdiscs():
    """The AF_PACKET netdev: no AF_XDP port type (its transmit bypasses the
    HTB shaping, bench/datapath_bench.py) and no MTU limit of its own."""
    assert datapath.port_settings("leaf1-eth3") == []
    assert datapath.max_mtu() == 0


def test_the_adopted_daemon_keeps_its_heap():
    env = datapath.vswitchd_env()
    assert "glibc.malloc.trim_threshold=" in env["GLIBC_TUNABLES"]
    assert "glibc.malloc.top_pad=" in env["GLIBC_TUNABLES"]


def test_the_daemon_command_line_points_at_its_own_folder():
    cmd = datapath.vswitchd_command("/r", "/l")
    assert cmd[0] == "ovs-vswitchd" and "unix:/r/db.sock" in cmd
    assert "--pidfile=/r/ovs-vswitchd.pid" in cmd and "--log-file=/l/ovs-vswitchd.log" in cmd
    assert "--detach" in cmd and "--mlockall" not in cmd


def test_port_settings_and_other_config_as_ovs_vsctl_arguments():
    assert datapath.port_settings("s1-eth1", "afxdp-nonpmd-3000") == [
        "--", "set", "Interface", "s1-eth1", "type=afxdp-nonpmd"]
    assert datapath.vsctl_other_config("af_packet-txflush50") == [
        "--", "set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50"]
    assert datapath.vsctl_other_config("af_packet") == []


def test_every_variant_names_its_parts():
    for name, v in datapath.VARIANTS.items():
        assert set(v) <= {"other_config", "port", "env", "mtu", "args"}, name
    assert datapath.ADOPTED in datapath.VARIANTS
