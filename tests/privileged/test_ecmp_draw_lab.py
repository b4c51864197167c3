"""The same connections draw the same ECMP paths in every experiment of a
lab, as nccl-tests' in-place columns run on the out-of-place columns'
connections: each of the rank agents' connections leaves from a source port
fixed by (rank, peer, channel) and the lab (programs/agent.py), so a second
sweep on the lab loads the same uplinks as the first. Under ECMP with one
connection a peer on a crossing leaf-spine, a fresh draw (the kernel's
ephemeral ports) would put the ring's eight flows on other spines."""

import pytest

from harness.fabrics import crossing_fabric, interleaved
from harness.labs import built
from runs.experiment import Experiment
from runs.measured import run_experiment

pytestmark = [pytest.mark.privileged]


def shares(record) -> dict:
    """Each uplink's share of its leaf's bytes towards the spines."""
    out = {}
    for leaf, uplinks in record.uplink_tx_bytes.items():
        total = sum(uplinks.values())
        out.update({intf: sent / total for intf, sent in uplinks.items()})
    return out


def test_two_sweeps_on_one_lab_load_the_same_uplinks(tmp_path_factory, tmp_path):
    fabric = crossing_fabric(4, 20).edited(lambda spec: spec.update(name="draw"))
    exp = Experiment(algorithm="ring", minbytes=256 << 10, maxbytes=256 << 10, iters=2,
                     warmup=1, ranks=interleaved(fabric), idle_seconds=0.2)
    with built(fabric, tmp_path_factory) as lab:
        first = run_experiment(lab, exp, tmp_path / "first")
        second = run_experiment(lab, exp, tmp_path / "second")
    assert first.runs[0]["wrong"] == 0 and second.runs[0]["wrong"] == 0
    a, b = shares(first), shares(second)
    print(a, b)
    # the same uplinks carry the ring, in the same proportions (the probes'
    # and the controller's few packets aside)
    assert {i for i, s in a.items() if s > 0.1} == {i for i, s in b.items() if s > 0.1}, (a, b)
    assert all(abs(a[i] - b[i]) < 0.05 for i in a), (a, b)
