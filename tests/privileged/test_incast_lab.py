"""An incast with real kernel TCP on a real lab, beside the packet engine's
prediction of the same incast (run_topology.py --incast; runs/incast_beside.py).

topologies/incast.yaml: 16 servers send to a 17th through one switch, every
link at 50 Mbit/s, a 64-frame drop-tail queue into the receiver. What must
hold on any host: every flow moves data; the flows together never beat the
link; the queue fills, frames are lost and the senders' kernels resend them;
and the engine, given the lab's numbers, sees the same kind of incast: a
full queue, losses of the same order, flows that all get a share. How close
the goodputs come is held only when the host kept up (a busy host starves
the senders and the lab then says so under its table: `bent`)."""

import pytest

from harness import REPO
from harness.labs import built
from runs.incast_beside import incast_beside
from topologies.fabric import load_fabric

pytestmark = [pytest.mark.privileged]

QUEUE = 64


def test_an_incast_with_real_tcp_beside_the_packet_engine(tmp_path_factory):
    fabric = load_fabric(REPO / "topologies" / "incast.yaml")
    with built(fabric, tmp_path_factory) as lab:
        record = incast_beside(lab, 16, 10)
    lab_, engine = record["lab"], record["engine"]
    print({k: (lab_[k], engine[k]) for k in ("goodput_share", "jain", "loss_fraction",
                                              "retransmit_fraction", "queue_mean_packets")},
          record["bent"])
    assert all("error" not in f and f["bytes"] > 0 for f in lab_["flows"]), lab_["flows"]
    # the link's payload rate is the ceiling (its 1 ms bucket is 0.01% of 10 s)
    assert lab_["goodput_share"] <= 1.001 and engine["goodput_share"] <= 1.001
    # drop-tail at work on both sides: a queue mostly full (the lab's sampled
    # every 0.1 s, so its peak may fall between samples), losses, each resent
    for side in (lab_, engine):
        assert side["queue_peak_packets"] > QUEUE / 2 and side["queue_mean_packets"] > QUEUE / 3
        assert side["loss_fraction"] > 0.005
    assert engine["queue_peak_packets"] == QUEUE
    assert lab_["retransmits"] >= 0.9 * lab_["lost"]
    # losses of the same order: Reno halves its window per loss, so the loss
    # rate is set by the windows a 64-frame queue leaves 16 flows
    ratio = lab_["loss_fraction"] / engine["loss_fraction"]
    assert 1 / 3 < ratio < 3, ratio
    # shared, if not evenly over 10 s: a flow whose retransmission is lost
    # waits out a backed-off timeout (the lab's Jain read 0.77-0.99 over runs)
    assert lab_["jain"] > 0.6 and engine["jain"] > 0.6
    assert engine["goodput_share"] > 0.9
    if not record["bent"]:
        assert abs(lab_["goodput_share"] - engine["goodput_share"]) < 0.1
