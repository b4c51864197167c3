"""What each kind of fabric takes, checked on the normalised spec: the keys
of `fabric:` a kind uses (schema.KIND_KEYS), the link classes, the servers."""

from __future__ import annotations

import ipaddress

from topologies.schema import KIND_KEYS, MAX_MESH, FabricError, multi_gpu


def check_kind(spec: dict, source: str) -> None:
    """Keys that only some kinds take: each kind gets exactly its own."""
    f, kind = spec["fabric"], spec["fabric"]["kind"]
    required, optional_, links = KIND_KEYS[kind]
    takes = ", ".join(required + optional_)
    for key in required:
        if f[key] is None:
            raise FabricError(source, f"fabric.{key}", f"missing; a {kind} fabric needs it "
                                                       f"(it takes {takes})")
    for key, value in f.items():
        if key not in ("kind", "mtu") + required + optional_ and value is not None:
            raise FabricError(source, f"fabric.{key}", f"not used by a {kind} fabric "
                                                       f"(it takes {takes})")
    for key in links:
        if spec["links"][key] is None:
            raise FabricError(source, f"links.{key}", f"missing; a {kind} fabric needs this "
                                                      "link class")
    _check_link_classes(spec, kind, links, source)
    _check_servers(spec, source)


def _check_link_classes(spec: dict, kind: str, links: tuple, source: str) -> None:
    unused = {"leaf_spine": not links, "spine_core": kind != "fat-tree",
              "intra_node": not multi_gpu(spec)}
    for key, idle in unused.items():
        if idle and spec["links"][key] is not None:
            why = ("servers have one GPU and one NIC" if key == "intra_node"
                   else f"a {kind} fabric has no such links")
            raise FabricError(source, f"links.{key}", f"not used here: {why}")
    f = spec["fabric"]
    if kind == "full-mesh" and f["servers"] > MAX_MESH:
        raise FabricError(source, "fabric.servers", (
            f"expected at most {MAX_MESH} servers in a full mesh (it needs n(n-1)/2 links: "
            f"{f['servers'] * (f['servers'] - 1) // 2} for {f['servers']})"))


def _check_servers(spec: dict, source: str) -> None:
    srv = spec["server"]
    if srv["nics"] > srv["gpus"]:
        raise FabricError(source, "server.nics", (
            f"expected at most one NIC per GPU ({srv['gpus']}), got {srv['nics']}"))
    nets = [ipaddress.IPv4Network(spec["addressing"][k]) for k in ("subnet", "nvlink_subnet")]
    if multi_gpu(spec) and nets[0].overlaps(nets[1]):
        raise FabricError(source, "addressing.nvlink_subnet", (
            f"expected a network apart from addressing.subnet ({nets[0]}), got {nets[1]}"))
    if multi_gpu(spec) and spec["links"]["intra_node"] is None:
        raise FabricError(source, "links.intra_node", (
            "missing; servers with several GPUs need the rate of their NVLink-class "
            "interconnect (much faster than the network)"))
