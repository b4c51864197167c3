"""rails.share: the median over ECMP draws of the ideal time over the
simulated one, at most 1, and 1 on one server; checked with made-up times per
draw (so the median and the clamp are read off by hand) and on fabrics where
nothing can collide. rails.alltoall_share_on: NCCL's order of servers and
peers in flight, the flow model's own figure for the whole AllToAll, and
where PXN's rail-to-rail pattern crosses the spines."""

from __future__ import annotations

import statistics
from types import SimpleNamespace

import pytest

from sim.clos import ClosNetwork, ClosShape
from sim.nccl import rails
from sim.steps import transfer_times
from topologies.hardware import SERVERS


def fake_fabric(monkeypatch, seconds_by_seed, ideal=1.0):
    """Times per ECMP seed instead of the simulator's; what the phases were asked for."""
    asked = {}

    def phases(algorithm, n, count, local, channels=1):
        asked.update(algorithm=algorithm, n=n, local=local, channels=channels)
        return [SimpleNamespace(name="intra-rs"), SimpleNamespace(name="inter-0"),
                SimpleNamespace(name="inter-1")]

    monkeypatch.setattr(rails, "allreduce_phases", phases)
    monkeypatch.setattr(rails, "ClosNetwork", lambda shape, seed=None: seed)

    def seconds(seed, ph, with_latency=True):
        assert [p.name for p in ph] == ["inter-0", "inter-1"]    # the inter-server part only
        assert not with_latency                                  # bandwidth alone
        return seconds_by_seed[seed]

    monkeypatch.setattr(rails, "phase_seconds", seconds)
    monkeypatch.setattr(rails, "ideal_seconds", lambda shape, ph: ideal)
    return asked


def test_share_is_the_median_of_five_draws_by_default(monkeypatch):
    # ideal 1 s over 1, 2, 4, 0.5, 1.25 s: 1, 0.5, 0.25, 2, 0.8 -> median 0.8
    asked = fake_fabric(monkeypatch, {0: 1.0, 1: 2.0, 2: 4.0, 3: 0.5, 4: 1.25})
    shape = ClosShape(servers=2, gpus=8, nics=8, down=16, up=16)
    assert rails.share(shape) == pytest.approx(0.8)
    assert asked == {"algorithm": "hierarchical", "n": 16, "local": 8, "channels": 1}
    rails.share(shape, connections=4, seeds=3)
    assert asked["channels"] == 4


def test_share_over_three_draws_and_its_clamp_to_one(monkeypatch):
    fake_fabric(monkeypatch, {0: 4.0, 1: 2.0, 2: 1.0})
    shape = ClosShape(servers=3, gpus=8, nics=8, down=16, up=16)
    assert rails.share(shape, seeds=3) == pytest.approx(0.5)       # 0.25, 0.5, 1
    fake_fabric(monkeypatch, {0: 0.25, 1: 0.25, 2: 0.5})
    assert rails.share(shape, seeds=3) == 1.0                      # 4, 4, 2: at most 1


def test_one_server_is_one_whatever_the_fabric(monkeypatch):
    fake_fabric(monkeypatch, {})
    assert rails.share(ClosShape(servers=1, gpus=8, nics=8, down=16, up=16)) == 1.0


@pytest.mark.parametrize("nics,nic_bps", [(4, 400e9), (8, 4000e9)])
def test_shared_nics_or_nics_past_nvlink_on_a_rail_fabric_never_collide(nics, nic_bps):
    # two GPUs behind each NIC, or NICs faster than NVLink: nothing collides on a rail
    # fabric, so the real time is the ideal one
    shape = ClosShape(servers=4, gpus=8, nics=nics, down=16, up=16, wiring="rail",
                      nic_bps=nic_bps, intra_bps=3600e9)
    assert rails.share(shape, 1, seeds=2) == 1.0


def test_where_gpus_share_a_nic_the_ideal_is_each_nic_carrying_two_rings():
    # 8 GPUs, 4 NICs: each NIC carries two rail rings' blocks, so the ideal time (an
    # unlimited fabric) is twice steps x block bytes x 8 / NIC rate; the real Clos (leaves of
    # 16 NICs and 8 uplinks, ECMP across them) is slower
    from sim.phases import allreduce_phases
    shape = ClosShape(servers=16, gpus=8, nics=4, down=16, up=8, wiring="server")
    phases = [p for p in allreduce_phases("hierarchical", shape.n, 1 << 20, 8)
              if p.name.startswith("inter")]
    one_ring = sum(p.steps * p.elements * 4 * 8 / 400e9 for p in phases)
    assert rails.ideal_seconds(shape, phases) == pytest.approx(2 * one_ring, rel=1e-9)
    assert 0 < rails.share(shape, 1, seeds=3) < 1


