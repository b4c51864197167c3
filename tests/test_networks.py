"""The network technologies (networks/): each a registered class with its
figures and their sources; a fabric file's `network:` and `--network`; what
each sets everywhere a collective is priced: the routing by default, the
latency of every step (switches, links, the transport) and a NIC's
bandwidth; routing priced the same in the NCCL model and the replay."""

import json
import re

import pytest

import networks
import planner as P
from harness import REPO
from harness.commands import python
from harness.fabrics import leaf_spine
from networks import network
from policies import policy
from controller.routes import compute_plan
from runs.experiment import Experiment
from runs.simulated import nccl_cluster_on, simulate_experiment
from sim import nccl
from sim.clos import ClosNetwork, ClosShape, clos_routing
from sim.fairness import max_min_rates, weighted_max_min_rates
from sim.nccl import rails
from sim.network import Network
from topologies.fabric import parse_fabric
from topologies.hardware import SERVERS

NUMBERS = ("switch_latency_us", "message_us", "efficiency", "nic_gbytes_cap")


def test_every_technology_is_registered_once_with_its_figures_sourced():
    assert networks.NETWORKS == ("infiniband", "roce", "roce-lossy", "spectrum-x", "tcp", "efa",
                                 "tcpxo")
    base = networks.Technology
    for name, tech in networks.all_networks().items():
        assert tech.name == name and tech.title and tech.summary.startswith(name + ":")
        assert tech.lossless in ("credits", "pfc", "none") and tech.congestion_control
        assert tech.runs(tech.routing)
        for key in NUMBERS + ("routing",):
            if getattr(tech, key) != getattr(base, key):
                assert key in tech.sources and len(tech.sources[key]) > 20, (name, key)
    assert network("infiniband").routing == "dmodk" and network("roce").routing == "ecmp"
    assert network(networks.DEFAULT) is network("roce")


def test_an_unknown_technology_is_one_sentence_naming_those_there_are():
    with pytest.raises(ValueError, match=r"^no network technology called 'ethernet'; there are: "
                                         r"infiniband, roce, .*tcpxo$"):
        network("ethernet")


def test_docs_list_every_technology_with_its_figures():
    text = (REPO / "docs" / "networks.md").read_text()
    for name, tech in networks.all_networks().items():
        row = re.search(rf"^\| `{re.escape(name)}` \|.*$", text, re.M)
        assert row, name
        cells = row.group(0)
        assert f"{tech.switch_latency_us:g} us" in cells and f"{tech.message_us:g} us" in cells
        assert tech.routing in cells


# --- the fabric file and the flags --------------------------------------------------------

FABRIC = """
fabric: {spines: 2, leaves: 2, servers_per_leaf: 2}
links: {server_leaf: {rate_mbit: 50}, leaf_spine: {rate_mbit: 50}}
"""


def test_a_technology_routes_by_its_own_policy_unless_the_file_names_one():
    assert parse_fabric(FABRIC, "t.yaml").policy == "ecmp"
    ib = parse_fabric("network: infiniband\n" + FABRIC, "t.yaml")
    assert ib.policy == "dmodk" and ib.network.name == "infiniband"
    assert ib.switch_latency_us == pytest.approx(0.13)
    spray = parse_fabric("network: infiniband\nrouting: {policy: spray}\n" + FABRIC, "t.yaml")
    assert spray.policy == "spray"
    asked = parse_fabric("network: {technology: roce, switch_latency_us: 0.35, "
                         "qps_per_connection: 4}\n" + FABRIC, "t.yaml")
    assert asked.switch_latency_us == 0.35
    assert asked.network_settings == {"switch_latency_us": 0.35, "qps_per_connection": 4}


def test_with_network_drops_the_old_options_and_takes_the_new_routing():
    roce = parse_fabric("network: {technology: roce, pfc: false}\n" + FABRIC, "t.yaml")
    efa = roce.with_network("efa")
    assert efa.network.name == "efa" and efa.policy == "spray" and efa.network_settings == {}


