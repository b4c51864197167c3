"""A hybrid training step on a real lab: tensor parallel inside each of 4
servers of 4 GPUs, 2 pipeline stages, data parallel over the 2 servers of a
stage (topologies/hybrid-step.yaml). Every collective's data is right, every
group stays where the layout puts it, the stages run 1F1B, and the step is
what the simulator predicts within 15%."""

import pytest

from harness import TOPOLOGIES
from harness.labs import built
from runs.experiment import experiment_from
from runs.training import run_step
from topologies.fabric import load_fabric

pytestmark = [pytest.mark.privileged, pytest.mark.slow]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    fabric = load_fabric(TOPOLOGIES / "hybrid-step.yaml")
    with built(fabric, tmp_path_factory) as lab:
        exp = experiment_from(lab.fabric, {**lab.fabric.spec["experiment"], "iters": 2,
                                           "warmup": 1})
        yield run_step(lab, exp)


def test_every_collective_is_right(result):
    assert result["wrong"] == 0
    assert all(r["wrong"] == 0 and r["bad_chunk_elements"] == 0 for r in result["runs"])
    kinds = {c["kind"] for c in result["collectives"]}
    assert kinds == {"tp", "pp", "dp"}
    assert len(result["collectives"]) == result["step"]["collectives"]


def passes(result, rank):
    """The rank's passes in order: each is 2 layers x 2 halves, 4 spans of a kind."""
    spans = sorted((e for e in result["timeline"] if e["rank"] == rank
                    and e["lane"] == "compute" and e["kind"] in ("forward", "backward")),
                   key=lambda e: e["start"])
    letters = "".join(e["kind"][0].upper() for e in spans)
    assert len(letters) == 4 * 8
    return letters[::4]


def test_the_stages_run_one_forward_one_backward(result):
    """Stage 0 runs one forward ahead (p - s - 1 = 1), then alternates; stage 1
    alternates from the first."""
    for rank in range(8):
        assert passes(result, rank) == "FFBFBFBB"
    for rank in range(8, 16):
        assert passes(result, rank) == "FBFBFBFB"


def test_the_gradients_are_reduced_after_the_last_backward_pass(result):
    for rank in range(16):
        mine = [e for e in result["timeline"] if e["rank"] == rank]
        last = max(e["end"] for e in mine if e["lane"] == "compute" and e["kind"] == "backward")
        dp = [e for e in mine if e["lane"] == "comm" and e["kind"] == "dp"]
        assert len(dp) == 1 and dp[0]["launch"] >= last - 1e-3


def test_measured_is_what_the_simulator_predicts_within_15_percent(result):
    ratio = result["measured_over_predicted"]
    print(f"measured/simulated {ratio:.3f}")
    assert 0.85 <= ratio <= 1.15, (ratio, result["summary"], result["predicted"])
