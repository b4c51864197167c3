"""Run the fabric controller: ``python -m controller --spec S --status F --port P``.

os-ken ships no manager command any more, so this starts its AppManager
directly. The OpenFlow listener binds to --host (loopback unless a cluster
run names its own address), in plain TCP or, given --tls-key, --tls-cert and
--tls-ca, in TLS only, requiring each switch's certificate to be signed by
that CA (controller/tls.py). The lab runs this as a child process and stops
it with SIGTERM; it also dies with its parent.
"""

import argparse
import ctypes
import logging
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__)
    parser.add_argument("--spec", required=True, help="normalised fabric spec (JSON)")
    parser.add_argument("--status", required=True, help="status file the app keeps up to date")
    parser.add_argument("--port", type=int, required=True, help="OpenFlow TCP port")
    parser.add_argument("--host", default="127.0.0.1", help="listen address (loopback)")
    parser.add_argument("--tls-key", help="the controller's private key (PEM): TLS only")
    parser.add_argument("--tls-cert", help="the controller's certificate (PEM)")
    parser.add_argument("--tls-ca", help="the CA certificate every switch's must be signed by")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    tls = [args.tls_key, args.tls_cert, args.tls_ca]
    if any(tls) and not all(tls):
        parser.error("--tls-key, --tls-cert and --tls-ca go together")

    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ["FABRIC_LAB_SPEC"] = os.path.abspath(args.spec)
    os.environ["FABRIC_LAB_STATUS"] = os.path.abspath(args.status)

    from os_ken import cfg
    from os_ken.base.app_manager import AppManager
    from os_ken.lib import hub

    if all(tls):
        from controller import tls as tls_listener
        from controller.app import tls_refused
        listen = tls_listener.oslo_args(args.port, *tls)
        tls_listener.report_refusals(tls_refused)
    else:
        listen = ["--ofp-tcp-listen-port", str(args.port)]
    cfg.CONF(args=["--ofp-listen-host", args.host, *listen], project="os_ken")
    manager = AppManager.get_instance()
    manager.load_apps(["controller.app"])
    services = manager.instantiate_apps(**manager.create_contexts())
    hub.joinall(services)
    return 0


if __name__ == "__main__":
    sys.exit(main())
