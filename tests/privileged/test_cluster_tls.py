"""A secured cluster run on two test-bed machines (devtools/testbed.py): OpenFlow
over TLS with certificates made for the run (lab/cluster/certificates.py), Open vSwitch's
`ssl:` targets on each machine; a machine whose switches hold another run's
certificate is refused and the run stops saying so; a switch with a valid
certificate but a datapath id the fabric does not have is disconnected and
named in the controller's status while the fabric runs on; ssh refuses a
machine whose host key it does not know, or knows otherwise, in one line."""

import stat
import subprocess
import time

import pytest

from harness import TOPOLOGIES
from harness.labs import our_state
from devtools import testbed
from lab.cluster.cluster import ClusterLab
from lab.cluster.cluster_preflight import host_key_line, preflight, run_command
from lab.host import LabError
from lab.reachability import all_pairs_reachability
from lab.cluster.certificates import make_certificates
from topologies.fabric import load_fabric
from topologies.placement import cluster_of, place

from tests.privileged.test_cluster_lab import MACHINES, bed, clean_everywhere  # noqa: F401

pytestmark = [] if testbed.rootfs_current() else [pytest.mark.slow]


def on(ip, command):
    return subprocess.run(["ssh", ip, command], capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()


def cluster_lab(tmp_path, cls=ClusterLab):
    fabric = load_fabric(TOPOLOGIES / "default.yaml")
    return cls(fabric, tmp_path, cluster_of(fabric, list(MACHINES)), place(fabric, len(MACHINES)))


def test_openflow_runs_over_tls_with_the_runs_certificates(bed, tmp_path):  # noqa: F811 (the fixture)
    before = our_state()
    with cluster_lab(tmp_path) as lab:
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600
                   for p in (tmp_path / "tls").glob("*.key"))
        assert lab.summary()["tls"] is True
        for ip in MACHINES:
            targets = on(ip, "ovs-vsctl --bare --columns=target list Controller")
            assert targets.split() == [f"ssl:{lab.controller.ip}:{lab.controller.port}"] * 2
            ssl = on(ip, "ovs-vsctl get-ssl")
            key = ssl.splitlines()[0].split(": ", 1)[1]
            assert "/fabric-lab-part-" in key and on(ip, f"stat -c %a {key}") == "600"
        status = lab.controller_status()
        assert sorted(status["connected"]) == sorted(s.name for s in lab.fabric.switches)
        assert status["errors"] == [] and status["refused"] == {}
        assert all_pairs_reachability(lab).complete
    for ip in MACHINES:                        # the machines' SSL setting went with the run
        assert on(ip, "ovs-vsctl get-ssl") == ""
    assert clean_everywhere() == {} and our_state() == before


class AnotherRunsCertificate(ClusterLab):
    """Machine 2's switches hold a certificate of another run's CA (they
    trust this run's, so only the controller can refuse them)."""

    def machine_tls(self, index):
        sent = super().machine_tls(index)
        if index == 1:
            other = make_certificates(self.run_dir / "other", "other", self.controller.ip,
                                      [self.cluster.machines[1]])
            sent = {**other.for_machine(0), "ca": sent["ca"]}
        return sent


def test_a_machine_with_another_runs_certificate_is_refused(bed, tmp_path):  # noqa: F811 (the fixture)
    before = our_state()
    t0 = time.monotonic()
    with pytest.raises(LabError) as exc:
        with cluster_lab(tmp_path, AnotherRunsCertificate):
            pass
    assert str(exc.value).startswith(
        f"the controller reports: refused a TLS connection from {MACHINES[1]}: its "
        "certificate is not signed by this run's CA (")
    assert time.monotonic() - t0 < 60             # said at once, not after the 120 s wait
    log = (tmp_path / "controller.log").read_text()
    assert not any(f"{name} connected" in log for name in ("leaf2", "spine2"))   # machine 2's
    assert clean_everywhere() == {} and our_state() == before


def test_a_switch_with_a_datapath_id_not_of_the_fabric_is_refused(bed, tmp_path):  # noqa: F811 (the fixture)
    """It has this run's certificate (it is on machine 2, whose SSL setting
    is the run's): only its datapath id gives it away."""
    with cluster_lab(tmp_path) as lab:
        target = f"ssl:{lab.controller.ip}:{lab.controller.port}"
        on(MACHINES[1], "ovs-vsctl --timeout=30 add-br rogue0 -- set bridge rogue0 "
           "datapath_type=netdev other-config:datapath-id=00000000000000ff -- "
           f"set-controller rogue0 {target}")
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not lab.controller_status()["errors"]:
                time.sleep(0.1)
            status = lab.controller_status()
            assert status["errors"] == [f"refused a switch with datapath id 00000000000000ff "
                                        f"from {MACHINES[1]}: no switch of the fabric has it"]
            assert sorted(status["programmed"]) == sorted(s.name for s in lab.fabric.switches)
            assert all_pairs_reachability(lab).complete       # the fabric runs on
            log = (tmp_path / "controller.log").read_text()
            assert "refused a switch with datapath id 00000000000000ff" in log
        finally:
            on(MACHINES[1], "ovs-vsctl --timeout=30 del-br rogue0")
    assert clean_everywhere() == {}


def test_ssh_refuses_an_unknown_or_changed_host_key_in_one_line(bed, tmp_path):  # noqa: F811 (the fixture)
    """The preflight's own ssh, run for real, with known_hosts that lack the
    machine's key, then hold another key for it."""
    def with_known_hosts(path):
        def runner(argv, timeout):
            if argv[0] == "ssh":
                argv = [argv[0], "-o", f"UserKnownHostsFile={path}",
                        "-o", "GlobalKnownHostsFile=/dev/null", *argv[1:]]
            return run_command(argv, timeout)
        return runner

    empty = tmp_path / "empty"
    empty.write_text("")
    lines = preflight([MACHINES[1]], runner=with_known_hosts(empty))
    assert lines == [host_key_line(MACHINES[1], "Host key verification failed.")]
    assert "not in this machine's known_hosts" in lines[0] and "ssh-keyscan" in lines[0]
    swapped = tmp_path / "swapped"                       # m1's key under m2's address
    kind, key = testbed.known_hosts(1).split()[1:3]
    swapped.write_text(f"{MACHINES[1]} {kind} {key}\n")
    [line] = preflight([MACHINES[1]], runner=with_known_hosts(swapped))
    assert line.startswith(f"{MACHINES[1]}: its ssh host key differs from the one known_hosts "
                           "holds for it") and "\n" not in line
    assert preflight(list(MACHINES)) == []             # the test bed's own known_hosts
