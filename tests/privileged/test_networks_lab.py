"""Routing priced the same everywhere: on one leaf-spine, NCCL's model (the
share of a NIC its routing leaves the ring), the flow-level replay and a
real emulated ring AllReduce put single path, ECMP and spraying in the same
order. The crossing placement (4 spines, 2 leaves of 4 servers, ranks
alternating between the leaves) sends every ring hop over the spines: a
single path puts a direction's four flows on one spine, spraying spreads
them over all four, ECMP's draw lands between (the lab's is its own draw,
so ECMP may tie either end; a single path never beats spraying)."""

import pytest

from harness.fabrics import crossing_fabric, interleaved
from harness.labs import built
from runs.experiment import Experiment
from runs.measured import run_experiment
from runs.simulated import nccl_cluster_on, simulate_experiment

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

ORDER = ("single-path", "ecmp", "spray")
SIZE = 1 << 20


def fabric(policy):
    # a server as sold (one GPU a server) so that NCCL's model prices its ring too
    return crossing_fabric(4, 20).edited(lambda spec: (
        spec["routing"].update(policy=policy, entropy=16),
        spec["server"].update(model="hgx-h100"),
        spec.update(name=f"cx{policy[:2]}")))


def experiment(ranks):
    return Experiment(algorithm="ring", minbytes=SIZE, maxbytes=SIZE, iters=2, warmup=1,
                      ranks=ranks, idle_seconds=0.2)


def test_model_replay_and_emulator_rank_the_policies_alike(tmp_path_factory, tmp_path):
    model, replay, lab_s = {}, {}, {}
    for p in ORDER:
        f = fabric(p)
        ranks = interleaved(f)
        model[p] = nccl_cluster_on(f, f.server_model, ranks, 1).fabric_share
        replay[p] = simulate_experiment(f, experiment(ranks)).runs[0]["time_s"]
        with built(f, tmp_path_factory) as lab:
            [r] = run_experiment(lab, experiment(ranks), tmp_path / p).runs
            assert r["wrong"] == 0
            lab_s[p] = r["time_s"]
    # the model's share and the replay's time: strictly in order
    assert model["single-path"] < model["ecmp"] < model["spray"], model
    assert replay["single-path"] > replay["ecmp"] > replay["spray"], replay
    # the lab: a single path at least twice spraying's time (four flows on one spine
    # against one each), ECMP's draw between them
    assert lab_s["single-path"] > 2 * lab_s["spray"], lab_s
    assert lab_s["single-path"] * 1.1 >= lab_s["ecmp"] >= lab_s["spray"] * 0.9, lab_s
    print(f"model {model}\nreplay {replay}\nlab {lab_s}")
