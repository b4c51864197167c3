"""`--engine sim` on a fabric that names its servers as sold (server.model):
with -a auto (the default) NCCL's model prices each size NCCL's tuner
prices (the algorithm, protocol and channels NCCL picks, each NIC at the
share of its rate this fabric's ECMP leaves the rail rings), checked against
published nccl-tests figures; a named algorithm, or a collective NCCL's
tuner does not price, replays the lab's schedule on the fabric graph."""

import pytest

from harness import TOPOLOGIES
from harness.commands import run
from report.tables import sim_table
from runs.experiment import Experiment
from runs.simulated import simulate_experiment
from sim import nccl
from topologies.fabric import load_fabric, parse_fabric
from toolkit.errors import FabricError

H100_2X8 = load_fabric(TOPOLOGIES / "sim" / "hgx-h100-2x8.yaml", emulate=False)
SWEEP = dict(engine="sim", iters=1, warmup=0)
GIB = 1 << 30

# two HGX H100 on one leaf-spine pair: a server's 8 NICs share its leaf's
# one 400G uplink, so NCCL's rail rings between the servers get 1/8 of a NIC
CHOKED = """
fabric: {kind: leaf-spine, spines: 1, leaves: 2, servers_per_leaf: 1, mtu: 9000}
server: {model: hgx-h100, gpus: 8, nics: 8}
links:
  intra_node: {rate_mbit: 3600000}
  server_leaf: {rate_mbit: 400000}
  leaf_spine: {rate_mbit: 400000}
"""


def sweep(fabric, **exp):
    return simulate_experiment(fabric, Experiment(**{**SWEEP, **exp}))


def test_auto_prices_each_size_as_nccl_runs_it_against_published_figures():
    """nccl-tests issue 309 (2 x Dell XE9680, 8 x 400G IB each, NCCL 2.26.2):
    24.7 us at 8 B, 469.21 GB/s busbw at 16 GiB with NCCL's default
    (NVLSTree); at 1 GiB the same algorithm, within 0.15 of the plateau."""
    (small,) = sweep(H100_2X8, minbytes=8, maxbytes=8).runs
    record = sweep(H100_2X8, minbytes=GIB, maxbytes=GIB)
    (large,) = record.runs
    assert record.experiment["algorithm"] == "auto"
    assert record.simulated["method"] == "NCCL's model"
    assert small["auto"]["nccl"] == "Tree/LL, 1 channel" and small["auto"]["model"] == "hgx-h100"
    assert 0.5 <= small["time_s"] / 24.7e-6 <= 2
    assert large["auto"]["nccl"].startswith("NVLSTree/Simple")
    assert abs(large["busbw_gbps"] / 469.21 - 1) <= 0.15
    # the time is NCCL's model's for these servers, nothing colliding on rail leaves
    assert large["auto"]["fabric_share"] == 1.0
    want = nccl.predict(nccl.cluster(H100_2X8.server_model, 2, network=H100_2X8.network,
                                     net_extra_us=large["auto"]["network_us"]),
                        "allreduce", GIB).chosen
    # on InfiniBand with rail leaves each step between servers crosses one switch, as the
    # reference NCCL's constants stand for: nothing added
    assert large["auto"]["network_us"] == pytest.approx(0.0, abs=1e-9)
    assert large["time_s"] == pytest.approx(want.time_us * 1e-6)
    assert large["auto"]["predicted_s"][want.name] == pytest.approx(large["time_s"])
    # no schedule replayed: no link is said to carry anything
    assert large["links"] == {} and large["predicted_s"] == 0
    table = sim_table(record)
    assert "NCCL's model: its tuner's latency and bandwidth" in table
    assert "priced by NCCL's model of hgx-h100 (server.model)" in table


def test_amd_servers_say_rccls_model_priced_them():
    """On AMD GPUs (mi300x: RCCL runs their collectives) the record's
    method, per size and for the sweep, and the simulated table name
    RCCL's model, never NCCL's."""
    amd = load_fabric(TOPOLOGIES / "amd-mesh.yaml", emulate=False)
    record = sweep(amd, minbytes=1 << 15, maxbytes=1 << 17)
    assert record.simulated["method"] == "RCCL's model"
    assert {r["method"] for r in record.runs} == {"RCCL's model"}
    table = sim_table(record)
    assert "# Simulated fabric (RCCL's model: its tuner's latency" in table
    assert "priced by RCCL's model of mi300x (server.model)" in table
    assert "NCCL's" not in table


