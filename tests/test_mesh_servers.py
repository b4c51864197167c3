"""AMD Instinct servers' full mesh (server.interconnect: mesh): the fabric model's
links and addresses, the refusals, the lab's addressing commands, and the
flow simulator's paths inside a mesh server."""

import pytest

from controller.routes import compute_plan
from lab.mininet_build import endpoint_intfs, mesh_commands, shaping_plan
from topologies.fabric import FabricError, load_fabric, parse_fabric, spec_counts
from topologies.hardware import SERVERS, server
from topologies.limits import IFNAME_MAX
from traffic.engines import Job, make_engine
from runs.lab_parts import wire_split
from sim.network import Network
from traffic.measure.monitor import Monitor
from harness import TOPOLOGIES

AMD_MESH = TOPOLOGIES / "amd-mesh.yaml"


def fabric_text(server_lines: str) -> str:
    inside = "".join(f"  {line}\n" for line in server_lines.splitlines())
    return ("fabric: {kind: leaf-spine, spines: 1, leaves: 2, servers_per_leaf: 1}\n"
            f"server:\n{inside}"
            "links:\n"
            "  server_leaf: {rate_mbit: 10}\n"
            "  leaf_spine: {rate_mbit: 20}\n"
            "  intra_node: {rate_mbit: 100}\n")


def mesh(server_lines: str = "gpus: 4\nnics: 4\ninterconnect: mesh", **kw):
    return parse_fabric(fabric_text(server_lines), "t.yaml", **kw)


def test_the_example_is_two_meshes_of_four_gpus_and_no_nvswitch():
    fabric = load_fabric(AMD_MESH)
    assert fabric.interconnect == "mesh"                  # from server.model: mi300x
    assert not [s for s in fabric.switches if s.role == "nvswitch"]
    inside = [l for l in fabric.links if l.kind == "intra_node"]
    assert len(inside) == 2 * 4 * 3 // 2
    by_name = {h.name: h for h in fabric.endpoints}
    pairs = set()
    for l in inside:
        a, b = by_name[l.a], by_name[l.b]
        assert a.server == b.server and a.gpu < b.gpu
        assert (l.a_intf, l.b_intf) == (a.mesh_intf(b.gpu), b.mesh_intf(a.gpu))
        pairs.add((a.name, b.name))
    assert len(pairs) == len(inside)                  # one link a pair, every pair
    assert fabric.endpoint("h2g3").mesh_peers == (1, 2, 4)
    assert spec_counts(fabric.spec)["links"] == len(fabric.links) == 8 + 12 + 4
    assert spec_counts(fabric.spec)["switches"] == len(fabric.switches) == 4
    assert "GPUs fully meshed" in fabric.shape()


def test_each_gpu_keeps_one_nvlink_address_and_each_link_end_its_own_mac():
    fabric = load_fabric(AMD_MESH)
    gpus = fabric.endpoints
    assert len({h.nv_ip for h in gpus}) == len(gpus) and all(h.nv_ip for h in gpus)
    macs = [h.mesh_mac(p) for h in gpus for p in h.mesh_peers] + [h.mac for h in gpus]
    assert len(set(macs)) == len(macs)
    assert fabric.endpoint("h1g2").mesh_mac(4) == "02:00:04:01:00:02"
    a, b, c = (fabric.endpoint(n) for n in ("h1g1", "h1g2", "h2g1"))
    assert b.address_from(a) == b.nv_ip and c.address_from(a) == c.ip


def test_the_lab_addresses_each_mesh_link_point_to_point_with_its_peer():
    fabric = load_fabric(AMD_MESH)
    ep, peer = fabric.endpoint("h1g3"), fabric.endpoint("h1g1")
    assert endpoint_intfs(ep) == ["h1g3-eth0", "h1g3-eth1", "h1g3-eth2", "h1g3-eth4"]
    lines = mesh_commands(fabric, ep)
    assert f"addr add {ep.nv_ip}/32 peer {peer.nv_ip}/32 dev h1g3-eth1" in lines
    assert (f"neigh replace {peer.nv_ip} lladdr {peer.mesh_mac(3)} dev h1g3-eth1 "
            "nud permanent") in lines
    assert len(lines) == 2 * 3
    plan = shaping_plan(fabric)                       # both ends shaped, as any intra_node link
    assert any("rate 100mbit" in c for c in plan["h1g3-eth1"])
    assert any("rate 100mbit" in c for c in plan["h1g1-eth3"])


def test_the_monitor_and_the_wire_split_count_both_ends_of_a_mesh_link():
    fabric = load_fabric(AMD_MESH)
    mon = Monitor(fabric)
    assert mon.link_of["h1g1-eth2"] == "h1g1->h1g2" and mon.link_of["h1g2-eth1"] == "h1g2->h1g1"
    assert mon.rate["h1g1-eth2"] == 100 and "h1g1-eth0" not in mon.rate   # the leaf counts a NIC
    links = {"h1g1-eth2": {"tx_bytes": 100}, "h1g2-eth1": {"tx_bytes": 10},
             "leaf1-eth1": {"tx_bytes": 7}}
    assert wire_split(fabric, links) == {"intra_node": 110, "network_to_servers": 7}


