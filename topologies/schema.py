"""The fabric YAML's schema: the schema itself, and the checks that each
kind of fabric gets exactly the keys it takes. What a kind takes, and its
own checks, are the kind's (topologies/kinds/): the ``fabric:`` section is
made from the registered kinds.

Its fields are checked by the project's validators (toolkit/validators.py:
``check(value, fail)``, `normalise`, each carrying its JSON Schema, from
which topologies/jsonschema.py derives the schema editors read). The error
type and how values are quoted live in toolkit/errors.py, the file reader
and the YAML loader in toolkit/yaml_loader.py; checks of the derived fabric
(sizes, physics, names) in sanity.py. Nothing in this module touches the
system.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Callable

from topologies import hardware, kinds
from topologies.roles import ROLES
from topologies.limits import (EMULATED_RATE_MBIT, IFNAME_MAX, MAX_GPUS,  # noqa: F401
                               MAX_PER_LEAF, MAX_RACK_GPUS, MAX_RATE_MBIT)
from toolkit.errors import FabricError
from toolkit.validators import (OPTIONAL_SECTION, REQUIRED, Section, choice, described, even,
                                flag, host, integer, machines, normalise, number, optional,
                                passed_on, rate, subnet, text)
from policies import all_policies
import networks

MIN_RATE_MBIT = 0.01        # 10 kbit/s: below that HTB's arithmetic stops being a rate
POLICIES = tuple(all_policies())       # the registry's (policies/), in its order


def _network_names() -> str:
    """"infiniband: ..., roce: ..., ...": each technology's one clause."""
    return "; ".join(t.summary for t in networks.all_networks().values())


def _policy_names() -> str:
    """"ecmp, single-path, stp (no controller), ... or adaptive"."""
    named = [name + ("" if p.controller else " (no controller)")
             for name, p in all_policies().items()]
    return ", ".join(named[:-1]) + " or " + named[-1]
DEFAULT_KIND = "leaf-spine"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PREFIX = re.compile(r"[a-z][a-z0-9]{0,9}")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
TUNNELS = ("vxlan", "ssh")


# --- the fabric's schema ------------------------------------------------------------

LINK = {
    "rate_mbit": (described("the rate, both directions, in Mbit/s or with its unit (400G, "
                            f"900GB/s); HTB's when emulated, at most {EMULATED_RATE_MBIT:,} "
                            "Mbit/s there", rate(MIN_RATE_MBIT, MAX_RATE_MBIT)), REQUIRED),
    "queue_packets": (described("egress queue of every interface (pfifo), in packets",
                                integer(1, 100_000)), 100),
    "delay_ms": (described("one-way delay; needs the kernel's sch_netem",
                           number(0, 10_000, "ms")), 0),
    "loss_percent": (described("random loss; needs sch_netem", number(
        0, 100, "%", below="at 100 nothing would arrive")), 0),
}


def _prefix(role: str, example: str) -> Callable:
    return described(f"name prefix of the {role}", text(
        _PREFIX, f"a lowercase name prefix such as '{example}' (a-z, 0-9)"))


def _count(key: str, count: kinds.Count) -> Callable:
    """A count of `fabric:`, described with the kinds that take it."""
    takers = ", ".join(k.name for k in kinds.kinds() if key in k.takes())
    description = f"{count.what} ({takers}){count.note}" if count.named and takers else count.what
    check = even(count.lo, count.hi) if count.even else integer(count.lo, count.hi)
    return described(description, optional(check))


def _fabric_section() -> Section:
    """`fabric:` as the registered kinds make it: the kind, every count a kind
    takes, the MTU."""
    keys = {"kind": (described("the kind of fabric", choice(*kinds.names())), DEFAULT_KIND)}
    keys.update((key, (_count(key, count), None)) for key, count in kinds.counts().items())
    keys["mtu"] = (described("MTU of every interface", integer(1280, 9216)), 1500)
    return Section("what to build: the kind of fabric and its counts", keys)


