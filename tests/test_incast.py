"""--incast without building anything: who sends to whom, which port is the
bottleneck, the flags it refuses, what --check says, and the figures the
lab's measurement turns into (the lab run itself:
tests/privileged/test_incast_lab.py)."""

import json

import pytest

from harness import REPO
from harness.commands import run
from harness.fabrics import leaf_spine
from report.console import incast_text
from runs.incast_beside import not_comparable, engine_overrides, jain, lab_figures
from topologies.fabric import load_fabric
from traffic.measure.incast import bottleneck, flow_record, incast_plan

INCAST = REPO / "topologies" / "incast.yaml"


def test_the_last_server_receives_from_its_own_switch_first():
    f = leaf_spine(2, 2, 3)           # h1..h3 on leaf1, h4..h6 on leaf2
    receiver, senders = incast_plan(f, 3)
    assert receiver == "h6" and senders == ["h4", "h5", "h1"]
    assert incast_plan(f, 5)[1] == ["h4", "h5", "h1", "h2", "h3"]


@pytest.mark.parametrize("n", [0, 6])
def test_an_incast_needs_senders_the_fabric_has(n):
    with pytest.raises(ValueError, match=r"has 6 servers, so an incast into one of them "
                                         r"takes 1 to 5 senders"):
        incast_plan(leaf_spine(2, 2, 3), n)


def test_the_bottleneck_is_the_switch_port_into_the_receiver():
    f = load_fabric(INCAST, emulate=False)
    intf, link = bottleneck(f, "h17")
    assert intf.startswith("leaf1-eth") and link.spec.queue_packets == 64
    assert {link.a, link.b} == {"h17", "leaf1"}


def test_check_names_the_incast_instead_of_a_sweep():
    out = run(str(INCAST), "--incast", "16", "--check")
    assert out.returncode == 0, out.stderr
    assert ("experiment: an incast with real TCP (Reno), 16 senders (h1 .. h16) into h17 "
            "for 10 s") in out.stdout
    record = json.loads(run(str(INCAST), "--incast", "4", "--seconds", "3", "--check",
                            "--json").stdout)
    assert record["incast"] == {"receiver": "h17", "senders": ["h1", "h2", "h3", "h4"],
                                "seconds": 3}


@pytest.mark.parametrize("flags,message", [
    (["--incast", "17"], "--incast 17: this fabric has 17 servers"),
    (["--incast", "4", "-c", "allgather"], "--incast replays an incast instead of a size "
                                           "sweep, so -c/--collective would do nothing"),
    (["--incast", "4", "--step"], "so --step would do nothing"),
    (["--incast", "4", "--iperf-check"], "so --iperf-check would do nothing"),
    (["--incast", "4", "--no-traffic"], "--no-traffic replays nothing, so --incast"),
    (["--seconds", "4"], "--seconds sets the iperf3 check or the incast"),
    (["--incast", "0"], "argument --incast: expected a whole number from 1 to 256, got 0"),
])
def test_flags_an_incast_cannot_honour_are_refused_in_one_sentence(flags, message):
    out = run(str(INCAST), *flags, "--check")
    assert out.returncode == 2 and out.stderr.startswith("error: ") and message in out.stderr
    assert out.stderr.count("\n") == 1


def measured(lost=400, retransmits=300, rates=(4.0, 4.0, 2.0, 2.0)):
    """A lab incast's record as run_incast returns it."""
    seconds = 10.0
    flows = [{"src": f"h{i + 1}", "bytes": int(r * 1e6 / 8 * seconds), "mbit_s": r,
              "segments": 1000, "retransmits": retransmits // len(rates)}
             for i, r in enumerate(rates)]
    return {"receiver": "h5", "senders": [f["src"] for f in flows], "seconds": 10,
            "elapsed_s": seconds, "congestion_control": "reno", "base_rtt_ms": 0.3,
            "bottleneck": {"interface": "leaf1-eth5", "link": "h5-leaf1", "rate_mbit": 12.0,
                           "queue_packets": 64, "frame_bytes": 1514, "tc_drops": 2 * lost,
                           "mean_util": 0.99, "queue_mean_packets": 50.0,
                           "queue_peak_packets": 64, "queue_samples": 100},
            "flows": flows, "goodput_mbit_s": sum(rates), "retransmits": retransmits,
            "segments_sent": 1000 * len(rates), "segments_received": 1000 * len(rates) - lost,
            "lost": lost, "cpu_busy_pct": 40.0, "ovs_core_pct": 50.0,
            "shortfalls": []}


def test_the_lab_figures_are_shares_of_what_the_link_carries():
    fig = lab_figures(measured())
    # 12 Mbit/s of 1514-byte frames carry 12 x 1448 / 1514 of TCP payload
    assert fig["goodput_share"] == pytest.approx(12.0 / (12 * 1448 / 1514), abs=1e-3)
    assert fig["jain"] == pytest.approx(12 ** 2 / (4 * 40), abs=1e-4)
    assert fig["loss_fraction"] == pytest.approx(0.1) and fig["retransmit_fraction"] == 0.075
    assert fig["flow_mbit_s"] == {"min": 2.0, "mean": 3.0, "max": 4.0}
    assert jain([1, 1, 1]) == 1.0 and jain([1, 0, 0]) == pytest.approx(1 / 3)


def test_the_engine_gets_the_labs_numbers():
    assert engine_overrides(measured()) == {
        "link_gbps": 0.012, "mtu_bytes": 1448, "header_bytes": 66, "queue_limit_pkts": 64}


def test_no_engine_beside_an_incast_it_does_not_model():
    one = load_fabric(INCAST, emulate=False)
    m = measured()
    m.update(receiver="h17", senders=["h1", "h2"])
    assert not_comparable(one, m) is None
    two = leaf_spine(2, 2, 3)
    m.update(receiver="h6", senders=["h4", "h1"])
    assert not_comparable(two, m) == ("1 of the senders are not on h6's switch, and the "
                                       "packet engine's incast is one switch")


def test_a_failed_flow_and_the_text():
    bad = flow_record("h1", '{"error": "unable to connect"}', "{}")
    assert bad == {"src": "h1", "bytes": 0, "error": "unable to connect"}
    good = flow_record("h2", "{}", json.dumps({"end": {"sum_received": {"bytes": 1000}}}))
    assert good == {"src": "h2", "bytes": 1000}
    m = measured()
    record = {"lab": {**m, **lab_figures(m)}, "engine": None,
              "engine_none": "a reason", "bent": ["the host's CPU was 95% busy"]}
    text = incast_text(record)
    assert "4 senders into h5 for 10 s, TCP reno: bottleneck leaf1-eth5 at 12 Mbit/s" in text
    assert "packet engine: none (a reason)" in text
    assert "400 segments lost (800 drops counted by tc: the userspace datapath re-sends" in text
    assert "note: the host's CPU was 95% busy" in text