def test_the_controller_sees_only_the_network():
    fabric = load_fabric(AMD_MESH)
    plans = compute_plan(fabric)
    assert set(plans) == {"leaf1", "leaf2", "spine1", "spine2"}
    assert not any(h.nv_ip in p.routes for p in plans.values() for h in fabric.endpoints)


@pytest.mark.parametrize("lines, gpus", [("model: mi300x\ngpus: 8\nnics: 8", 8),
                                         ("model: mi355x\ngpus: 4\nnics: 4", 4),
                                         ("gpus: 8\nnics: 8\ninterconnect: mesh", 8)])
def test_a_mesh_is_said_or_implied_by_the_model(lines, gpus):
    fabric = mesh(lines, emulate=False)
    assert fabric.interconnect == "mesh" and fabric.spec["server"]["interconnect"] == "mesh"
    assert sum(l.kind == "intra_node" for l in fabric.links) == 2 * gpus * (gpus - 1) // 2
    names = [i for l in fabric.links for i in (l.a_intf, l.b_intf)]
    assert max(map(len, names)) <= IFNAME_MAX


def test_without_a_model_or_a_word_servers_keep_their_nvswitch():
    fabric = mesh("gpus: 4\nnics: 4")
    assert fabric.interconnect == "nvswitch"
    assert sum(s.role == "nvswitch" for s in fabric.switches) == 2
    assert all(h.mesh == 0 for h in fabric.endpoints)


@pytest.mark.parametrize("lines, message", [
    ("model: mi300x\ngpus: 8\nnics: 8\ninterconnect: nvswitch",
     "t.yaml: server.interconnect: expected mesh for a mi300x (server.model), whose MI300X GPUs "
     "are fully meshed, got nvswitch"),
    ("model: hgx-h100\ngpus: 8\nnics: 8\ninterconnect: mesh",
     "t.yaml: server.interconnect: expected nvswitch for a hgx-h100 (server.model), whose H100 "
     "GPUs sit on NVSwitches, got mesh"),
    ("gpus: 4\nnics: 1\ninterconnect: mesh",
     "t.yaml: server.nics: expected a NIC per GPU (4) with server.interconnect mesh: GPUs "
     "sharing NICs through a PCIe switch are not modelled on a mesh, got 1"),
    ("gpus: 4\nnics: 4\ninterconnect: mesh\nnvlink_domain: 2",
     "t.yaml: server.nvlink_domain: expected all 4 GPUs with server.interconnect mesh: a full "
     "mesh of links has no switches a partition could divide, got 2"),
])
def test_contradictions_are_refused_in_one_sentence(lines, message):
    with pytest.raises(FabricError) as err:
        mesh(lines, emulate=False)
    assert str(err.value) == message


def test_an_unknown_interconnect_is_refused_by_name():
    with pytest.raises(FabricError) as err:
        mesh("gpus: 4\nnics: 4\ninterconnect: torus")
    assert str(err.value).startswith("t.yaml: server.interconnect: ")
    assert "mesh" in str(err.value) and "nvswitch" in str(err.value)


def test_the_mi355x_is_a_mesh_of_eight_run_by_rccl():
    mi355x = server("mi355x")
    assert mi355x.gpu.mesh and mi355x.gpu.rccl and mi355x.gpus == mi355x.nics == 8
    assert mi355x.gpu.memory_gbytes == 288 and mi355x.gpu.hbm_tbytes == 8.0
    assert mi355x.gpu.bf16_tflops > SERVERS["mi325x"].gpu.bf16_tflops


def test_the_simulator_reaches_a_peer_of_the_server_by_the_link_to_it():
    fabric = load_fabric(AMD_MESH)
    net = Network(fabric)
    assert [l.intf for l in net.path("h1g2", "h1g4")] == ["h1g2-eth4"]
    assert net.even_split("h1g4", "h1g1") == {"h1g4-eth1": 1.0}
    assert net.path("h1g1", "h2g1")[0].intf == "h1g1-eth0"        # the network: its NIC


def test_a_ring_inside_a_mesh_server_crosses_only_the_direct_links():
    fabric = load_fabric(AMD_MESH)
    ranks = ["h1g1", "h1g2", "h1g3", "h1g4"]
    engine = make_engine("sim", fabric, ranks)
    engine.prepare(Job("allreduce", "ring", count=64 * 1024 // 4, piece_bytes=8192))
    out = engine.iterate(0, timeout=60)
    hops = {"h1g1-eth2", "h1g2-eth3", "h1g3-eth4", "h1g4-eth1"}      # g -> g+1, 4 -> 1
    assert set(out["link_bytes"]) == hops
    each = 2 * 3 * 64 * 1024 / 4                                      # 2 (n-1)/n of the buffer
    assert all(each <= v < each * 1.01 for v in out["link_bytes"].values())
    assert out["seconds"] > 0
