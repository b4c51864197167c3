"""The planner prints what NCCL would run (planner/nccl_plan.py): per
design, wiring and size, the tuner's algorithm and protocol, its channels
and time, with each NIC's rate as the fabric delivers it."""

import json
from pathlib import Path

import pytest

import planner as P
from planner import nccl_plan
from sim import nccl
from topologies.hardware import server


def planned(capsys, *argv) -> dict:
    assert P.main(["--json", "--simulate", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_size_gets_nccls_choice_and_its_time(capsys):
    data = planned(capsys, "--gpus", "1024", "--sizes", "8,1M,1G")
    rows = data["nccl"]["rows"]
    assert {r["size_bytes"] for r in rows} == {8, 1 << 20, 1 << 30}
    hw = server("hgx-h100")
    assert data["nccl"]["network"] == "roce"                     # the default technology
    for r in rows:
        alone = nccl.predict(nccl.cluster(hw, 128, fabric_share=r["fabric_share"],
                                          net_extra_us=r["network_us"]),
                             "allreduce", r["size_bytes"]).chosen
        assert (r["ran"], r["channels"]) == (alone.name, alone.channels)
        assert r["seconds"] == pytest.approx(alone.time_us * 1e-6)
        assert r["fabric_factor"] >= 1 - 1e-12
    # 8 bytes: a tree of 7 NVLink hops and log2(128) = 7 network hops, up and down, each
    # network hop NCCL's 5.0 us and what the RoCE path adds (its Ethernet switches)
    eight = [r for r in rows if r["size_bytes"] == 8]
    assert all(r["ran"] == "Tree/LL" for r in eight)
    for r in eight:
        assert r["network_us"] > 0
        assert r["seconds"] == pytest.approx(
            (6.8 + 2 * (7 * 0.6 + 7 * (5.0 + r["network_us"]))) * 1e-6, rel=1e-4)


def test_rail_rings_on_rail_leaves_collide_less_than_on_server_leaves(capsys):
    rows = planned(capsys, "--gpus", "1024", "--sizes", "1G")["nccl"]["rows"]
    share = {(r["design"], r["wiring"]): r["fabric_share"] for r in rows}
    for design in {d for d, _ in share}:
        assert share[(design, "rail")] == 1.0 > share[(design, "server")]


def test_the_server_flag_sets_the_generation(capsys):
    a100 = planned(capsys, "--gpus", "64", "--sizes", "1G", "--server", "dgx-a100",
                   "--link-gbps", "200")
    assert all("NVLS" not in r["ran"] for r in a100["nccl"]["rows"])      # no NVLink SHARP
    h100 = planned(capsys, "--gpus", "64", "--sizes", "1G")
    assert all(r["ran"] == "NVLSTree/Simple" for r in h100["nccl"]["rows"])


@pytest.mark.parametrize("argv,message", [
    (["--gpus", "64", "--simulate", "--server", "dgx-h9000"], "--server: expected one of"),
    (["--gpus", "64", "--server", "a100"], "--server: expected one of"),
])
def test_bad_server_flags_are_one_line(capsys, argv, message):
    assert P.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {message}") and err.count("\n") == 1


def test_a_large_plan_prices_with_nccl_and_says_the_textbook_rows_are_left_out(capsys):
    assert P.main(["--gpus", "20000", "--simulate", "--sizes", "1G"]) == 0
    out = capsys.readouterr().out
    assert "What NCCL would run: AllReduce on 20,000 GPUs" in out
    assert "simulated up to 16,384 GPUs; NCCL runs neither at 20,000" in out


def test_connections_per_nic_are_the_execution_channels_over_the_nics():
    assert nccl_plan.connections_per_nic(server("hgx-h100"), 4) == 2     # 16 channels, 8 NICs


def test_the_plan_says_what_nccl_would_run_beside_the_textbook_lines(capsys):
    assert P.main(["--gpus", "16", "--gradient-bytes", "1G"]) == 0
    out = capsys.readouterr().out
    alone = nccl.predict(nccl.cluster(server("hgx-h100"), 2), "allreduce", 1 << 30).chosen
    assert alone.name == "NVLSTree/Simple"
    assert (f"as NCCL runs it (hgx-h100 servers, RoCEv2, nothing colliding): "
            f"{alone.time_us / 1e3:.3g} ms, NVLSTree/Simple on 16 channels") in out
    data = planned(capsys, "--gpus", "4", "--sizes", "8", "--server", "dgx-a100")
    # 4 GPUs: one server with 4 of its 8 GPUs: a ring over NVLink, no NVLS on A100
    assert data["allreduce"]["nccl"]["ran"].startswith(("Ring", "Tree"))


# --- on the lab's slow links: never faster than the NIC ---------------------------

_DEFAULT = Path(__file__).parent.parent / "topologies" / "default.yaml"


def _lab_results(folder, sizes=(1 << 20, 4 << 20, 16 << 20)):
    """A results folder of a run on the 20 Mbit/s default fabric (4 servers,
    1 GPU each), its times the ring's bytes at 80% of the link's rate."""
    from topologies.fabric import load_fabric
    fabric = load_fabric(_DEFAULT)
    runs = []
    for size in sizes:
        m = P.fabric_model(fabric, "ring", size)
        runs.append({"collective": "allreduce", "algorithm": "ring", "size_bytes": size,
                     "ranks": 4, "time_s": 0.002 * m["steps"] + 1.25 * m["bandwidth_s"]})
    folder.mkdir()
    (folder / "fabric.json").write_text(json.dumps(fabric.spec))
    (folder / "summary.json").write_text(json.dumps(
        {"source": str(_DEFAULT), "collectives": {"runs": runs}}))
    return folder


def test_a_20_mbit_run_is_priced_at_or_above_the_nics_physical_minimum(tmp_path, capsys):
    """NCCL's search has no channel slower than 0.12 GB/s: on 20 Mbit/s NICs
    its tuner alone said 13.4 s for 1 GiB, where the ring's bytes need 644 s."""
    folder = _lab_results(tmp_path / "run")
    assert P.main(["--results", str(folder), "--json"]) == 0
    line = json.loads(capsys.readouterr().out)["allreduce"]["nccl"]
    minimum = 2 * 3 / 4 * (1 << 30) * 8 / 20e6                  # 644 s
    assert line["minimum_s"] == pytest.approx(minimum)
    assert line["seconds"] >= minimum and line["at_minimum"]
    assert line["model_seconds"] < minimum / 10                 # what it said before
    assert P.main(["--results", str(folder)]) == 0
    out = capsys.readouterr().out
    nccl_line = next(l for l in out.splitlines() if "as NCCL runs it" in l)
    assert "10.7 minutes, the NICs' physical minimum" in nccl_line
    assert P.main(["--results", str(folder), "--simulate", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["nccl"]["rows"]
    assert rows and all(r["seconds"] >= minimum * (1 - 1e-9) for r in rows)


def test_the_floor_leaves_real_clusters_alone(capsys):
    """At 400 Gbit/s NCCL's own figure is above the floor: it stands."""
    data = planned(capsys, "--gpus", "1024", "--sizes", "1M,1G")
    for r in data["nccl"]["rows"]:
        assert not r["at_minimum"] and r["seconds"] > r["minimum_s"]
    assert not data["allreduce"]["nccl"]["at_minimum"]


def test_a_fabrics_slow_in_server_links_are_a_floor_too(tmp_path, capsys):
    """NCCL's model prices the server as sold (NVLink); a fabric's own
    in-server links slower than that bound each GPU's buffer: multi-gpu's
    with its NVLink-class links at 1 Mbit/s need 1 GiB x 8 / 1e6 s."""
    from topologies.fabric import load_fabric
    spec = load_fabric(Path(__file__).parent.parent / "topologies" / "multi-gpu.yaml").spec
    spec["links"]["intra_node"]["rate_mbit"] = 1
    yaml = tmp_path / "slow-inside.yaml"
    yaml.write_text(json.dumps(spec))                # JSON is YAML
    assert P.main(["--fabric", str(yaml), "--json"]) == 0
    line = json.loads(capsys.readouterr().out)["allreduce"]["nccl"]
    assert line["bound"] == "in-server" and line["at_minimum"]
    assert line["seconds"] == pytest.approx((1 << 30) * 8 / 1e6)
    assert P.main(["--fabric", str(yaml)]) == 0
    assert "the in-server links' physical minimum: each GPU sends its 1 GiB at least once " \
        "through its 0.001 Gbit/s link" in capsys.readouterr().out


def test_a_fabric_files_network_options_reach_the_plan(tmp_path, capsys):
    """The planner prices a file's technology as the file sets it, as
    run_topology.py does: SHARP turned on lets NCCL reduce in the switches,
    a slower switch lengthens each step between servers, and with --network
    beside it the other technologies keep their own defaults."""
    text = (Path(__file__).parent.parent / "topologies" / "sim" / "hgx-h100-2x8.yaml").read_text()
    text = text.replace("servers_per_unit: 2", "servers_per_unit: 16")
    plain, sharp = tmp_path / "plain.yaml", tmp_path / "sharp.yaml"
    plain.write_text(text)
    sharp.write_text(text.replace("\nnetwork: infiniband", "\nnetwork: {technology: infiniband, "
                                  "sharp: true, switch_latency_us: 2}"))
    by = {}
    for f in (plain, sharp):
        data = planned(capsys, "--fabric", str(f), "--sizes", "1G")
        by[f.stem] = data["nccl"]
    assert by["plain"]["network_title"] == "InfiniBand"
    assert by["sharp"]["network_title"] == "InfiniBand (sharp True)"
    p, s = ([r for r in by[k]["rows"] if (r["design"], r["wiring"]) == ("clos-2", "rail")][0]
            for k in ("plain", "sharp"))
    assert not p["ran"].startswith("NVLS/") and s["ran"].startswith("NVLS/")   # reduced in the switches
    assert s["seconds"] < p["seconds"]
    # NCCL's rail rings cross one switch between servers, all 16 under each rail's
    # leaf: 2 us, not 0.13
    assert s["network_us"] - p["network_us"] == pytest.approx(2 - 0.13, abs=0.05)
    side = planned(capsys, "--fabric", str(sharp), "--sizes", "1G", "--network", "infiniband,roce")
    assert side["networks"]["titles"] == {"infiniband": "InfiniBand (sharp True)",
                                          "roce": "RoCEv2"}


def test_a_fabric_too_large_to_emulate_is_planned_with_the_models_limits(capsys):
    """A fabric only the simulator takes (1,984 GPUs) is planned; the lab's
    own schedules, which the planner predicts on fabrics a lab can build, are
    left to --engine sim, and the output says so."""
    assert P.main(["--fabric", "topologies/sim/h200-rail-248.yaml", "--simulate",
                   "--network", "infiniband"]) == 0
    out = capsys.readouterr().out
    assert "What NCCL would run: AllReduce on 1,984 GPUs" in out
    assert ("# the lab's own schedules are predicted on fabrics a lab can build (up to 512 "
            "endpoints); h200-rail-248 has 1,984: run_topology.py "
            "topologies/sim/h200-rail-248.yaml --engine sim prices them") in out