def test_nccl_visits_the_other_servers_in_its_quadratic_order():
    # init.cc's own example for 16: 0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8
    assert rails.server_offsets(16) == [1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8]
    for servers in (2, 3, 12, 100):               # every other server once, itself never
        assert sorted(rails.server_offsets(servers)) == list(range(1, servers))


def test_nccl_keeps_a_hundred_and_twenty_eight_peers_in_flight_on_h100():
    # 16 execution channels of 8 x 400G H100, 8 peers each: 16 servers at once
    assert rails.p2p_peers(SERVERS["hgx-h100"], 16) == 128


def alltoall_by_the_flow_model(shape: ClosShape, connections: int, seed: int) -> float:
    """The ideal time over the AllToAll's, every transfer at once (one window),
    timed by transfer_times itself: every NIC k to NIC k of each other server."""
    g, m = shape.gpus, shape.servers
    transfers = [(a * g + k, b * g + k, f, 1e6) for a in range(m) for b in range(m) if b != a
                 for k in range(g) for f in range(connections)]
    done = transfer_times(ClosNetwork(shape, seed), transfers, with_latency=False)
    ideal = (m - 1) * connections * 1e6 / shape.nic_bps
    return min(1.0, ideal / max(t for t, _ in done.values()))


@pytest.mark.parametrize("routing", ["hash", "dmodk", "split"])
@pytest.mark.parametrize("up", [4, 2, 1])
def test_the_alltoall_share_is_the_flow_models(routing, up):
    """One window holding every server (peers enough): the share is what
    max-min sharing gives the whole AllToAll, ends and all, seed by seed."""
    shape = ClosShape(servers=8, gpus=4, nics=4, down=4, up=up, wiring="server",
                      routing=routing, radix=4)
    for seed in range(3):
        assert rails.alltoall_share_on(lambda s: ClosNetwork(shape, s), shape.n, 4, 4,
                                       shape.nic_bps, peers=28, connections=2,
                                       seeds=1 + seed) == pytest.approx(
            statistics.median(alltoall_by_the_flow_model(shape, 2, s)
                              for s in range(1 + seed)), rel=1e-9)


@pytest.mark.parametrize("routing", ["hash", "dmodk", "split"])
def test_alltoall_crosses_the_spines_between_rail_units_only(routing):
    """PXN keeps each NIC on its rail: within one rail-optimized unit no spine
    is crossed, whatever their number; across 4 units of 4 servers 12 of the
    15 others are elsewhere, so 2:1 and 4:1 leave 5/8 and 5/16 of a NIC."""
    def share(units, per_unit, up):
        shape = ClosShape(servers=16, gpus=8, nics=8, down=per_unit, up=up, wiring="rail",
                          routing=routing, radix=4)
        assert shape.leaves == 8 * units
        return rails.alltoall_share_on(lambda s: ClosNetwork(shape, s), shape.n, 8, 8,
                                       shape.nic_bps, peers=128, connections=2, seeds=3)
    assert share(1, 16, 4) == 1.0
    assert share(4, 4, 2) == pytest.approx(5 / 8, rel=0.15 if routing == "hash" else 1e-9)
    assert share(4, 4, 1) == pytest.approx(5 / 16, rel=1e-9)


def test_without_pxn_each_gpu_crosses_the_rails():
    # 2 GPUs a NIC: no PXN, so a GPU sends to every GPU of the other servers through its own
    # NIC, 3/4 of it to the other 3 rails: over the spines of one rail unit at 4:1, 16 NICs'
    # 3/4 on 4 uplinks, the AllToAll takes 3 times the ideal
    shape = ClosShape(servers=16, gpus=8, nics=4, down=16, up=4, wiring="rail", routing="split",
                      radix=4)
    assert rails.alltoall_share_on(lambda s: ClosNetwork(shape, s), shape.n, 8, 4,
                                   shape.nic_bps, peers=128) == pytest.approx(1 / 3, rel=1e-9)


def test_alltoall_on_one_server_is_one():
    assert rails.alltoall_share_on(lambda s: None, 8, 8, 8, 400e9, 128) == 1.0
