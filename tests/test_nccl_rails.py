"""rails.share: the median over ECMP draws of the ideal time over the
simulated one, at most 1, and 1 on one server; checked with made-up times per
draw (so the median and the clamp are read off by hand) and on fabrics where
nothing can collide."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sim.clos import ClosShape
from sim.nccl import rails


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