def test_a_fabric_that_chokes_the_rails_slows_what_nccl_runs():
    choked = parse_fabric(CHOKED, "choked.yaml", emulate=False)
    (slow,) = sweep(choked, minbytes=GIB, maxbytes=GIB).runs
    (fast,) = sweep(H100_2X8, minbytes=GIB, maxbytes=GIB).runs
    assert slow["auto"]["fabric_share"] == pytest.approx(1 / 8, rel=0.05)
    assert slow["time_s"] > 2 * fast["time_s"]


def test_a_named_algorithm_replays_the_lab_schedule_on_the_fabric():
    record = sweep(H100_2X8, algorithm="ring", minbytes=1 << 20, maxbytes=1 << 20)
    (r,) = record.runs
    assert "auto" not in r and r["algorithm"] == "ring"
    assert record.simulated["method"] == "event by event"
    # a flat ring crosses a 400G NIC twice a server: no faster than the NIC
    assert r["links"] and 0 < r["busbw_gbps"] <= 50.0 + 1e-9


def test_alltoall_is_priced_as_nccl_runs_it_and_a_named_schedule_is_replayed():
    (r,) = sweep(H100_2X8, collective="alltoall", minbytes=1 << 30, maxbytes=1 << 30).runs
    assert r["auto"]["model"] == "hgx-h100" and r["auto"]["nccl"].startswith("P2P/Simple")
    # each GPU's half for the other server leaves through one 400G NIC at most
    assert 0 < r["busbw_gbps"] <= 2 * 50.0 * 15 / 16 + 1e-9
    (r,) = sweep(H100_2X8, collective="alltoall", algorithm="pairwise", minbytes=1 << 16,
                 maxbytes=1 << 16).runs
    assert r["algorithm"] == "pairwise" and "auto" not in r and r["links"]


# 16 HGX H100 on InfiniBand (D-mod-K), one link from each leaf to each spine: 8 leaves of 2
# servers (16 NIC ports each; 16 spines are 1:1, 8 2:1, 4 4:1), one rail-optimized unit
# of 16 (8 rail leaves of 16 ports, as many spines) or 4 units of 4 (32 rail leaves of 4
# ports; 4 spines are 1:1, 2 2:1, 1 4:1)
SIXTEEN = """
network: infiniband
fabric: {%s, spines: %d, uplinks_per_spine: 1, mtu: 9000}
server: {model: hgx-h100, gpus: 8, nics: 8}
links:
  intra_node: {rate_mbit: 3600000}
  server_leaf: {rate_mbit: 400000}
  leaf_spine: {rate_mbit: 400000}
"""
LEAVES_OF_TWO = "kind: leaf-spine, leaves: 8, servers_per_leaf: 2"
ONE_RAIL_UNIT = "kind: rail-optimized, units: 1, servers_per_unit: 16"
FOUR_RAIL_UNITS = "kind: rail-optimized, units: 4, servers_per_unit: 4"   # 32 leaves of 4


def alltoall_at(wiring: str, oversubscription: int) -> dict:
    spines = (4 if wiring == FOUR_RAIL_UNITS else 16) // oversubscription
    fabric = parse_fabric(SIXTEEN % (wiring, spines), "sixteen.yaml", emulate=False)
    (r,) = sweep(fabric, collective="alltoall", minbytes=GIB, maxbytes=GIB).runs
    return r


def test_alltoall_falls_with_the_spines_it_crosses():
    """NCCL's AllToAll (PXN: NIC k to NIC k of every other server) crosses the
    spines for the 14 of 15 other servers not on its leaf: at 2:1 and 4:1 it
    gets 1/2 and 1/4 of a NIC, 15/14 of that as the leaf's other server is
    reached below the spines; within 10% of 1/2 and 1/4 then. It used to
    take the rail rings' share, whose crossings the spines carry at 2:1
    (49.97 GB/s there as at 1:1); at 1:1 it stays 49.97."""
    runs = {k: alltoall_at(LEAVES_OF_TWO, k) for k in (1, 2, 4)}
    busbw = {k: r["busbw_gbps"] for k, r in runs.items()}
    assert busbw[1] == pytest.approx(49.97, abs=0.01)
    assert busbw[2] / busbw[1] == pytest.approx(1 / 2, rel=0.10)
    assert busbw[4] / busbw[1] == pytest.approx(1 / 4, rel=0.10)
    assert runs[2]["auto"]["fabric_share"] == pytest.approx(1 / 2 * 15 / 14, rel=1e-6)


