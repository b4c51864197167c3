"""How a lab's private Open vSwitch forwards: the daemon's settings and each
port's interface settings, as plain data (no system calls).

Each lab runs its own ovsdb-server and ovs-vswitchd (OVS_RUNDIR, OVS_DBDIR
and OVS_LOGDIR in a folder of its own); `vswitchd_command` is how that
ovs-vswitchd starts, `other_config` what the Open_vSwitch record then
carries, and `port_settings` what each switch port gets once added.
bench/datapath_bench.py measures every choice below against the others.
"""

from __future__ import annotations

from typing import Dict, List

# A variant: what the daemon gets, and what each port gets.
VARIANTS: Dict[str, dict] = {
    # the AF_PACKET netdev, as Mininet adds a port: one packet socket per
    # port, polled by ovs-vswitchd's main thread
    "af_packet": {"other_config": {}, "port": {}},
    # as ovs-ctl starts the host's: every page locked in memory as it is mapped
    "af_packet-mlockall": {"other_config": {}, "port": {}, "args": ["--mlockall"]},
    # AF_XDP: an XDP program hands each port's frames to a umem of 4 KiB
    # frames; veth refuses native XDP above an MTU of about 3,500 and a
    # jumbo frame does not fit a umem frame, so these run at a smaller MTU
    "afxdp-nonpmd-3000": {"other_config": {}, "port": {"type": "afxdp-nonpmd"}, "mtu": 3000},
    "afxdp-nonpmd-1500": {"other_config": {}, "port": {"type": "afxdp-nonpmd"}, "mtu": 1500},
    "afxdp-pmd-3000": {"other_config": {"pmd-cpu-mask": "0x2"}, "port": {"type": "afxdp"},
                       "mtu": 3000},
    "af_packet-1500": {"other_config": {}, "port": {}, "mtu": 1500},
    "af_packet-3000": {"other_config": {}, "port": {}, "mtu": 3000},
    # glibc's malloc told to keep freed memory: each poll of a port
    # allocates a batch of MTU-sized buffers and frees the unused ones, and
    # by default glibc gives the heap's top back to the kernel (brk) each
    # time, to fault it in, zeroed, on the next poll
    "af_packet-keepheap": {"other_config": {}, "port": {},
                           "env": {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=268435456:"
                                                     "glibc.malloc.top_pad=67108864"}},
    "af_packet-txflush50": {"other_config": {"tx-flush-interval": "50"}, "port": {}},
    "af_packet-tso": {"other_config": {"userspace-tso-enable": "true"}, "port": {}},
}
ADOPTED = "af_packet-keepheap"
BEFORE = "af_packet-mlockall"          # the host's Open vSwitch as scripts/setup.sh starts it


def max_mtu(variant: str = ADOPTED) -> int:
    """The largest MTU the variant forwards (0: no limit of its own)."""
    return VARIANTS[variant].get("mtu", 0)


def vswitchd_env(variant: str = ADOPTED) -> Dict[str, str]:
    """Environment variables the private ovs-vswitchd starts with, beside
    OVS_RUNDIR, OVS_DBDIR and OVS_LOGDIR."""
    return dict(VARIANTS[variant].get("env", {}))


def other_config(variant: str = ADOPTED) -> Dict[str, str]:
    """other_config of the Open_vSwitch record (ovs-vsctl set Open_vSwitch .
    other_config:KEY=VALUE), before the first bridge is added."""
    return dict(VARIANTS[variant]["other_config"])


def vsctl_other_config(variant: str = ADOPTED) -> List[str]:
    """The ovs-vsctl arguments that set `other_config` (none when empty)."""
    pairs = [f"other_config:{k}={v}" for k, v in other_config(variant).items()]
    return ["--", "set", "Open_vSwitch", "."] + pairs if pairs else []


def port_settings(intf: str, variant: str = ADOPTED) -> List[str]:
    """ovs-vsctl arguments for one switch port's Interface record, to append
    to the batch that adds it (none for the AF_PACKET netdev)."""
    port = VARIANTS[variant]["port"]
    if not port:
        return []
    return ["--", "set", "Interface", intf] + [f"{k}={v}" for k, v in port.items()]


def vswitchd_args(variant: str = ADOPTED) -> List[str]:
    """What the variant adds to ovs-vswitchd's command line."""
    return list(VARIANTS[variant].get("args", []))


def vswitchd_command(rundir: str, logdir: str, variant: str = ADOPTED) -> List[str]:
    """The private ovs-vswitchd's command line (its environment carries
    OVS_RUNDIR=rundir, so ovs-appctl finds it)."""
    return ["ovs-vswitchd", f"unix:{rundir}/db.sock", "-vconsole:emer", "-vsyslog:err",
            "-vfile:info", "--no-chdir", f"--log-file={logdir}/ovs-vswitchd.log",
            f"--pidfile={rundir}/ovs-vswitchd.pid", "--detach"] + VARIANTS[variant].get("args", [])
