"""Training steps and data types on a real lab: with overlap off a step
takes its compute plus its communication; with overlap on never less than
the larger of the two, and far less exposed communication; buckets launch in
backward order, several run at once when allowed, sharded steps gather each
bucket before its forward pass; every collective's data is right, in every
type and op."""

import csv
import json

import pytest

from harness.commands import run
from harness.fabrics import leaf_spine
from harness.labs import built
from runs.experiment import experiment_from
from runs.training import run_step

pytestmark = pytest.mark.privileged


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    # the default fabric's shape and rate, its names apart from the command-line runs'
    with built(leaf_spine(2, 2, 2, rate=20, prefix="st"), tmp_path_factory) as lab:
        yield lab


def step(lab, **keys):
    flags = {k: keys.pop(k) for k in ("datatype", "op") if k in keys}
    exp = experiment_from(lab.fabric, {"step": keys, "iters": 2, "warmup": 0, **flags})
    result = run_step(lab, exp)
    assert result["wrong"] == 0 and all(r["bad_chunk_elements"] == 0 for r in result["runs"])
    return result


def test_overlap_off_adds_all_the_communication_and_on_hides_most(lab):
    off, on = step(lab, overlap=False), step(lab, overlap=True)
    for r in off["runs"]:
        # nothing overlaps: every bit of communication is exposed (host overheads only add)
        assert r["step_s"] >= r["compute_s"] + r["comm_s"] * 0.97
        assert r["exposed_s"] >= r["comm_s"] * 0.97
    for r in on["runs"]:
        # the step holds every rank's compute and every rank's collectives
        assert r["step_s"] >= max(r["compute_s"], r["comm_s"])
    assert on["summary"]["exposed_s"] < 0.8 * off["summary"]["exposed_s"]
    assert on["summary"]["overlap_efficiency"] > 0.2 > off["summary"]["overlap_efficiency"]
    # compute stands for itself: 8 layers x (50 + 100) ms, on every rank; a timer may
    # fire late on a busy host, never early, and compute is inside the step
    for result in (off, on):
        assert result["step"]["compute_s"] == pytest.approx(1.2)
        for r in result["runs"]:
            assert r["step_s"] >= r["compute_s"] >= 1.2 - 1e-3, r


def test_buckets_launch_in_backward_order_as_the_backward_pass_makes_them(lab):
    result = step(lab, layers=4, bucket=512 * 1024, fwd_ms=40)     # a layer's gradients each
    collectives = result["collectives"]
    assert [c["bucket"] for c in collectives] == [0, 1, 2, 3]
    assert [result["step"]["buckets"][c["bucket"]]["layers"] for c in collectives] == \
        [[3], [2], [1], [0]]
    forward = 4 * 0.040
    for k, c in enumerate(collectives):        # bucket k: after k + 1 layers' backward
        assert c["launch"] >= forward + (k + 1) * 0.080 - 0.005
        assert c["start"] >= c["launch"] and c["finish"] > c["start"]


def test_with_two_in_flight_collectives_run_at_once(lab):
    result = step(lab, layers=4, bucket=128 * 1024, overlap=False, in_flight=2)
    comm = [e for e in result["timeline"] if e["lane"] == "comm" and e["rank"] == 0]
    comm.sort(key=lambda e: e["start"])
    assert any(b["start"] < a["end"] for a, b in zip(comm, comm[1:])), comm


def test_sharded_steps_gather_each_bucket_before_its_forward_pass(lab):
    result = step(lab, layers=4, bucket=64 * 1024, mode="sharded", datatype="bfloat16",
                  op="avg")
    kinds = sorted({c["collective"] for c in result["collectives"]})
    assert kinds == ["allgather", "reducescatter"]
    layers_of = {b["index"]: b["layers"] for b in result["step"]["buckets"]}
    for rank in range(4):
        mine = [e for e in result["timeline"] if e["rank"] == rank]
        gathered = {int(e["label"]): e["end"] for e in mine if e["kind"] == "allgather"}
        for e in mine:
            if e["kind"] == "forward":
                bucket = next(b for b, ls in layers_of.items() if int(e["label"]) in ls)
                assert e["start"] >= gathered[bucket] - 1e-6


def test_a_step_from_the_command_line_writes_its_table_csv_and_figure(tmp_path, clean_host):
    proc = run("--step", "--layers", "4", "--params", "64Ki", "--bucket", "64K", "-n", "1",
               "-w", "0", "-d", "half", "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "# Training step: 4 layers, 65,536 parameters (131,072 B of half gradients)" \
        in proc.stdout
    assert "Compute stands for itself as time" in proc.stdout
    folder = next(tmp_path.glob("*"))
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["step"]["wrong"] == 0 and summary["step"]["step"]["dtype"] == "half"
    rows = list(csv.DictReader((folder / "step.csv").open()))
    assert [r["kind"] for r in rows] == ["step"] + ["collective"] * 2
    assert [r["wrong"] for r in rows] == ["0"] * 3
    assert (folder / "step.png").stat().st_size > 10_000


@pytest.mark.parametrize("dtype,op", [("bfloat16", "avg"), ("int8", "prod"), ("half", "min"),
                                      ("int32", "max")])
def test_every_type_and_op_is_right_on_the_wire(tmp_path, clean_host, dtype, op):
    proc = run("-d", dtype, "-o", op, "-b", "64K", "-e", "64K", "-n", "1", "-w", "0",
               "-a", "rhd", "--results", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    [record] = json.loads(next(tmp_path.glob("*/summary.json")).read_text())[
        "collectives"]["runs"]
    assert (record["type"], record["redop"], record["wrong"]) == (dtype, op, 0)
    assert record["count"] == 65536 // {"bfloat16": 2, "int8": 1, "half": 2, "int32": 4}[dtype]
