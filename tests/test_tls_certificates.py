"""A cluster run's OpenFlow over TLS, without root: the certificates made
per run (lab/cluster/certificates.py: a CA, the controller's, one per machine's switches; keys
0600), the controller's command line, and the real controller (os-ken's own
TLS listener, controller/tls.py) met by TLS clients here: a switch with this
run's certificate gets OpenFlow's hello; one with another CA's certificate,
one without any, one that trusts another CA and one speaking plain TCP are
each refused and named in the status; the lab's own check that the
controller listens (connect, close) is not. The switches themselves (Open
vSwitch over `ssl:`) are in tests/privileged/test_cluster_tls.py."""

import json
import socket
import ssl
import stat
import subprocess
import sys
import time

import pytest

from harness import REPO
from harness.fabrics import leaf_spine
from lab.controller_process import free_port
from lab.cluster.certificates import make_certificates, write_credentials

OFPT_HELLO = 0


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("run") / "tls", "test-run", "127.0.0.1",
                             ["10.77.0.11", "10.77.0.12"])


@pytest.fixture(scope="module")
def rogue(tmp_path_factory):
    """Another run's certificates: the same kind, signed by another CA."""
    return make_certificates(tmp_path_factory.mktemp("other") / "tls", "other-run",
                             "127.0.0.1", ["10.77.0.12"])


def verify(ca, *certs):
    return subprocess.run(["openssl", "verify", "-CAfile", str(ca), *map(str, certs)],
                          capture_output=True, text=True)


def test_each_run_makes_a_ca_a_controller_and_one_switch_certificate_per_machine(certs, rogue):
    folder = certs.folder
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert sorted(p.name for p in folder.iterdir()) == [
        "ca.key", "ca.pem", "controller.key", "controller.pem", "switch-1.key", "switch-1.pem",
        "switch-2.key", "switch-2.pem"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in folder.glob("*.key"))
    assert verify(certs.ca, certs.controller.cert, *[s.cert for s in certs.switches]
                  ).returncode == 0
    assert verify(certs.ca, rogue.switches[0].cert).returncode != 0     # another run's
    text = subprocess.run(["openssl", "x509", "-noout", "-text", "-in",
                           str(certs.controller.cert)], capture_output=True, text=True).stdout
    assert "IP Address:127.0.0.1" in text and "TLS Web Server Authentication" in text
    text = subprocess.run(["openssl", "x509", "-noout", "-subject", "-in",
                           str(certs.switches[1].cert)], capture_output=True, text=True).stdout
    assert "switches of 10.77.0.12" in text


def test_a_machine_gets_its_own_key_and_the_ca_certificate_never_the_ca_key(certs, tmp_path):
    sent = certs.for_machine(1)
    assert sent == {"key": certs.switches[1].key.read_text(),
                    "cert": certs.switches[1].cert.read_text(), "ca": certs.ca.read_text()}
    assert all("PRIVATE KEY" not in v for k, v in sent.items() if k != "key")
    paths = write_credentials(tmp_path / "part" / "tls", sent)
    assert stat.S_IMODE((tmp_path / "part" / "tls").stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in paths.values())
    assert paths["cert"].read_text() == sent["cert"]


def test_the_controller_command_line(certs):
    assert certs.controller_options() == [
        "--tls-key", str(certs.controller.key), "--tls-cert", str(certs.controller.cert),
        "--tls-ca", str(certs.ca)]


@pytest.fixture(scope="module")
def controller(certs, tmp_path_factory):
    """The real controller, listening in TLS on loopback."""
    work = tmp_path_factory.mktemp("controller")
    (work / "spec.json").write_text(json.dumps(leaf_spine(2, 2, 1).spec))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "controller", "--spec", str(work / "spec.json"),
                             "--status", str(work / "status.json"), "--port", str(port),
                             *certs.controller_options()], cwd=REPO,
                            stdout=open(work / "controller.log", "w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, \
                    (work / "controller.log").read_text()
                time.sleep(0.1)
        yield port, work
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def status(work, errors=0, timeout=10.0, refused=0):
    """The status once it lists `errors` errors and `refused` refusals (or
    the last read after `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        got = json.loads((work / "status.json").read_text())
        if (len(got["errors"]) >= errors and sum(got["refused"].values()) >= refused
                or time.monotonic() > deadline):
            return got
        time.sleep(0.05)


def client(port, ca, credential=None):
    """A TLS connection as a switch makes it: the first OpenFlow message
    it reads back, or the error that ended it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(str(ca))
    if credential is not None:
        ctx.load_cert_chain(str(credential.cert), str(credential.key))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw) as tls:
                header = tls.recv(8)
                return header[1] if len(header) == 8 else "closed"
        except (ssl.SSLError, OSError) as exc:
            return exc


