"""The controller's OpenFlow listener over TLS, and the connections it refuses.

os-ken does TLS itself: with its ``ofp_ssl_listen_port``, ``ctl_privkey``,
``ctl_cert`` and ``ca_certs`` options its one listener wraps every accepted
connection in TLS, presents the controller's certificate and requires the
switch's to be signed by the CA (`oslo_args`). A switch without such a
certificate fails the handshake and never reaches the application. os-ken
only logs that failure as an uncaught exception of a thread; `report_refusals`
makes it a sentence handed to the application (which puts it in the status,
so the lab stops waiting for a switch that will never be let in), and leaves
alone a connection that closes before it says anything (the lab's own check
that the controller listens).
"""

from __future__ import annotations

import logging
import ssl
import threading
from typing import Callable, List, Optional

HANDSHAKE_TIMEOUT_S = 10.0     # a peer that connects and says nothing holds a thread no longer
LOG = logging.getLogger("controller.tls")


def oslo_args(port: int, key: str, cert: str, ca: str) -> List[str]:
    """os-ken's command line for one TLS listener on `port` (and none in
    plain TCP) that requires switch certificates signed by `ca`."""
    return ["--ofp-ssl-listen-port", str(port), "--ctl-privkey", key, "--ctl-cert", cert,
            "--ca-certs", ca]


def refusal(exc: BaseException) -> Optional[str]:
    """Why a TLS handshake failed, as a status line says it; None when the
    peer closed or reset the connection before finishing it (nothing to report)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its certificate is not signed by this run's CA ({exc.verify_message})"
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError)):
        return None
    if isinstance(exc, TimeoutError):
        return f"it did not finish the TLS handshake within {HANDSHAKE_TIMEOUT_S:.0f} s"
    if isinstance(exc, ssl.SSLError):
        reason = (exc.reason or str(exc)).lower().replace("_", " ")
        if "unknown ca" in reason or "bad certificate" in reason or "certificate unknown" in reason:
            return ("it rejected the controller's certificate (" + reason + "): it trusts "
                    "another CA than this run's")
        if "certificate" in reason:
            return f"it sent no certificate signed by this run's CA ({reason})"
        if "wrong version" in reason or "http request" in reason or "record" in reason:
            return f"it does not speak TLS ({reason}): a switch set to tcp: on a TLS controller"
        return f"the TLS handshake failed ({reason})"
    if isinstance(exc, OSError):
        return None
    return None


def report_refusals(on_refused: Callable[[tuple, str], None]) -> None:
    """Make os-ken's listener call `on_refused((host, port), why)` for each
    connection refused during the TLS handshake; errors after it (an
    OpenFlow session that fails) go on to os-ken as before."""
    from os_ken.controller import controller
    from os_ken.lib import hub

    class Listener(hub.StreamServer):
        def __init__(self, listen_info, handle=None, **ssl_args):
            if not ssl_args:
                super().__init__(listen_info, handle)
                return
            state = threading.local()        # each connection has its own thread (or greenlet)

            def handshaken(sock, addr):
                state.handshaken = True
                sock.settimeout(None)            # os-ken's Datapath sets its own
                handle(sock, addr)

            super().__init__(listen_info, handshaken, **ssl_args)
            wrapped = self.handle

            def guarded(sock, addr):
                state.handshaken = False
                sock.settimeout(HANDSHAKE_TIMEOUT_S)
                try:
                    wrapped(sock, addr)
                except Exception as exc:         # noqa: BLE001 - sorted below
                    if state.handshaken:
                        raise
                    sock.close()
                    why = refusal(exc)
                    if why is None:
                        LOG.debug("%s:%s closed before the TLS handshake ended: %s",
                                  *addr[:2], exc)
                    else:
                        on_refused(addr, why)

            self.handle = guarded

    controller.StreamServer = Listener