def test_alltoall_across_rail_units_falls_with_the_spines():
    """4 rail-optimized units of 4 servers, 4, 2 or 1 spines: a rail's NIC
    reaches the 3 others of its unit on its leaf and the 12 elsewhere over
    the spines, so 2:1 and 4:1 leave 5/8 and 5/16 of a NIC (the pairwise
    replay, which crosses rails, falls to about 1/2 and 1/4); 1:1 as before.
    Within 3%: the latency, alike at each, is 1-2% of the time."""
    busbw = {k: alltoall_at(FOUR_RAIL_UNITS, k)["busbw_gbps"] for k in (1, 2, 4)}
    assert busbw[1] == pytest.approx(49.98, abs=0.01)
    assert busbw[2] / busbw[1] == pytest.approx(5 / 8, rel=0.03)
    assert busbw[4] / busbw[1] == pytest.approx(5 / 16, rel=0.03)


def test_alltoall_on_one_rail_unit_never_crosses_the_spines():
    """With PXN every NIC sends to its own rail, whose leaf takes that rail
    of every server of a rail-optimized unit: however few the spines, the
    AllToAll runs as on a non-blocking fabric."""
    full, quarter = (alltoall_at(ONE_RAIL_UNIT, k) for k in (1, 4))
    assert quarter["auto"]["fabric_share"] == full["auto"]["fabric_share"] == 1.0
    assert quarter["busbw_gbps"] == pytest.approx(full["busbw_gbps"])


