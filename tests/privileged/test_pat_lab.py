"""NCCL's PAT on a real fabric: topologies/leaf-spine-4x4.yaml (8 servers
of one GPU on 4 leaves, as NCCL runs PAT only with one GPU a server),
AllGather and ReduceScatter at two sizes each through the rank agents with
checked data, the simulator beside every size; and -a auto weighing PAT
against the ring by the run's own costs. Nothing here depends on how fast
the host is: the data, what ran, what was weighed, the schedule's bytes,
and that the simulator gave its time (not how close)."""

import pytest

from harness import TOPOLOGIES
from harness.labs import built
from runs.experiment import Experiment
from runs.measured import run_experiment
from topologies.fabric import load_fabric

FABRIC = TOPOLOGIES / "leaf-spine-4x4.yaml"
SIZES = (64 << 10, 256 << 10)           # 4 x apart: two sizes a sweep
N = 8


def experiment(collective, algorithm, sizes=SIZES):
    return Experiment(collective=collective, algorithm=algorithm, minbytes=sizes[0],
                      maxbytes=sizes[-1], stepfactor=4, iters=2, warmup=1, idle_seconds=0.2,
                      piece_bytes=16 << 10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    fabric = load_fabric(FABRIC)
    assert fabric.gpus_per_server == 1 and len(fabric.endpoints) == N
    with built(fabric, tmp_path_factory) as running:
        yield running


@pytest.mark.parametrize("collective", ["allgather", "reducescatter"])
def test_pat_moves_the_right_data_and_is_simulated_beside(lab, tmp_path, collective):
    result = run_experiment(lab, experiment(collective, "pat"), tmp_path)
    assert [r["size_bytes"] for r in result.runs] == list(SIZES)
    for run in result.runs:
        assert run["algorithm"] == "pat" and run["ranks"] == N
        assert run["wrong"] == 0 and run["bad_chunk_elements"] == 0, run
        assert run["measured_over_simulated"] is not None, run.get("simulation_error")
        assert run["simulated_s"] > 0 and run["predicted_s"] > 0
        # every rank receives the ring's 7/8 of the buffer an iteration, all
        # of it between servers (what the links' 100 ms samples attribute to
        # a size this short depends on the host's timing: not checked here)
        share = run["size_bytes"] * 7 / 8 * run["iterations"]
        assert run["payload_bytes"] == {"intra": 0, "inter": N * share}


def test_auto_weighs_pat_against_the_ring_on_one_gpu_servers(lab, tmp_path):
    """By the run's own costs PAT's 3 steps beat the ring's 7 with the same
    bytes; the one that ran is the quicker of the two weighed."""
    result = run_experiment(lab, experiment("allgather", "auto", SIZES[:1]), tmp_path)
    (run,) = result.runs
    weighed = run["auto"]["predicted_s"]
    assert set(weighed) == {"ring", "pat"}
    assert run["algorithm"] == min(weighed, key=weighed.get) == "pat"
    assert run["auto"]["nccl"] == "pat"
    assert run["wrong"] == 0 and run["measured_over_simulated"] is not None