SCHEMA = {
    "name": (described("names the results folder (default: the file name)", text(
        _NAME, "a name of letters, digits, '.', '_' or '-' (at most 64)")), None),
    "fabric": None,             # the kinds' section: `_fabric_section`
    "server": (Section("what a server holds (default: one GPU, one NIC)", {
        "gpus": (described(f"GPUs per server; each GPU is a rank (above {MAX_GPUS}: a "
                           "rack-scale server.model)", integer(1, MAX_RACK_GPUS)), 1),
        "nics": (described("NICs per server, at most one per GPU", integer(1, MAX_RACK_GPUS)),
                 1),
        "model": (described("the server as sold (hgx-h100, ...): the simulator then prices "
                            "collectives with NCCL's channels, algorithms and protocols "
                            "(docs/simulator.md)", optional(choice(*hardware.SERVERS))), None),
        "interconnect": (described("how a server's GPUs meet: nvswitch (each GPU on the "
                                   "server's NVSwitch) or mesh (a direct link between every "
                                   "pair, AMD's Infinity Fabric; a NIC per GPU); default: the "
                                   "model's, else nvswitch", optional(choice(*hardware.SCALEUP))),
                         None),
        "nvlink_domain": (described("GPUs per NVLink domain, NCCL's node (default: the "
                                    "model's, at most server.gpus): a rack-scale model split "
                                    "into partitions such as NVL8", optional(
                                        integer(1, MAX_RACK_GPUS))), None),
    }), {}),
    "links": (Section("the rate and queue of each class of link", {
        "server_leaf": (Section("server (or NIC) to its leaf", LINK), REQUIRED),
        "leaf_spine": (Section("leaf to spine; fat-tree: edge to aggregation; full mesh: "
                               "the mesh cables", LINK), OPTIONAL_SECTION),
        "spine_core": (Section("fat-tree aggregation to core (default: as leaf_spine)", LINK),
                       OPTIONAL_SECTION),
        "intra_node": (Section("GPU to NVSwitch, or GPU to GPU on a mesh (and to the PCIe "
                               "switch when GPUs share NICs): servers with several GPUs or "
                               "NICs", LINK),
                       OPTIONAL_SECTION)}), REQUIRED),
    "network": (Section("the scale-out network technology (docs/networks.md): what its "
                        "switches and transport cost, how it routes by default, what it does "
                        "when a queue fills", {
        "technology": (described(_network_names(), choice(*networks.NETWORKS)),
                       networks.DEFAULT),
        "switch_latency_us": (described("one switch crossed, port to port, in microseconds "
                                        "(default: the technology's)",
                                        optional(number(0, 100, "us"))), None),
        "pfc": (described("roce: lossless by priority flow control (default true)",
                          optional(flag)), None),
        "ecn": (described("roce, roce-lossy: ECN marking with DCQCN rate control (default "
                          "true)", optional(flag)), None),
        "qps_per_connection": (described("roce, roce-lossy: queue pairs NCCL opens per "
                                         "connection (NCCL_IB_QPS_PER_CONNECTION, default 1): "
                                         "the flows ECMP hashes", optional(integer(1, 16))),
                               None),
        "sharp": (described("infiniband: the switches reduce (SHARP, NCCL's CollNet; default "
                            "false)", optional(flag)), None)}), {}),
    "routing": (Section("how the fabric is routed", {
        "policy": (described(f"{_policy_names()} (docs/routing.md; default: the network "
                             "technology's, ecmp on Ethernet, dmodk on InfiniBand)",
                             optional(choice(*POLICIES))), None),
        "entropy": (described("connections (source ports) a sender spreads each peer's pieces "
                              "over under flowlet and spray", integer(2, 64)), 16),
        "flowlet_gap_ms": (described("flowlet: the idle time, with everything sent "
                                     "acknowledged, after which a sender may change path",
                                     number(0, 10_000, "ms")), 1),
        "adaptive_interval_ms": (described("adaptive: how often the controller reads the "
                                           "switches' flow counters and re-places elephants",
                                           number(50, 10_000, "ms")), 200),
        "bfd_ms": (described("BFD on every link between switches at this interval (0: off): "
                             "a silent failure, frames lost with the carrier up, is then seen "
                             "within about 3 intervals", integer(0, 1000)), 0)}), {}),
    "addressing": (Section("IPv4 networks of the endpoints", {
        "subnet": (described("endpoint k behind leaf l gets <net>.l.k", subnet),
                   "10.0.0.0/16"),
        "nvlink_subnet": (described("the GPUs' NVSwitch addresses, apart from subnet", subnet),
                          "172.31.0.0/16")}), {}),
    "experiment": (described("what run_topology.py replays (checked by the experiment: see "
                             "docs/fabric.md)", passed_on), {}),
    "names": (Section("name prefixes, lowercase letters and digits", {
        name: (_prefix(what, default), default) for name, what, default in (
            *((r.name, r.names, r.name) for r in ROLES.values() if r.names),
            ("server", "servers", "h"))}), {}),
    "cluster": (Section("the machines a cluster run spreads the fabric over (docs/fabric.md)", {
        "machines": (described("ssh destinations, host names or IPv4 addresses", machines),
                     REQUIRED),
        "user": (described("the user ssh logs in as (root, or one with passwordless sudo)",
                           text(_USER, "a user name such as root (a-z, 0-9, '_', '-')")),
                 "root"),
        "tunnel": (described("how links between machines are carried: vxlan, or ssh "
                             "(Tunnel=Ethernet)", choice(*TUNNELS)), "vxlan"),
        "controller": (described("address the controller listens on (default: the one this "
                                 "machine reaches the first machine from)", optional(host)),
                       None),
        "tls": (described("OpenFlow between the machines' switches and the controller over "
                          "TLS, with a CA and certificates made for each run (false: plain "
                          "TCP, for comparison)", flag), True)}), OPTIONAL_SECTION),
}

