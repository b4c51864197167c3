"""OpenFlow over TLS for a cluster run: certificates made for one run, in
its folder, with the openssl command line (Open vSwitch's own ovs-pki calls
the same tool; it comes with Open vSwitch).

    <run>/tls/ca.pem                 the run's certificate authority (its key
    <run>/tls/ca.key                 signs the others and then stays here)
    <run>/tls/controller.{pem,key}   the controller's, for the address it listens on
    <run>/tls/switch-N.{pem,key}     machine N's switches' (one per machine)

Keys are P-256 (milliseconds to make, where RSA takes a tenth of a second
each), mode 0600 in a 0700 folder, and live as long as the run's folder; the
certificates are valid for MAX_DAYS. The controller requires a certificate
signed by the run's CA from every switch (os-ken's ``ca_certs``: a switch with
any other is refused during the handshake), and each machine's Open vSwitch
accepts only a controller whose certificate the run's CA signed
(``ovs-vsctl set-ssl``). A machine receives its own key and certificate and
the CA's certificate in the build message, over its ssh session, as it
receives the fabric; never the CA's key.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from lab.host import LabError

MAX_DAYS = 7                  # longer than any run; expiry never ends one
CURVE = "prime256v1"


@dataclass(frozen=True)
class Credential:
    """A key and its certificate, as files."""
    key: Path
    cert: Path

    def pem(self) -> Dict[str, str]:
        return {"key": self.key.read_text(), "cert": self.cert.read_text()}


@dataclass(frozen=True)
class RunCertificates:
    folder: Path
    ca: Path                   # the CA's certificate (its key: ca.key beside it)
    controller: Credential
    switches: List[Credential]   # one per machine, in the cluster's order

    def controller_options(self) -> List[str]:
        """The controller's command line for them (controller/__main__.py)."""
        return ["--tls-key", str(self.controller.key), "--tls-cert", str(self.controller.cert),
                "--tls-ca", str(self.ca)]

    def for_machine(self, index: int) -> Dict[str, str]:
        """What machine `index` is sent: its switches' key and certificate,
        and the CA's certificate that the controller's must be signed by."""
        return {**self.switches[index].pem(), "ca": self.ca.read_text()}


def _openssl(*args: str, stdin: Optional[str] = None) -> None:
    try:
        proc = subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True,
                              timeout=60)
    except FileNotFoundError:
        raise LabError("openssl is not installed here, and a cluster run makes its TLS "
                       "certificates with it: install the openssl package (Open vSwitch's "
                       "ovs-pki needs it too), or set cluster.tls: false") from None
    if proc.returncode != 0:
        lines = [l for l in proc.stderr.splitlines() if l.strip()] or ["no message"]
        raise LabError(f"openssl {args[0]} failed making the run's TLS certificates: "
                       f"{lines[-1].strip()}")


def _key(path: Path) -> None:
    """A new P-256 key at `path`, mode 0600 from its first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", f"ec_paramgen_curve:{CURVE}",
             "-out", str(path))
    path.chmod(0o600)


def _signed(folder: Path, name: str, subject: str, extensions: str) -> Credential:
    """A key and a certificate for it, signed by the run's CA."""
    key, cert, csr = folder / f"{name}.key", folder / f"{name}.pem", folder / f"{name}.csr"
    _key(key)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    ext = folder / f"{name}.ext"
    ext.write_text(extensions)
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(folder / "ca.pem"),
             "-CAkey", str(folder / "ca.key"), "-CAcreateserial", "-days", str(MAX_DAYS),
             "-sha256", "-extfile", str(ext), "-out", str(cert))
    csr.unlink()
    ext.unlink()
    return Credential(key, cert)


def make_certificates(folder: Path, run_name: str, controller_address: str,
                      machines: List[str]) -> RunCertificates:
    """A CA, the controller's certificate (for `controller_address`) and one
    for each machine's switches, in `folder` (made 0700)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    _key(folder / "ca.key")
    _openssl("req", "-x509", "-new", "-key", str(folder / "ca.key"), "-days", str(MAX_DAYS),
             "-sha256", "-subj", f"/O=fabric-lab/CN=run CA {run_name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", str(folder / "ca.pem"))
    leaf = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    address = ("IP" if controller_address.replace(".", "").isdigit() else "DNS")
    controller = _signed(folder, "controller", "/O=fabric-lab/CN=controller",
                         leaf + "extendedKeyUsage=serverAuth\n"
                         f"subjectAltName={address}:{controller_address}\n")
    switches = [_signed(folder, f"switch-{i + 1}", f"/O=fabric-lab/CN=switches of {host}",
                        leaf + "extendedKeyUsage=clientAuth\n")
                for i, host in enumerate(machines)]
    (folder / "ca.srl").unlink(missing_ok=True)
    return RunCertificates(folder, folder / "ca.pem", controller, switches)


def write_credentials(folder: Path, pem: Dict[str, str]) -> Dict[str, Path]:
    """On a machine: the key, certificate and CA certificate it was sent, as
    files in `folder` (0700), each 0600; their paths by name."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = {}
    for name, text in (("key", pem["key"]), ("cert", pem["cert"]), ("ca", pem["ca"])):
        path = folder / f"switch-{name}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        paths[name] = path
    return paths
