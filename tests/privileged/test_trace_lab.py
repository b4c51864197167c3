"""Each kept real trace (tests/data/traces/gloo-mlp-4 and -8) replayed on a
real lab by the rank agents: compute as the trace measured it, every
operation with real data over its group's ranks (#wrong 0), each
communicator's operations one after the other, and the simulator's
prediction beside it."""

import pytest

from harness import REPO
from harness.labs import built
from runs.experiment import experiment_from
from runs.training import run_step
from topologies.fabric import load_fabric

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

DATA = REPO / "tests" / "data" / "traces"
FABRIC = ("name: trace-lab\nfabric:\n  kind: single-switch\n  servers: 8\n"
          "links:\n  server_leaf: {rate_mbit: 50, queue_packets: 100}\n")


@pytest.fixture(scope="module", params=[4, 8])
def result(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("fabric") / "trace-lab.yaml"
    path.write_text(FABRIC)
    with built(load_fabric(path), tmp_path_factory) as lab:
        exp = experiment_from(lab.fabric, {"step": {"trace": str(DATA / f"gloo-mlp-{request.param}")},
                                           "iters": 1, "warmup": 0})
        yield request.param, run_step(lab, exp)


def test_every_operation_of_the_trace_moves_right_data(result):
    n, r = result
    assert r["wrong"] == 0 and r["runs"][0]["bad_chunk_elements"] == 0
    assert r["step"]["mode"] == "trace" and len(r["ranks"]) == n
    assert len(r["collectives"]) == r["step"]["collectives"] == (12 if n == 4 else 20)
    assert all(0 <= c["launch"] <= c["start"] < c["finish"] for c in r["collectives"])


def test_each_groups_operations_run_in_its_order(result):
    """The DP AllReduces (one communicator) finish in the trace's order, each
    after the one before it has."""
    _, r = result
    reduces = sorted((c for c in r["collectives"] if c["collective"] == "allreduce"),
                     key=lambda c: c["id"])
    assert len(reduces) == 3
    assert all(a["finish"] <= b["finish"] for a, b in zip(reduces, reduces[1:]))


def test_the_simulator_is_beside_it_and_the_compute_is_the_traces(result):
    _, r = result
    p = r["predicted"]["trace"]
    assert p["step_s"] > 0 and r["measured_over_predicted"] > 0
    # compute is the trace's spans as timers: at least what the trace measured
    assert r["summary"]["compute_s"] >= r["step"]["compute_s"] * 0.95
    # at 50 Mbit/s the DP AllReduce of 8.9 MB is what the iteration waits for
    assert max(p["exposed_by_kind_s"], key=p["exposed_by_kind_s"].get) == \
        "allreduce on default_pg"