_built_for = [-1]                 # the registry's version SCHEMA's fabric section is of


def current() -> dict:
    """SCHEMA, its fabric section made anew when a kind was registered since."""
    if _built_for[0] != kinds.REGISTRY.version:
        SCHEMA["fabric"] = (_fabric_section(), REQUIRED)
        _built_for[0] = kinds.REGISTRY.version
    return SCHEMA


current()


def name_from_file(source: str) -> str:
    """A fabric's name when its file gives none: the file's stem, made a
    valid name (it names the results folder and is printed)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source).stem).strip("-._")[:64]
    return stem if _NAME.fullmatch(stem) else "fabric"


def multi_gpu(spec: dict) -> bool:
    """Servers are node switches with GPU hosts behind them."""
    return spec["server"]["gpus"] > 1 or spec["server"]["nics"] > 1


def normalise_fabric(raw: Any, source: str) -> dict:
    """The fabric section by section, kind-specific keys included; the
    network technology's options and default routing."""
    if isinstance(raw, dict) and isinstance(raw.get("network"), str):
        raw = {**raw, "network": {"technology": raw["network"]}}   # `network: infiniband`
    spec = normalise(raw, current(), "", source)
    check_kind(spec, source)
    _check_network(spec, source)
    return spec


def _check_network(spec: dict, source: str) -> None:
    """Each option the technology takes, no other; its routing by default
    (sanity.check_policy: one it can run)."""
    net = spec["network"]
    tech = networks.network(net["technology"])
    for key, value in net.items():
        if key in ("technology", "switch_latency_us") or value is None:
            continue
        if key not in tech.options:
            takers = [t.name for t in networks.all_networks().values() if key in t.options]
            raise FabricError(source, f"network.{key}", (
                f"not an option of {tech.name} ({tech.summary.split(': ', 1)[1]}); "
                f"{' and '.join(takers)} take{'s' if len(takers) == 1 else ''} it"))
    if spec["routing"]["policy"] is None:
        spec["routing"]["policy"] = tech.routing


# --- what each kind takes ---------------------------------------------------------

def check_kind(spec: dict, source: str) -> None:
    """Keys that only some kinds take: each kind gets exactly its own, then
    the kind's own checks (topologies/kinds/)."""
    f, name = spec["fabric"], spec["fabric"]["kind"]
    kind = kinds.kind(name)
    takes = ", ".join(kind.takes())
    for key in kind.required:
        if f[key] is None:
            raise FabricError(source, f"fabric.{key}", f"missing; a {name} fabric needs it "
                                                       f"(it takes {takes})")
    for key, value in f.items():
        if key not in ("kind", "mtu") + kind.takes() and value is not None:
            raise FabricError(source, f"fabric.{key}", f"not used by a {name} fabric "
                                                       f"(it takes {takes})")
    for key in kind.links:
        if spec["links"][key] is None:
            raise FabricError(source, f"links.{key}", f"missing; a {name} fabric needs this "
                                                      "link class")
    _check_link_classes(spec, kind, source)
    kind.check(spec, source)
    _check_servers(spec, source)