def test_the_controller_lets_in_only_switches_with_this_runs_certificate(controller, certs,
                                                                         rogue):
    port, work = controller
    assert status(work, timeout=0)["errors"] == []           # the fixture's check: no error
    assert client(port, certs.ca, certs.switches[0]) == OFPT_HELLO
    assert client(port, certs.ca, certs.switches[1]) == OFPT_HELLO
    assert status(work, timeout=0)["errors"] == []

    assert client(port, certs.ca, rogue.switches[0]) != OFPT_HELLO     # another run's CA
    [error] = status(work, 1)["errors"]
    assert error.startswith("refused a TLS connection from 127.0.0.1: its certificate is not "
                            "signed by this run's CA (")

    assert client(port, certs.ca) != OFPT_HELLO                        # no certificate
    assert client(port, rogue.ca, certs.switches[0]) != OFPT_HELLO     # trusts another CA
    with socket.create_connection(("127.0.0.1", port)) as plain:       # tcp: on a TLS port
        plain.sendall(bytes([4, OFPT_HELLO, 0, 8, 0, 0, 0, 1]))
        with pytest.raises(ConnectionResetError):
            plain.recv(100)
    got = status(work, 1, refused=4)
    log = (work / "controller.log").read_text()
    assert got["errors"] == [error]            # one error per peer address, each attempt logged
    assert got["refused"] == {"TLS from 127.0.0.1": 4}, log
    assert "it sent no certificate signed by this run's CA" in log
    assert "it rejected the controller's certificate" in log
    assert "it does not speak TLS" in log


# --- ssh host keys -----------------------------------------------------------------------

UNKNOWN = ("No ED25519 host key is known for gpu-b and you have requested strict checking.\n"
           "Host key verification failed.")
CHANGED = ("@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
           "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
           "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
           "Host key for gpu-b has changed and you have requested strict checking.\n"
           "Host key verification failed.")


def test_every_ssh_of_a_cluster_run_checks_host_keys():
    from devtools import testbed
    from lab.cluster import cluster, cluster_preflight
    for argv in (cluster.ssh_command("root", "gpu-b", "true"), list(cluster_preflight.SSH)):
        assert "StrictHostKeyChecking=yes" in argv
        assert argv[argv.index("StrictHostKeyChecking=yes") - 1] == "-o"
    # the test bed's machines: its own known_hosts, checked as strictly
    assert "StrictHostKeyChecking yes" in testbed.SSH_OPTIONS
    assert f"UserKnownHostsFile {testbed.KNOWN_HOSTS}" in testbed.SSH_OPTIONS
    assert "StrictHostKeyChecking no" not in testbed.SNIPPET_TEXT


@pytest.mark.parametrize("output,start", [
    (UNKNOWN, "gpu-b: its ssh host key is not in this machine's known_hosts: check the key's "
              "fingerprint against the machine's own"),
    (CHANGED, "gpu-b: its ssh host key differs from the one known_hosts holds for it: if the "
              "machine was reinstalled"),
])
def test_a_host_key_ssh_refuses_is_one_line_saying_what_to_do(output, start):
    from lab.cluster.cluster_preflight import check_machine, checks_for
    checks = checks_for("root", REPO, "0" * 40, "Python 3.11.2 numpy 1.26.4")
    line = check_machine("gpu-b", "root", checks, lambda argv, timeout: (255, output))
    assert line.startswith(start) and "\n" not in line
    assert "docs/cluster.md" in line
