"""The fabric YAML: what is accepted, what is derived, and one clear sentence
for each way of getting it wrong."""

import copy
from pathlib import Path

import pytest
import yaml

from topologies.fabric import DEFAULT_FABRIC, FabricError, load_fabric, parse_fabric
from runs.experiment import experiment_from

BASE = {
    "name": "t",
    "fabric": {"spines": 2, "leaves": 3, "servers_per_leaf": 2},
    "links": {"server_leaf": {"rate_mbit": 100}, "leaf_spine": {"rate_mbit": 100}},
}


def variant(path=None, value=None, delete=False):
    doc = copy.deepcopy(BASE)
    if path:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        if delete:
            del node[last]
        else:
            node[last] = value
    return yaml.safe_dump(doc)


def test_default_fabric_loads():
    fabric = load_fabric()
    assert fabric.source == str(DEFAULT_FABRIC)
    assert [s.name for s in fabric.switches] == ["leaf1", "leaf2", "spine1", "spine2"]
    assert len(fabric.endpoints) == 4 and fabric.policy == "ecmp"


@pytest.mark.parametrize("path", sorted((Path(__file__).parent.parent / "topologies").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_example_is_valid(path):
    assert load_fabric(path).endpoints


def test_defaults_and_derived_numbering():
    f = parse_fabric(variant("fabric.uplinks_per_spine", 2), "t.yaml")
    assert f.spec["links"]["server_leaf"] == {"rate_mbit": 100, "queue_packets": 100,
                                             "delay_ms": 0, "loss_percent": 0}
    leaf2 = f.switch("leaf2")
    assert leaf2.dpid == 0x102 and f.switch("spine1").dpid == 0x201
    h3 = f.endpoint("h3")
    assert (h3.leaf, h3.port, h3.ip, h3.mac) == ("leaf2", 1, "10.0.2.1", "02:00:00:00:02:01")
    # leaf ports: servers 1..2, then spine1 x2, spine2 x2; spine ports per leaf x2
    assert [(l.a_port, l.b, l.b_port) for l in f.uplinks("leaf2")] == [
        (3, "spine1", 3), (4, "spine1", 4), (5, "spine2", 3), (6, "spine2", 4)]
    assert f.uplinks("leaf2")[0].a_intf == "leaf2-eth3"


def test_names_and_subnet_are_configurable():
    doc = yaml.safe_load(variant())
    doc["names"] = {"spine": "sp", "leaf": "lf", "server": "gpu"}
    doc["addressing"] = {"subnet": "172.16.0.0/12"}
    f = parse_fabric(yaml.safe_dump(doc), "t.yaml")
    assert f.endpoints[0].name == "gpu1" and f.endpoints[0].ip == "172.16.1.1"
    assert f.prefixlen == 12 and f.switches[0].name == "lf1"


def test_experiment_section_takes_sizes_with_units():
    doc = yaml.safe_load(variant())
    doc["experiment"] = {"collective": "allgather", "minbytes": "64K", "maxbytes": "2M",
                         "probe": ["h1", "h6"]}
    exp = experiment_from(parse_fabric(yaml.safe_dump(doc), "t.yaml"))
    assert exp.minbytes == 65536 and exp.maxbytes == 2 * 1024 * 1024
    assert exp.collective == "allgather" and exp.algorithm == "auto"
    assert exp.iters == 5 and exp.probe == ["h1", "h6"]           # defaults where not given


def test_policy_override_keeps_everything_else():
    f = parse_fabric(variant(), "t.yaml")
    g = f.with_policy("single-path")
    assert g.policy == "single-path" and g.links == f.links and f.policy == "ecmp"


BAD = [
    # (what, yaml text, expected message)
    ("not YAML", "fabric: [1, 2\n", "t.yaml: not valid YAML at line 2, column 1"),
    ("empty file", "", "t.yaml: is empty; expected a mapping with keys name, fabric, server, links, "
                       "network, routing, addressing, experiment, names"),
    ("top level is a list", "- 1\n", "t.yaml: expected a mapping with keys"),
    ("duplicate key", "fabric: {}\nfabric: {}\n", "duplicate key 'fabric'"),
    ("unknown top-level key", variant("fabrik", 1), "t.yaml: fabrik: unknown key (did you mean 'fabric'?)"),
    ("typo in fabric", variant("fabric.spins", 2),
     "t.yaml: fabric.spins: unknown key (did you mean 'spines'?); expected one of kind, spines"),
    ("typo in a link", variant("links.leaf_spine.rate", 5),
     "t.yaml: links.leaf_spine.rate: unknown key (did you mean 'rate_mbit'?)"),
    ("missing fabric", variant("fabric", delete=True), "t.yaml: fabric: missing; this key is required"),
    ("missing spines", variant("fabric.spines", delete=True), "t.yaml: fabric.spines: missing"),
    ("missing rate", variant("links.server_leaf.rate_mbit", delete=True),
     "t.yaml: links.server_leaf.rate_mbit: missing; this key is required"),
    ("missing link class", variant("links.leaf_spine", delete=True), "t.yaml: links.leaf_spine: missing"),
    ("spines is text", variant("fabric.spines", "two"),
     "t.yaml: fabric.spines: expected a whole number from 1 to 64, got 'two'"),
    ("spines is a float", variant("fabric.spines", 2.5), "fabric.spines: expected a whole number"),
    ("spines is a bool", variant("fabric.spines", True), "got true"),
    ("zero leaves", variant("fabric.leaves", 0), "fabric.leaves: expected a whole number from 1 to 128, got 0"),
    ("negative servers", variant("fabric.servers_per_leaf", -1), "fabric.servers_per_leaf: expected a whole number"),
    ("zero rate", variant("links.leaf_spine.rate_mbit", 0),
     "t.yaml: links.leaf_spine.rate_mbit: expected a number from 0.01 to 1e+08 (Mbit/s), got 0"),
    ("rate too small for HTB", variant("links.leaf_spine.rate_mbit", 1e-7), "got 1e-07"),
    ("negative rate", variant("links.server_leaf.rate_mbit", -5), "got -5"),
    ("rate is text", variant("links.server_leaf.rate_mbit", "10X"), "(Mbit/s), got '10X'"),
    ("queue zero", variant("links.server_leaf.queue_packets", 0),
     "links.server_leaf.queue_packets: expected a whole number from 1 to 100000, got 0"),
    ("negative delay", variant("links.leaf_spine.delay_ms", -1),
     "links.leaf_spine.delay_ms: expected a number from 0 to 10000 (ms), got -1"),
    ("loss over 100", variant("links.leaf_spine.loss_percent", 150), "loss_percent: expected a number from 0 to below 100 (%; at 100 nothing would arrive)"),
    ("unknown policy", variant("routing.policy", "ospf"),
     "t.yaml: routing.policy: expected one of ecmp, single-path, stp, flowlet, spray, adaptive, "
     "dmodk, got 'ospf'"),
    ("unknown technology", "network: ethernet\n" + variant("name", "t"),
     "t.yaml: network.technology: expected one of infiniband, roce, roce-lossy, spectrum-x, "
     "tcp, efa, tcpxo, got 'ethernet'"),
    ("PFC on a lossy preset", "network: {technology: roce-lossy, pfc: true}\n" + variant("name", "t"),
     "t.yaml: network.pfc: not an option of roce-lossy"),
    ("SHARP on Ethernet", "network: {technology: roce, sharp: true}\n" + variant("name", "t"),
     "t.yaml: network.sharp: not an option of roce (RoCEv2, lossless by PFC with ECN/DCQCN, "
     "ECMP over queue pairs); infiniband takes it"),
    ("a routing InfiniBand does not run", "network: infiniband\n" + variant("routing.policy", "stp"),
     "t.yaml: routing.policy: stp is not a routing InfiniBand fabrics run: they run dmodk"),
    ("missing uplink class", variant("links.leaf_spine", delete=True),
     "t.yaml: links.leaf_spine: missing; a leaf-spine fabric needs this link class"),
    ("key of another kind", variant("fabric.k", 4),
     "t.yaml: fabric.k: not used by a leaf-spine fabric (it takes spines, leaves, "
     "servers_per_leaf, uplinks_per_spine)"),
    ("odd fat-tree k", yaml.safe_dump({**BASE, "fabric": {"kind": "fat-tree", "k": 5}}),
     "t.yaml: fabric.k: expected an even whole number from 2 to 16, got 5"),
    ("fat-tree without k", yaml.safe_dump({**BASE, "fabric": {"kind": "fat-tree"}}),
     "t.yaml: fabric.k: missing; a fat-tree fabric needs it (it takes k, servers_per_leaf)"),
    ("mesh too big", yaml.safe_dump({**BASE, "fabric": {"kind": "full-mesh", "servers": 20}}),
     "t.yaml: fabric.servers: expected at most 16 servers in a full mesh"),
    ("more NICs than GPUs", variant("server", {"gpus": 2, "nics": 4}),
     "t.yaml: server.nics: expected at most one NIC per GPU (2), got 4"),
    ("GPUs without NVLink", variant("server", {"gpus": 8, "nics": 8}),
     "t.yaml: links.intra_node: missing; servers with several GPUs need the rate"),
    ("NVLink without GPUs", variant("links.intra_node", {"rate_mbit": 10}),
     "t.yaml: links.intra_node: not used here: servers have one GPU and one NIC"),
    ("core links outside a fat-tree", variant("links.spine_core", {"rate_mbit": 10}),
     "t.yaml: links.spine_core: not used here: a leaf-spine fabric has no such links"),
    ("stp through servers", yaml.safe_dump({**BASE, "server": {"gpus": 2, "nics": 2},
                                            "routing": {"policy": "stp"}, "links": {
        **BASE["links"], "intra_node": {"rate_mbit": 100}}}),
     "t.yaml: routing.policy: stp is not available with servers of several GPUs or NICs"),
    ("overlapping NVLink subnet", yaml.safe_dump({**BASE, "server": {"gpus": 2, "nics": 1},
                                                  "addressing": {"nvlink_subnet": "10.0.0.0/16"},
                                                  "links": {**BASE["links"],
                                                            "intra_node": {"rate_mbit": 100}}}),
     "t.yaml: addressing.nvlink_subnet: expected a network apart from addressing.subnet"),
    ("unknown kind", variant("fabric.kind", "torus"), "fabric.kind: expected one of leaf-spine, rail-optimized, fat-tree, single-switch, full-mesh, got 'torus'"),
    ("links not a mapping", variant("links", [1]), "t.yaml: links: expected a mapping with keys server_leaf, leaf_spine, spine_core, intra_node, got a list [1]"),
    ("bad subnet", variant("addressing.subnet", "10.0.0.300/16"), "addressing.subnet: expected an IPv4 network"),
    ("subnet too small", variant("addressing.subnet", "10.0.0.0/24"), "got '10.0.0.0/24'"),
    ("subnet with host bits", variant("addressing.subnet", "10.0.0.1/16"), "addressing.subnet"),
    ("subnet 0/8", variant("addressing.subnet", "0.0.0.0/8"), "got '0.0.0.0/8'"),
    ("reserved subnet", variant("addressing.subnet", "240.0.0.0/8"), "got '240.0.0.0/8'"),
    ("a list as a key", "? [a, b]\n: 1\n", "t.yaml: not valid YAML at line 1, column 3: a key must be a plain name, not a list"),
    ("shell-unsafe prefix", variant("names.server", "h;rm -rf /"),
     "t.yaml: names.server: expected a lowercase name prefix such as 'h' (a-z, 0-9), got 'h;rm -rf /'"),
    ("prefix with a dash", variant("names.leaf", "leaf-"), "names.leaf: expected a lowercase name prefix"),
    ("prefix too long for an interface name", variant("names.spine", "spineswitch"),
     "names.spine: expected a lowercase name prefix"),
    ("interface name over 15 characters", variant("names.leaf", "leafswitch"),
     "t.yaml: names.leaf: expected a shorter prefix: it makes interface names like "
     "'leafswitch3-eth4' (16 characters) and Linux allows 15"),
    ("colliding names", variant("names.spine", "leaf"), "would both be called 'leaf1'"),
    ("unsafe fabric name", variant("name", "a b"), "t.yaml: name: expected a name of letters"),
    ("unknown collective", variant("experiment.collective", "allreduse"),
     "t.yaml: experiment.collective: expected one of allreduce, allgather"),
    ("size without a unit", variant("experiment.maxbytes", "12 parsecs"),
     "t.yaml: experiment.maxbytes: expected a size in bytes from 4 to 17179869184 (a number, "
     "or with K, M or G), got '12 parsecs'"),
    ("probe of a missing server", variant("experiment.probe", ["h1", "h99"]),
     "t.yaml: experiment.probe: expected servers of this fabric, but there is no 'h99'"),
    ("probe not a pair", variant("experiment.probe", "h1"), "experiment.probe: expected two server names"),
    ("too large for this host", variant("fabric.leaves", 100).replace("servers_per_leaf: 2", "servers_per_leaf: 64"),
     "t.yaml: fabric: too large for this host: 6,400 servers; at most 512 servers can be emulated"),
]


@pytest.mark.parametrize("what,text,expected", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_key_and_expectation(what, text, expected):
    with pytest.raises(FabricError) as info:
        experiment_from(parse_fabric(text, "t.yaml"))       # all a run reads of the file
    message = str(info.value)
    assert expected in message
    assert message.startswith("t.yaml") and "\n" not in message


def test_unreadable_file(tmp_path):
    with pytest.raises(FabricError, match=r"nope\.yaml: cannot read the fabric file: No such file"):
        load_fabric(tmp_path / "nope.yaml")


# --- rack-scale servers: an NVLink domain of up to 72 GPUs, and its partitions ------------------

RACK = {"model": "gb200-nvl72", "gpus": 72, "nics": 72}
NVLINK = {"rate_mbit": 7200000}


def rack_variant(server, nvlink=True):
    doc = yaml.safe_load(variant("server", server))
    if nvlink:
        doc["links"]["intra_node"] = NVLINK
    doc["links"]["leaf_spine"] = {"rate_mbit": 100 * 72}      # a rack's NICs, not oversubscribed
    return yaml.safe_dump(doc)


def test_a_rack_scale_server_holds_72_gpus_and_splits_into_nvlink_partitions():
    whole = parse_fabric(rack_variant(RACK), "t.yaml", emulate=False)
    assert whole.nvlink_domain == 72 and whole.server_model.gpus == 72
    assert len(whole.endpoints) == 6 * 72
    nvl8 = parse_fabric(rack_variant({**RACK, "nvlink_domain": 8}), "t.yaml", emulate=False)
    hw = nvl8.server_model
    assert nvl8.nvlink_domain == 8 and (hw.name, hw.gpus, hw.nics) == ("gb200-nvl72/nvl8", 8, 8)
    # an 8-GPU model's domain stays its server, as before
    h100 = parse_fabric(rack_variant({"model": "hgx-h100", "gpus": 8, "nics": 8}), "t.yaml",
                        emulate=False)
    assert h100.nvlink_domain == 8 and h100.server_model.name == "hgx-h100"


@pytest.mark.parametrize("server, emulate, message", [
    ({"gpus": 72, "nics": 72}, False,
     "t.yaml: server.gpus: expected at most 16 without a rack-scale server.model (gb200-nvl72, "
     "gb300-nvl72), whose NVLink domain holds them, got 72"),
    ({"model": "hgx-h100", "gpus": 72, "nics": 72}, False,
     "t.yaml: server.gpus: expected at most the 8 GPUs of a hgx-h100 (server.model), got 72"),
    ({**RACK, "nvlink_domain": 10}, False,
     "t.yaml: server.nvlink_domain: expected a divisor of server.gpus (72): each NVLink domain "
     "is a whole share of the server, got 10"),
    ({"model": "mi300x", "gpus": 8, "nics": 8, "nvlink_domain": 4}, False,
     "t.yaml: server.nvlink_domain: a mi300x's 8 GPUs are one full mesh of links, not switches "
     "a partition could divide; its NVLink domain is all of them"),
    ({**RACK, "gpus": 73}, False,
     "t.yaml: server.gpus: expected a whole number from 1 to 72, got 73"),
    (RACK, True,
     "t.yaml: server.gpus: expected at most 16 GPUs per server to emulate (an NVSwitch node with "
     "a port per GPU); --engine sim takes up to 72, got 72"),
])
def test_a_server_no_nvlink_domain_can_hold_is_refused_in_one_sentence(server, emulate, message):
    with pytest.raises(FabricError) as err:
        parse_fabric(rack_variant(server), "t.yaml", emulate=emulate)
    assert str(err.value) == message
    assert "\n" not in str(err.value)
