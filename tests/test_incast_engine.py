"""--incast with --engine sim (or a file whose experiment.engine is sim): the
incast in the packet engine alone, under the fabric's technology's preset,
at the fabric's own link rate, MTU and queue, with no lab
(runs/incast_engine.py). The runs are short: 16 senders at 50 Mbit/s for
10 s, 4 senders at 1 Gbit/s for 1 s, each well under a second of the
engine; the 400G case is planned (--check), not run."""

import json

import pytest

from harness import REPO
from harness.commands import run
from report.console import engine_incast_text
from runner.run_summary import Summary
from runs.incast_engine import PER_SLOT, WORK_BUDGET, engine_plan
from sim.packets.presets import on_link
from topologies.fabric import load_fabric

INCAST = REPO / "topologies" / "incast.yaml"
SUPERPOD = REPO / "topologies" / "sim" / "superpod-512.yaml"


def small(tmp_path, network: str, rate_mbit=1000, extra="", experiment="") -> str:
    """Five servers on one switch, the links at `rate_mbit`."""
    path = tmp_path / "small.yaml"
    path.write_text(f"name: small\nnetwork: {network}\n"
                    "fabric: {kind: single-switch, servers: 5, mtu: 1500}\n"
                    f"links:\n  server_leaf: {{rate_mbit: {rate_mbit}, queue_packets: 64"
                    f"{extra}}}\n{experiment}")
    return str(path)


def summary(results) -> dict:
    (folder,) = results.iterdir()
    return json.loads((folder / "summary.json").read_text())