def _check_link_classes(spec: dict, kind: kinds.FabricKind, source: str) -> None:
    unused = {c: c not in kind.links + kind.optional_links for c in SCHEMA["links"][0]
              if c not in ("server_leaf", "intra_node")}
    unused["intra_node"] = not multi_gpu(spec)
    for key, idle in unused.items():
        if idle and spec["links"][key] is not None:
            why = ("servers have one GPU and one NIC" if key == "intra_node"
                   else f"a {kind.name} fabric has no such links")
            raise FabricError(source, f"links.{key}", f"not used here: {why}")


def nvlink_domain(srv: dict) -> int:
    """GPUs per NVLink domain (NCCL's node): the file's, else the model's,
    never more than the server's GPUs."""
    if srv.get("nvlink_domain"):
        return srv["nvlink_domain"]
    sold = srv.get("model") and hardware.SERVERS[srv["model"]]
    return min(sold.gpus, srv["gpus"]) if sold else srv["gpus"]


def _check_domain(srv: dict, sold, source: str) -> None:
    domain = srv["nvlink_domain"]
    if domain is None:
        return
    if domain > srv["gpus"] or srv["gpus"] % domain:
        raise FabricError(source, "server.nvlink_domain", (
            f"expected a divisor of server.gpus ({srv['gpus']}): each NVLink domain is a whole "
            f"share of the server, got {domain}"))
    if sold and domain != min(sold.gpus, srv["gpus"]):
        try:
            hardware.partition(sold, domain)
        except ValueError as exc:
            raise FabricError(source, "server.nvlink_domain", str(exc)) from None


def interconnect(srv: dict) -> str:
    """How a server's GPUs meet (`server.interconnect`): the file's, else the
    model's GPUs', else an NVSwitch."""
    sold = srv.get("model") and hardware.SERVERS[srv["model"]]
    return srv.get("interconnect") or (sold.gpu.scaleup if sold else "nvswitch")


def _check_interconnect(srv: dict, sold, source: str) -> None:
    """A mesh as the model has it, a NIC per GPU, not split into domains;
    the file's choice (or the model's) written into the spec."""
    given, way = srv["interconnect"], interconnect(srv)
    if sold and given and given != sold.gpu.scaleup:
        raise FabricError(source, "server.interconnect", (
            f"expected {sold.gpu.scaleup} for a {sold.name} (server.model), whose "
            f"{sold.gpu.name} GPUs {'are fully meshed' if sold.gpu.mesh else 'sit on NVSwitches'}"
            f", got {given}"))
    if way == "mesh" and srv["nics"] != srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected a NIC per GPU ({srv['gpus']}) with server.interconnect mesh: GPUs sharing "
            f"NICs through a PCIe switch are not modelled on a mesh, got {srv['nics']}"))
    if way == "mesh" and nvlink_domain(srv) != srv["gpus"]:
        raise FabricError(source, "server.nvlink_domain", (
            f"expected all {srv['gpus']} GPUs with server.interconnect mesh: a full mesh of links "
            f"has no switches a partition could divide, got {nvlink_domain(srv)}"))
    srv["interconnect"] = way


def _check_servers(spec: dict, source: str) -> None:
    srv = spec["server"]
    if srv["nics"] > srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected at most one NIC per GPU ({srv['gpus']}), got {srv['nics']}"))
    sold = srv["model"] and hardware.SERVERS[srv["model"]]
    if sold and srv["gpus"] > sold.gpus:
        raise FabricError(source, "server.gpus", (
            f"expected at most the {sold.gpus} GPUs of a {sold.name} (server.model), "
            f"got {srv['gpus']}"))
    if not sold and srv["gpus"] > MAX_GPUS:
        racks = ", ".join(n for n, s in hardware.SERVERS.items() if s.gpus > MAX_GPUS)
        raise FabricError(source, "server.gpus", (
            f"expected at most {MAX_GPUS} without a rack-scale server.model ({racks}), whose "
            f"NVLink domain holds them, got {srv['gpus']}"))
    _check_domain(srv, sold, source)
    _check_interconnect(srv, sold, source)
    nets = [ipaddress.IPv4Network(spec["addressing"][k]) for k in ("subnet", "nvlink_subnet")]
    if multi_gpu(spec) and nets[0].overlaps(nets[1]):
        raise FabricError(source, "addressing.nvlink_subnet", (
            f"expected a network apart from addressing.subnet ({nets[0]}), got {nets[1]}"))
    if multi_gpu(spec) and spec["links"]["intra_node"] is None:
        raise FabricError(source, "links.intra_node", (
            "missing; servers with several GPUs need the rate of their NVLink-class "
            "interconnect (much faster than the network)"))