def test_the_example_runs_from_the_command_line_and_says_what_ran(tmp_path):
    path = TOPOLOGIES / "sim" / "hgx-h100-2x8.yaml"
    out = run(str(path), "-b", "8", "-e", "8", "--results", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "  auto (Tree/LL, 1 channel)\n" in out.stdout
    assert "priced by NCCL's model of hgx-h100" in out.stdout


@pytest.mark.parametrize("server, message", [
    ("{model: hgx-h1000, gpus: 8, nics: 8}",
     "choked.yaml: server.model: expected one of dgx-1v, dgx-a100, hgx-h100, hgx-h200, hgx-b200, "
     "gb200-nvl72, gb300-nvl72, mi300x, mi325x, mi355x, got 'hgx-h1000'"),
    ("{model: hgx-h100, gpus: 16, nics: 8}",
     "choked.yaml: server.gpus: expected at most the 8 GPUs of a hgx-h100 (server.model), "
     "got 16"),
])
def test_a_server_model_is_checked_in_one_sentence(server, message):
    text = CHOKED.replace("{model: hgx-h100, gpus: 8, nics: 8}", server)
    with pytest.raises(FabricError) as err:
        parse_fabric(text, "choked.yaml", emulate=False)
    assert str(err.value) == message


def test_the_lab_says_what_nccl_would_run_on_the_named_servers():
    """On a lab, auto runs the end hosts' schedules; where the fabric names
    its servers, each size also says what NCCL itself would run there, and
    "simulated only" where a switch would reduce (NVLS, CollNet)."""
    import yaml
    from report.tables import auto_text
    from runs.sweep import RankCosts, resolved
    doc = yaml.safe_load((TOPOLOGIES / "rail-2x4.yaml").read_text())
    plain = parse_fabric(yaml.safe_dump(doc), "rail.yaml")
    doc["server"]["model"] = "hgx-h100"
    named = parse_fabric(yaml.safe_dump(doc), "rail.yaml")
    ranks = [h.name for h in named.endpoints]
    auto = Experiment(algorithm="auto")
    small = resolved(auto, RankCosts.of(named, ranks), 2, 50e-6)[1]
    large = resolved(auto, RankCosts.of(named, ranks), 1 << 22, 50e-6)[1]
    assert small["nccl_model"] == "hgx-h100: Tree/LL"
    assert large["nccl_model"] == "hgx-h100: NVLSTree/Simple, simulated only"
    assert auto_text(large) == f"{large['nccl']}; hgx-h100: NVLSTree/Simple, simulated only"
    unnamed = resolved(auto, RankCosts.of(plain, ranks), 1 << 22, 50e-6)[1]
    assert "nccl_model" not in unnamed and auto_text(unnamed) == unnamed["nccl"]
    assert {k: v for k, v in large.items() if k != "nccl_model"} == unnamed


def test_nccl_algo_and_proto_narrow_what_auto_may_choose():
    """As NCCL_ALGO=Ring and NCCL_PROTO=LL would: nccl-tests issue 309 ran
    Ring alone on the same servers at 392.69 GB/s (8 GiB)."""
    (ring,) = sweep(H100_2X8, minbytes=GIB, maxbytes=GIB, nccl_algo="ring").runs
    assert ring["auto"]["nccl"].startswith("Ring/Simple")
    assert abs(ring["busbw_gbps"] / 392.69 - 1) <= 0.15
    (ll,) = sweep(H100_2X8, minbytes=GIB, maxbytes=GIB, nccl_algo="ring", nccl_proto="LL").runs
    assert ll["auto"]["nccl"].startswith("Ring/LL,") and ll["time_s"] > 2 * ring["time_s"]
    (lab_tree,) = sweep(load_fabric(TOPOLOGIES / "default.yaml"), minbytes=1 << 20,
                        maxbytes=1 << 20, nccl_algo="tree").runs
    assert lab_tree["algorithm"] == "tree" and set(lab_tree["auto"]["predicted_s"]) == {"tree"}


@pytest.mark.parametrize("fabric, flags, message", [
    ("sim/hgx-h100-2x8.yaml", ["--nccl-algo", "nvls"],
     "error: --nccl-algo: NCCL would run none of what NCCL_ALGO=nvls and NCCL_PROTO=(all) "
     "leave for allreduce on these hgx-h100 servers\n"),
    ("default.yaml", ["--nccl-algo", "nvls,collnetdirect"],
     "error: --nccl-algo: nvls,collnetdirect leaves no algorithm the end hosts can replay for "
     "allreduce (ring or tree); NVLS and CollNet reduce in a switch: --engine sim on named "
     "servers (server.model) prices them\n"),
    ("default.yaml", ["--nccl-algo", "rung"],
     "error: --nccl-algo: 'rung' is not one of collnetchain, collnetdirect, nvls, nvlstree, "
     "pat, ring, tree\n"),
    ("default.yaml", ["-a", "ring", "--nccl-proto", "simple"],
     "error: --nccl-proto: narrows -a auto's choice; -a ring names the algorithm itself\n"),
])
def test_overrides_that_leave_nothing_are_refused_before_anything_runs(fabric, flags, message):
    out = run("--check", str(TOPOLOGIES / fabric), *flags)
    assert out.returncode == 2 and out.stderr == message


def test_nvlink_partitions_are_nccls_nodes_and_sizes_reach_16_gib():
    """Three NVL72 racks as NVL8 partitions (topologies/sim/gb200-nvl72-nvl8.yaml):
    NCCL's node is the partition, NVLS off as NVIDIA/nccl issue 1801 ran it,
    so NCCL runs rings through the partitions' NICs; sizes go to 16 GiB."""
    rack = load_fabric(TOPOLOGIES / "sim" / "gb200-nvl72-nvl8.yaml", emulate=False)
    assert rack.nvlink_domain == 8 and rack.server_model.name == "gb200-nvl72/nvl8"
    record = sweep(rack, minbytes=16 * GIB, maxbytes=16 * GIB, nccl_algo="^nvls,nvlstree")
    (big,) = record.runs
    assert big["size_bytes"] == 16 * GIB and big["auto"]["nccl"].startswith("Ring/Simple")
    want = nccl.predict(nccl.cluster(rack.server_model, 27, 8, network=rack.network,
                                     net_extra_us=big["auto"]["network_us"]),
                        "allreduce", 16 * GIB, "^nvls,nvlstree").chosen
    assert big["time_s"] == pytest.approx(want.time_us * 1e-6)
    (tree,) = sweep(rack, minbytes=16 * GIB, maxbytes=16 * GIB, nccl_algo="tree").runs
    assert tree["auto"]["nccl"].startswith("Tree/Simple")
    # 8 NICs a partition, the busiest carrying twice a channel's share (a deep double tree)
    assert 16 * GIB / tree["time_s"] / 1e9 == pytest.approx(8 * 48 / 2, rel=0.01)