def test_the_run_flag_overrides_the_file_and_refuses_what_the_technology_cannot_route(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text(FABRIC)
    ok = python("run_topology.py", str(path), "--check", "--network", "infiniband")
    assert ok.returncode == 0, ok.stderr
    bad = python("run_topology.py", str(path), "--check", "--network", "efa", "--policy", "ecmp")
    assert bad.returncode == 2
    assert bad.stderr == (f"error: {path}: routing.policy: ecmp is not a routing AWS EFA (SRD) "
                          "fabrics run: they run spray (default spray)\n")


# --- D-mod-K: InfiniBand's static routing ------------------------------------------------

def test_dmodk_sends_each_destination_behind_a_leaf_up_its_own_uplink():
    fabric = leaf_spine(4, 2, 4, policy="dmodk")
    plan = compute_plan(fabric)
    ups = [l.a_port for l in fabric.uplinks("leaf1")]
    behind = [h for h in fabric.endpoints if h.leaf == "leaf2"]
    chosen = [plan["leaf1"].routes[h.ip] for h in behind]
    assert all(kind == "output" for kind, _ in chosen)
    assert sorted(port for _, port in chosen) == sorted(ups)        # one each, none shared
    assert not plan["leaf1"].groups


def test_dmodk_shares_parallel_links_as_it_shares_single_ones():
    """Two links from each leaf to each spine: a shift permutation across the
    leaves (a ring step) crosses every link once, up and down; counting a
    leaf's parallel links as choices of their own sent every flow a spine
    sends into a leaf down the same one of its two links."""
    fabric = leaf_spine(2, 4, 4, parallel=2, policy="dmodk")
    net = Network(fabric)
    hosts = fabric.endpoints
    for shift in (4, 8, 12):
        load = {}
        for i, a in enumerate(hosts):
            for link in net.path(a.name, hosts[(i + shift) % len(hosts)].name):
                load[link.intf] = load.get(link.intf, 0) + 1
        spine_down = [i for i in load if i.startswith("spine")]
        assert max(load.values()) == 1, (shift, load)
        assert len(spine_down) == 16                      # all 2 x 2 x 4 links down used


# --- the flow model: an even split, and bandwidth apart from latency ---------------------

def test_weighted_max_min_is_max_min_with_shares_of_one_and_splits_a_flow_over_paths():
    flows = {"a": ("l1", "l2"), "b": ("l1",), "c": ("l2", "l3")}
    cap = {"l1": 10.0, "l2": 4.0, "l3": 1.0}
    plain = max_min_rates(flows, cap)
    assert weighted_max_min_rates({f: {l: 1.0 for l in p} for f, p in flows.items()}, cap) == \
        pytest.approx(plain)
    # a flow half on each of two links of 1: its rate 2, each link full
    assert weighted_max_min_rates({"s": {"x": 0.5, "y": 0.5}}, {"x": 1.0, "y": 1.0}) == \
        pytest.approx({"s": 2.0})


def test_spread_splits_a_flow_evenly_over_every_equal_cost_path():
    net = Network(leaf_spine(4, 2, 2, policy="spray"))
    share = net.even_split("h1", "h3")
    ups = {f"leaf1-eth{l.a_port}" for l in net.fabric.uplinks("leaf1")}
    assert {i: share[i] for i in ups} == pytest.approx({i: 0.25 for i in ups})
    # the server link, the uplinks a quarter each, the spines down, the far server link
    assert share["h1-eth0"] == 1.0 and sum(share.values()) == pytest.approx(4.0)


def test_a_shares_bandwidth_is_apart_from_the_links_latency():
    # the same 1:1 rail ring, with and without 1 us of delay on every link: the same share
    fast, slow = (parse_fabric(f"""
network: infiniband
fabric: {{kind: rail-optimized, units: 2, servers_per_unit: 4, spines: 2}}
server: {{gpus: 2, nics: 2, model: hgx-h100}}
links:
  server_leaf: {{rate_mbit: 400G, delay_ms: {d}}}
  leaf_spine: {{rate_mbit: 400G, delay_ms: {d}}}
  intra_node: {{rate_mbit: 3600G}}
""", "r.yaml", emulate=False) for d in (0, 0.001))
    c = [nccl_cluster_on(f, f.server_model, [h.name for h in f.endpoints], 2) for f in (fast, slow)]
    assert c[0].fabric_share == c[1].fabric_share == pytest.approx(1.0)
    # latency as latency: a step between servers pays the links it crosses (2 on a rail leaf,
    # 4 across the spines for 1 hop in 4), each 1 us
    assert c[1].extra_us - c[0].extra_us == pytest.approx((3 * 2 + 4) / 4)
    small = [nccl.predict(x, "allreduce", 8).chosen.time_us for x in c]
    hops = 2 * 3                                     # a tree over 8 servers: 2 x log2(8) steps
    assert small[1] - small[0] == pytest.approx(hops * 2.5, rel=1e-9)


# --- routing priced the same: the NCCL model's share and the replay's order ----------------

LEAF_SPINE = """
fabric: {{spines: 4, leaves: 4, servers_per_leaf: 2, mtu: 9000}}
server: {{gpus: 4, nics: 4, model: hgx-h100}}
links:
  server_leaf: {{rate_mbit: 400G}}
  leaf_spine: {{rate_mbit: 400G}}
  intra_node: {{rate_mbit: 3600G}}
routing: {{policy: {policy}}}
"""
ORDER = ("single-path", "ecmp", "spray")        # worst to best on a rail ring across leaves


def share_of(policy_name):
    f = parse_fabric(LEAF_SPINE.format(policy=policy_name), "ls.yaml", emulate=False)
    return nccl_cluster_on(f, f.server_model, [h.name for h in f.endpoints], 4).fabric_share


def test_the_nccl_model_ranks_the_policies_as_they_route():
    shares = {p: share_of(p) for p in ORDER + ("adaptive", "dmodk")}
    assert shares["single-path"] < shares["ecmp"] < shares["spray"] == pytest.approx(1.0)
    assert shares["adaptive"] == pytest.approx(1.0) and shares["dmodk"] == pytest.approx(1.0)


def test_the_replay_ranks_them_in_the_same_order():
    times = {}
    for p in ORDER:
        f = parse_fabric(LEAF_SPINE.format(policy=p), "ls.yaml", emulate=False)
        exp = Experiment(collective="allreduce", algorithm="rail-ring", minbytes=16 << 20,
                         maxbytes=16 << 20, iters=1, warmup=0)
        times[p] = simulate_experiment(f, exp).runs[0]["time_s"]
    assert times["single-path"] > times["ecmp"] > times["spray"]


@pytest.mark.parametrize("routing", ["hash", "dmodk", "single", "split"])
def test_every_clos_routing_keeps_the_flow_on_shortest_paths(routing):
    shape = ClosShape(servers=64, gpus=8, nics=8, down=32, up=16, tiers=3, radix=32,
                      routing=routing)
    net = ClosNetwork(shape)
    for src, dst in ((0, 8 * 40 + 3), (5, 8 * 63 + 5), (1, 9)):
        assert len(net.path(src, dst)) in (2, 4, 6)
        assert set(net.even_split(src, dst)) >= {("nic", "up", src // 8, src % 8)}
    assert clos_routing(policy("spray")) == "split" and clos_routing(policy("dmodk")) == "dmodk"


def test_the_clos_routings_rank_as_the_fabric_files_do():
    share = {r: rails.share(ClosShape(servers=128, gpus=8, nics=8, down=32, up=32, radix=64,
                                      routing=r), 2, 5) for r in ("hash", "dmodk", "single", "split")}
    assert share["single"] == pytest.approx(0.125)
    assert share["single"] < share["hash"] < share["dmodk"] == share["split"] == pytest.approx(1)


# --- one GPU a server, with a model: the crash --------------------------------------------

@pytest.mark.parametrize("model", sorted(SERVERS))
def test_one_gpu_a_server_with_each_model_prices_in_the_simulator(model):
    f = parse_fabric(f"""
fabric: {{spines: 2, leaves: 2, servers_per_leaf: 2}}
server: {{model: {model}}}
links: {{server_leaf: {{rate_mbit: 400G}}, leaf_spine: {{rate_mbit: 400G}}}}
""", "one.yaml", emulate=False)
    c = nccl_cluster_on(f, f.server_model, [h.name for h in f.endpoints], 1)
    assert 0 < c.fabric_share <= 1
    assert nccl.predict(c, "allreduce", 1 << 20).chosen.time_us > 0


@pytest.mark.parametrize("model", sorted(SERVERS))
def test_one_gpu_a_server_with_each_model_prices_in_the_planner(model, capsys):
    assert P.main(["--gpus", "2", "--gpus-per-server", "1", "--server", model, "--simulate",
                   "--json", "--sizes", "1M"]) == 0
    rows = json.loads(capsys.readouterr().out)["nccl"]["rows"]
    assert rows and all(r["seconds"] > 0 and 0 < r["fabric_share"] <= 1 for r in rows)


# --- the planner: one technology, or several side by side ---------------------------------

def test_the_planner_prices_each_technology_side_by_side(capsys):
    assert P.main(["--gpus", "1024", "--simulate", "--sizes", "8,1G", "--json",
                   "--network", "infiniband,roce,spectrum-x,tcp"]) == 0
    data = json.loads(capsys.readouterr().out)
    side = data["networks"]
    assert side["networks"] == ["infiniband", "roce", "spectrum-x", "tcp"]
    server_leaf = [r for r in side["rows"] if r["wiring"] == "server" and r["design"] == "clos-2"]
    by = {r["size_bytes"]: r["by_network"] for r in server_leaf}
    # collisions: ECMP leaves 40% of a NIC on whole servers per leaf, D-mod-K and spraying all
    assert by[1 << 30]["roce"]["fabric_share"] < 0.6
    assert by[1 << 30]["infiniband"]["fabric_share"] == by[1 << 30]["spectrum-x"]["fabric_share"] \
        == pytest.approx(1.0)
    assert by[1 << 30]["infiniband"]["seconds"] < by[1 << 30]["roce"]["seconds"]
    # latency: InfiniBand's switches beat Ethernet's at 8 bytes, sockets pay 20 us a message
    assert by[8]["infiniband"]["seconds"] < by[8]["spectrum-x"]["seconds"] < by[8]["tcp"]["seconds"]
    assert data["nccl"]["network"] == "infiniband"
    # what each effect costs: added one at a time to NCCL's own figure, they make the time
    for size, techs in by.items():
        for name, cell in techs.items():
            e = cell["effects"]
            assert e["nccl_s"] + e["transport_s"] + e["latency_s"] + e["collisions_s"] == \
                pytest.approx(cell["seconds"]), (size, name)
            assert e["nccl_s"] == techs["infiniband"]["effects"]["nccl_s"]   # one reference
    big = by[1 << 30]
    assert big["roce"]["effects"]["collisions_s"] > 0.5 * big["roce"]["effects"]["nccl_s"]
    assert big["infiniband"]["effects"]["collisions_s"] == 0 == \
        big["spectrum-x"]["effects"]["collisions_s"]
    # sockets: the CPU's ceiling is their transport's cost at 1 GiB, 20 us a message at 8 bytes
    assert big["tcp"]["effects"]["transport_s"] > 5 * big["tcp"]["effects"]["nccl_s"]
    assert by[8]["tcp"]["effects"]["latency_s"] > 10 * by[8]["spectrum-x"]["effects"]["latency_s"]
    assert by[8]["spectrum-x"]["effects"]["latency_s"] > by[8]["infiniband"]["effects"]["latency_s"]
    assert side["congestion"] == {"infiniband": "credits, no drop", "roce": "PFC pauses, ECN",
                                  "spectrum-x": "PFC pauses, ECN", "tcp": "drops, resends"}


def test_the_side_by_side_tells_what_each_effect_costs_at_the_largest_size(capsys):
    assert P.main(["--gpus", "1024", "--simulate", "--sizes", "8,1G",
                   "--network", "infiniband,roce-lossy"]) == 0
    out = capsys.readouterr().out
    side = out[out.index("Network technologies side by side"):]
    block = side[side.index("# clos-2, server per leaf wiring"):].split("\n\n")[0]
    assert block.count("what each effect costs") == 1
    assert "#  what each effect costs at 1073741824 bytes (us)" in block
    for label in ("NCCL's own", "+ transport", "+ latency", "+ collisions", "a full queue"):
        assert re.search(rf"^#  +{re.escape(label)} ", block, re.M), label
    assert re.search(r"^#  +a full queue +credits, no drop +drops, resends$", block, re.M)


@pytest.mark.parametrize("value", ["ethernet", "roce,ib", ""])
def test_a_bad_network_flag_is_one_line(value, capsys):
    assert P.main(["--gpus", "64", "--network", value]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: --network: expected one or more of infiniband")
    assert err.count("\n") == 1


def test_dmodk_divides_by_the_choices_made_before_so_three_tiers_never_collide():
    # rail rings crossing between units meet at a pod's aggregation switches: their
    # destinations share a port number but not a leaf, and D-mod-K's second choice
    # (the number over the leaf's uplinks) sends each rail to its own core
    shape = ClosShape(servers=512, gpus=8, nics=8, down=16, up=16, tiers=3, radix=32,
                      wiring="rail", routing="dmodk")
    assert rails.share(shape, 2, 1) == pytest.approx(1.0)
    # where a switch has parallel links to the next (one core per plane j at two pods;
    # two spines for 32 uplinks), the link down is the choice made on the way up: the
    # rails crossing into a pod all go to its leaves' port 0, one core's 32 links down
    # (they read 1/8 when the core divided by every choice, parallel links included)
    for kw in (dict(servers=256, down=32, up=32, tiers=3, radix=64, wiring="rail"),
               dict(servers=16, down=32, up=32, tiers=2, radix=64, wiring="server")):
        shape = ClosShape(gpus=8, nics=8, routing="dmodk", **kw)
        assert (shape.group_cores if shape.tiers == 3 else shape.spines) < shape.up
        assert rails.share(shape, 2, 1) == pytest.approx(1.0), kw
    # a fat-tree file: from an edge switch, the four servers of another pod by four cores
    f = parse_fabric((REPO / "topologies" / "fat-tree-k4.yaml").read_text()
                     + "\nnetwork: infiniband\n", "k4.yaml", emulate=False)
    net = Network(f)
    src = f.endpoints[0]
    far = [h for h in f.endpoints if h.leaf not in
           {x.leaf for x in f.endpoints[:4]}][-4:]
    cores = {tuple(l.dst for l in net.path(src.name, h.name))[2] for h in far}
    assert len(cores) == 4, cores


def test_compare_names_each_runs_network_and_says_it_differs(tmp_path):
    for extra in ([], ["--network", "tcpxo"]):
        out = python("run_topology.py", "topologies/sim/hgx-h100-2x8.yaml", "-b", "8", "-e", "8",
                     "--results", str(tmp_path / "runs"), *extra)
        assert out.returncode == 0, out.stderr
    runs = sorted(str(p) for p in (tmp_path / "runs").iterdir())
    out = python("-m", "report.compare", *runs, "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "differ   network (1 InfiniBand; 2 GCP GPUDirect-TCPXO), policy (1 dmodk; 2 ecmp)" \
        in out.stdout
    # 8 bytes: TCPXO's 48 us a message on each of the tree's 2 steps between the servers
    assert re.search(r"^ +8 +25 .* +122 .*", out.stdout, re.M), out.stdout


def test_the_248_server_h200_cluster_declared_infiniband_meets_its_published_busbw():
    """nccl-tests issue 283: about 350 GB/s busbw at 512 MiB on 248 x 8 H200 (prose).
    Its file has 1 us on every link: that costs latency, not bandwidth."""
    f = parse_fabric((REPO / "topologies" / "sim" / "h200-rail-248.yaml").read_text(),
                     "h200.yaml", emulate=False)
    ranks = [h.name for h in f.endpoints]
    c = nccl_cluster_on(f, f.server_model, ranks, 8)
    assert c.fabric_share == pytest.approx(1.0)
    e = nccl.predict(c, "allreduce", 512 << 20).chosen
    n = len(ranks)
    busbw = (512 << 20) / (e.time_us * 1e3) * 2 * (n - 1) / n
    assert abs(busbw / 350 - 1) <= 0.15, busbw
    # without the delay: the same bandwidth; 8 bytes quicker by the links a tree's
    # 2 x log2(248) = 14 steps between servers cross (2 links on a rail leaf, 4 over a spine)
    bare = f.edited(lambda s: [s["links"][k].update(delay_ms=0) for k in ("server_leaf",
                                                                            "leaf_spine")])
    c0 = nccl_cluster_on(bare, bare.server_model, ranks, 8)
    assert c0.fabric_share == c.fabric_share
    hop = c.extra_us - c0.extra_us
    assert 2.0 <= hop <= 4.0                      # 1 us a link, 2 to 4 links a step
    small = [nccl.predict(x, "allreduce", 8).chosen.time_us for x in (c0, c)]
    assert small[1] - small[0] == pytest.approx(14 * hop, rel=1e-6)


def test_each_technology_names_the_packet_model_that_stands_for_it():
    """The registry and the packet engine's presets name the same things:
    each technology's preset exists (the cloud transports have none), and
    RoCE's follows its options."""
    from sim.packets.presets import NAMES
    got = {name: tech.packet_preset() for name, tech in networks.all_networks().items()}
    assert got == {"infiniband": "infiniband", "roce": "roce-dcqcn", "roce-lossy": "roce-lossy",
                   "spectrum-x": "spectrum-x", "tcp": "tcp", "efa": "", "tcpxo": ""}
    assert set(got.values()) - {""} <= set(NAMES)
    roce = network("roce")
    assert roce.packet_preset({"ecn": False}) == "roce-pfc"
    assert roce.packet_preset({"pfc": False, "ecn": True}) == "roce-lossy"


def test_a_technology_configured_by_a_file_leaves_the_registered_one_as_it_is():
    ib = network("infiniband")
    mine = ib.configured({"sharp": True, "switch_latency_us": 2.0, "qps_per_connection": None},
                         "adaptive")
    assert (mine.sharp, mine.switch_latency_us, mine.routing) == (True, 2.0, "adaptive")
    assert mine.describe() == "InfiniBand (sharp True)" and mine.qps_per_connection == 1
    assert (ib.sharp, ib.switch_latency_us, ib.routing, ib.describe()) == \
        (False, 0.13, "dmodk", "InfiniBand")
    assert ib.configured({}, "dmodk") is ib
    roce = network("roce")
    assert roce.configured({"ecn": False}).packet_preset() == "roce-pfc"
    assert roce.packet_preset() == "roce-dcqcn"