def test_tcp_on_the_labs_incast_file_gives_the_lab_comparisons_figures(tmp_path):
    """topologies/incast.yaml (16:1 at 50 Mbit/s, 64 frames of drop-tail) under
    --network tcp: the figures docs/packets.md sets beside the lab's (port
    busy 0.999, about 6% of the packets lost and resent, the queue near full,
    flows spread over 10 s by their timeouts)."""
    out = run(str(INCAST), "--engine", "sim", "--incast", "16", "--network", "tcp",
              "--results", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert "16 senders into h17 in the packet engine (no lab): Ethernet, NCCL sockets " \
           "(TCP) as its tcp preset" in out.stdout
    assert "links 50 Mbit/s, 1448 B of payload in 1538 B frames" in out.stdout
    assert "retransmission timeouts" in out.stdout and "PFC pauses" not in out.stdout
    record = summary(tmp_path / "r")["incast"]
    e = record["engine"]
    assert record["lab"] is None
    assert (e["technology"], e["preset"], e["simulated_s"], e["capped"]) == ("tcp", "tcp", 10,
                                                                             False)
    assert e["overrides"] == {"link_gbps": 0.05, "mtu_bytes": 1448, "queue_limit_pkts": 64}
    assert e["goodput_share"] > 0.99 and 0.04 < e["loss_fraction"] < 0.08
    assert 50 < e["queue_mean_packets"] <= 64 and e["queue_peak_packets"] == 64
    assert e["jain"] > 0.85 and e["timeouts"] > 0 and e["fast_retransmits"] > 1000


@pytest.mark.parametrize("network,preset,rows,absent", [
    ("{technology: roce, ecn: false}", "roce-pfc", ["PFC pauses sent"],
     ["packets marked ECN", "retransmission timeouts"]),
    ("{technology: roce, pfc: false}", "roce-lossy", ["retransmission timeouts"],
     ["PFC pauses sent"]),
    ("infiniband", "infiniband", ["credit stalls"], ["PFC pauses sent"]),
])
def test_each_technology_runs_as_its_preset_with_the_figures_it_has(tmp_path, network, preset,
                                                                    rows, absent):
    out = run(small(tmp_path, network), "--engine", "sim", "--incast", "4", "--seconds", "1",
              "--results", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    assert f"as its {preset} preset" in out.stdout
    assert all(row in out.stdout for row in rows) and not any(row in out.stdout for row in absent)
    e = summary(tmp_path / "r")["incast"]["engine"]
    assert e["preset"] == preset and e["rate_mbit"] == 1000 and e["payload_bytes"] == 1024
    assert e["goodput_share"] > 0.95
    if preset == "roce-lossy":
        assert e["lost"] > 0 and e["loss_fraction"] > 0
    else:                                           # lossless: pauses or credits, no drop
        assert e["lost"] == 0 and e.get("pauses", e.get("credit_stalls")) > 0
        assert e["jain"] > 0.99


def test_a_file_whose_engine_is_sim_runs_its_incast_in_the_packet_engine(tmp_path):
    fabric = small(tmp_path, "{technology: roce, ecn: false}",
                   experiment="experiment: {engine: sim}\n")
    out = run(fabric, "--incast", "2", "--seconds", "1", "--json",
              "--results", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)["incast"]
    assert record["lab"] is None and record["engine"]["preset"] == "roce-pfc"
    assert record["engine"]["senders"] == ["h1", "h2"] and record["engine"]["receiver"] == "h5"


def test_check_says_what_the_engine_would_run_and_for_how_long():
    """At 400 Gbit/s the engine simulates the first part of --seconds: what
    WORK_BUDGET link-slots reach (here 16 senders, 34 links, 83.56 ns a
    4178-byte frame)."""
    out = run(str(SUPERPOD), "--incast", "16", "--check")
    assert out.returncode == 0, out.stderr
    assert ("experiment: an incast in the packet engine (no lab), 16 senders (h33g8 .. h48g8) "
            "into h64g8: RoCEv2 as its roce-dcqcn preset, links 400000 Mbit/s with 4096 B of "
            "payload in 4178 B frames, for the first 90.8 ms of the 10 s asked") in out.stdout
    record = json.loads(run(str(SUPERPOD), "--incast", "16", "--check", "--json").stdout)
    e = record["incast"]["engine"]
    assert record["incast"]["lab"] is None and e["capped"] and e["preset"] == "roce-dcqcn"
    assert e["simulated_s"] == pytest.approx(WORK_BUDGET / (34 + PER_SLOT) * 4178 * 8 / 400e9,
                                             rel=1e-4)
    lab = run(str(INCAST), "--incast", "16", "--check")
    assert "an incast with real TCP (Reno)" in lab.stdout     # the lab's incast as it was


@pytest.mark.parametrize("fabric,flags,message", [
    (INCAST, ["--network", "efa"], "the network technology efa (AWS EFA (SRD)) has no model in "
                                   "the packet engine, which models infiniband, roce"),
    (INCAST, ["--network", "tcpxo"], "the network technology tcpxo"),
    (REPO / "topologies" / "leaf-spine-4x4.yaml", [],
     "2 of the senders are not on h8's switch, and the packet engine's incast is one switch"),
    (REPO / "topologies" / "amd-mesh.yaml", [], "h2g1 is in h2g4's own server (h2)"),
    (REPO / "topologies" / "multi-gpu.yaml", [], "h3g1 and h3g2 share a NIC (leaf2 port 1)"),
])
def test_an_incast_the_engine_does_not_model_is_refused_in_one_sentence(fabric, flags, message):
    out = run(str(fabric), "--engine", "sim", "--incast", "3", *flags)
    assert out.returncode == 2 and out.stderr.startswith("error: --incast 3 with --engine sim: ")
    assert message in out.stderr and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_lossy_links_and_other_engines_are_refused_in_one_sentence(tmp_path):
    out = run(small(tmp_path, "roce", extra=", loss_percent: 1"), "--engine", "sim",
              "--incast", "2", "--check")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "links.server_leaf.loss_percent is 1, and the packet engine loses frames only at " \
           "full queues" in out.stderr
    out = run(str(INCAST), "--engine", "iperf3", "--incast", "2", "--check")
    assert out.returncode == 2 and "so --engine would do nothing" in out.stderr


def test_the_link_sets_the_presets_rate_payload_and_queue():
    """The MTU less the transport's own headers: TCP's MSS; RDMA's path MTU,
    a power of two up to 4096. DCQCN's steps follow the line rate; only tcp
    takes the link's drop-tail queue."""
    tcp = {"link_gbps": 0.05, "mtu_bytes": 1448, "queue_limit_pkts": 64}
    assert on_link("tcp", 0.05, 1500, 64) == tcp
    assert on_link("roce-pfc", 400, 9000, 64) == {"link_gbps": 400, "mtu_bytes": 4096}
    assert on_link("roce-lossy", 10, 1500)["mtu_bytes"] == 1024
    assert on_link("infiniband", 400, 4096)["mtu_bytes"] == 4096
    dcqcn = on_link("roce-dcqcn", 100, 9000)
    assert (dcqcn["rate_ai_mbps"], dcqcn["rate_hai_mbps"], dcqcn["min_rate_mbps"]) == (
        5000, 10000, 100)
    with pytest.raises(ValueError, match="an MTU of 290 bytes leaves the roce-pfc preset no "
                                         "payload"):
        on_link("roce-pfc", 400, 290)


def test_the_text_names_the_cap_and_the_exit_status_has_no_lab():
    plan = engine_plan(load_fabric(SUPERPOD, emulate=False), 16, 10)
    figures = {"goodput_share": 0.83, "flow_mbit_s": {"min": 19386.0, "mean": 20325.0,
                                                      "max": 21296.0},
               "jain": 0.999, "packets_sent": 901858, "lost": 0, "loss_fraction": 0.0,
               "retransmit_fraction": 0.0, "queue_mean_packets": 232.1,
               "queue_peak_packets": 2882, "base_rtt_ms": 0.0034, "wall_s": 5.8,
               "pauses": 1206, "paused_fraction": 0.001, "ecn_marks": 350650}
    record = {"lab": None, "engine": {**plan, **figures}}
    text = engine_incast_text(record)
    assert "per-flow goodput, Mbit/s: min / mean / max   19,386 / 20,325 / 21,296" in text
    assert "idle round trip 3.4 us" in text
    assert "simulated the first 90.8 ms of the 10 s asked in 5.8 s" in text
    assert ("note: the engine steps every link once a frame (83.6 ns at this rate) and a run is "
            "held to at most about 10 s") in text
    done = Summary(fabric="f", source="s", shape="", links={}, policy="ecmp", network={},
                   warnings=[], provenance=None, results="", incast=record)
    assert done.exit_status() == 0
