"""sim/training_step.py against hand-worked references: nothing expected here is
computed with the module's own functions or constants.

The plan used throughout (float gradients, 4 bytes a parameter, bucket
8,000 bytes):

    layer  params  fwd ms  bwd ms  gradient bytes
      0     1000    250     500      4000
      1     5000    250     500     20000
      2      500    125     250      2000
      3     1500    125     250      6000

Backward order fills the buckets: layer 3's 6,000 bytes and layer 2's 2,000
close bucket 0 (layers 2, 3); layer 1's 20,000 bytes fill buckets 1 and 2
alone and leave 4,000 bytes, which layer 0's 4,000 join in bucket 3 (layers
0, 1). Every bucket holds 8,000 bytes.

Compute: forward 0.25 + 0.25 + 0.125 + 0.125 = 0.75 s, then backward of
layer 3 (0.75-1.0), 2 (1.0-1.25), 1 (1.25-1.75), 0 (1.75-2.25): 2.25 s in
all. With overlap a bucket is launched when the backward pass of its lowest
layer ends: bucket 0 at 1.25, buckets 1 and 2 at 1.75, bucket 3 at 2.25.
Each collective alone takes (by bucket) 0.25, 0.5, 0.25, 0.125 s; all the
times are binary fractions, so the fluid model's arithmetic is exact.

Mutants these tests leave alive are equivalent: plan_step's second bucket
count check cannot fire (buckets are packed contiguously, so there are never
more than the first check's ceil(total / bucket)); parse_size reads `whole`
only for its truth; summarise never reads its plan; union_seconds adds 0
either way when a span ends where the covered time does; and a collective
whose work left lands exactly on the 1e-9 tolerance finishes at most 1e-9 of
its time apart.
"""

import pytest

from toolkit.validators import normalise
from toolkit.errors import FabricError
from sim import training_step as T

ALONE = {0: 0.25, 1: 0.5, 2: 0.25, 3: 0.125}
LAYERS = [{"params": 1000, "fwd_ms": 250, "bwd_ms": 500},
          {"params": 5000, "fwd_ms": 250, "bwd_ms": 500},
          {"params": 500, "fwd_ms": 125, "bwd_ms": 250},
          {"params": 1500, "fwd_ms": 125, "bwd_ms": 250}]


def section(**keys) -> dict:
    return normalise(keys, T.STEP_SCHEMA, "experiment.step", "t.yaml")


def four(**keys) -> T.Plan:
    return T.plan_step(section(layers=LAYERS, bucket=8000, **keys))


def alone(c: dict) -> float:
    return ALONE[c["bucket"]]


def exact(x: float):
    return pytest.approx(x, rel=0, abs=1e-12)


def refused(message: str, **keys) -> None:
    with pytest.raises(FabricError) as exc:
        section(**keys)
    assert str(exc.value) == f"t.yaml: experiment.step.{message}"


def step_error(**keys) -> T.StepError:
    with pytest.raises(T.StepError) as exc:
        T.plan_step(section(**keys))
    return exc.value


# --- the plan: buckets, collectives, compute tasks -------------------------------------

def test_buckets_fill_in_backward_order_by_hand():
    plan = four()
    assert [(b.index, b.layers, b.bytes) for b in plan.buckets] == [
        (0, (2, 3), 8000), (1, (1,), 8000), (2, (1,), 8000), (3, (0, 1), 8000)]


def test_data_parallel_plans_an_allreduce_per_bucket_and_its_compute_tasks():
    plan = four()
    assert plan.collectives == [
        {"id": k, "name": f"bucket {k} allreduce", "collective": "allreduce", "bytes": 8000,
         "bucket": k} for k in range(4)]
    assert plan.initial == []
    fwd = [0.25, 0.25, 0.125, 0.125]
    assert plan.compute == (
        [{"name": f"forward {i}", "kind": "forward", "layer": i, "seconds": fwd[i],
          "needs": [], "releases": []} for i in range(4)]
        + [{"name": "backward 3", "kind": "backward", "layer": 3, "seconds": 0.25,
            "needs": [], "releases": []},
           {"name": "backward 2", "kind": "backward", "layer": 2, "seconds": 0.25,
            "needs": [], "releases": [0]},
           {"name": "backward 1", "kind": "backward", "layer": 1, "seconds": 0.5,
            "needs": [], "releases": [1, 2]},
           {"name": "backward 0", "kind": "backward", "layer": 0, "seconds": 0.5,
            "needs": [], "releases": [3]}])


def test_without_overlap_the_last_backward_task_releases_every_bucket():
    plan = four(overlap=False)
    assert [t["releases"] for t in plan.compute] == [[], [], [], [], [], [], [], [0, 1, 2, 3]]
    assert all(t["needs"] == [] for t in plan.compute)


def test_sharded_gathers_in_forward_order_and_each_forward_waits_for_its_own():
    """Reduce-scatters take ids 0-3 (bucket order); the gathers follow in
    forward order: bucket 3 (layer 0 first), then layer 1's buckets, bucket 2
    before bucket 1 (it holds layer 1's earlier parameters: it was filled
    later), then bucket 0: ids 4, 5, 6, 7 for buckets 3, 2, 1, 0."""
    plan = four(mode="sharded")
    assert plan.collectives == (
        [{"id": k, "name": f"bucket {k} reducescatter", "collective": "reducescatter",
          "bytes": 8000, "bucket": k} for k in range(4)]
        + [{"id": 4 + j, "name": f"bucket {b} allgather", "collective": "allgather",
            "bytes": 8000, "bucket": b} for j, b in enumerate([3, 2, 1, 0])])
    assert plan.initial == [4, 5, 6, 7]
    # gathers of the buckets holding each layer: 0 in bucket 3; 1 in 1, 2, 3; 2 and 3 in 0
    assert [t["needs"] for t in plan.compute] == [[4], [6, 5, 4], [7], [7], [], [], [], []]
    assert [t["releases"] for t in plan.compute] == [[], [], [], [], [], [0], [1, 2], [3]]
    assert [t["name"] for t in plan.compute] == [
        "forward 0", "forward 1", "forward 2", "forward 3",
        "backward 3", "backward 2", "backward 1", "backward 0"]
    assert [t["kind"] for t in plan.compute] == ["forward"] * 4 + ["backward"] * 4


def test_sharded_without_overlap_the_first_forward_waits_for_every_gather():
    plan = four(mode="sharded", overlap=False)
    assert [t["needs"] for t in plan.compute] == [[4, 5, 6, 7], [], [], [], [], [], [], []]
    assert [t["releases"] for t in plan.compute] == [[]] * 7 + [[0, 1, 2, 3]]


# --- the timeline, worked by hand -------------------------------------------------------

COMPUTE_SPANS = [("forward", 0, 0.0, 0.25), ("forward", 1, 0.25, 0.5),
                 ("forward", 2, 0.5, 0.625), ("forward", 3, 0.625, 0.75),
                 ("backward", 3, 0.75, 1.0), ("backward", 2, 1.0, 1.25),
                 ("backward", 1, 1.25, 1.75), ("backward", 0, 1.75, 2.25)]


def spans(result):
    return [(s["kind"], s["layer"], s["start"], s["end"]) for s in result["compute"]]


def test_one_in_flight_with_overlap_by_hand():
    """Bucket 0: 1.25-1.5. Buckets 1 and 2 launch at 1.75: 1 runs 1.75-2.25,
    2 waits and runs 2.25-2.5; bucket 3 launches at 2.25 and runs 2.5-2.625.
    Step 2.625 s; compute 2.25; the network busy 0.25 + 0.875 = 1.125 s;
    exposed 0.375; overlap efficiency 1 - 0.375 / 1.125 = 2/3."""
    result = T.timeline(four(), alone)
    assert set(result) == {"step_s", "compute_s", "comm_s", "exposed_s", "overlap_efficiency",
                           "compute", "collectives"}
    assert spans(result) == COMPUTE_SPANS
    assert result["compute"][0] == {"kind": "forward", "layer": 0, "start": 0.0, "end": 0.25}
    times = [(1.25, 1.25, 1.5), (1.75, 1.75, 2.25), (1.75, 2.25, 2.5), (2.25, 2.5, 2.625)]
    assert result["collectives"] == [
        {"id": k, "name": f"bucket {k} allreduce", "collective": "allreduce", "bytes": 8000,
         "bucket": k, "launch": times[k][0], "start": times[k][1], "finish": times[k][2],
         "alone_s": ALONE[k]} for k in range(4)]
    assert result["step_s"] == 2.625 and result["compute_s"] == 2.25
    assert result["comm_s"] == 1.125 and result["exposed_s"] == 0.375
    assert result["overlap_efficiency"] == pytest.approx(2 / 3)


def test_two_in_flight_share_the_fabric_by_hand():
    """Buckets 1 and 2 start together at 1.75, each at half speed: bucket 2's
    0.25 s of work ends at 2.25, when bucket 1 has 0.25 s left and bucket 3
    (0.125 s) is launched and starts beside it; bucket 3 ends at 2.5, bucket 1
    then has 0.125 s left alone and ends at 2.625. Exact: binary fractions."""
    result = T.timeline(four(in_flight=2), alone)
    assert spans(result) == COMPUTE_SPANS
    got = [(c["bucket"], c["launch"], c["start"], c["finish"]) for c in result["collectives"]]
    assert got == [(0, 1.25, 1.25, exact(1.5)), (1, 1.75, 1.75, exact(2.625)),
                   (2, 1.75, 1.75, exact(2.25)), (3, exact(2.25), exact(2.25), exact(2.5))]
    assert result["step_s"] == exact(2.625) and result["comm_s"] == exact(1.125)
    assert result["exposed_s"] == exact(0.375)


@pytest.mark.parametrize("scale", [1e-10, 1e-6, 1.0, 1e3])
def test_the_fluid_model_has_no_unit_of_its_own(scale):
    """The same plan with every time scaled (compute and collectives alike)
    gives the same timeline scaled: 0.1 ns collectives are not finished
    early, nor 1,000 s ones late."""
    layers = [{**l, "fwd_ms": l["fwd_ms"] * scale, "bwd_ms": l["bwd_ms"] * scale}
              for l in LAYERS]
    plan = T.plan_step(section(layers=layers, bucket=8000, in_flight=2))
    result = T.timeline(plan, lambda c: ALONE[c["bucket"]] * scale)
    got = [(c["bucket"], c["start"] / scale, c["finish"] / scale)
           for c in result["collectives"]]
    assert got == [(0, pytest.approx(1.25), pytest.approx(1.5)),
                   (1, pytest.approx(1.75), pytest.approx(2.625)),
                   (2, pytest.approx(1.75), pytest.approx(2.25)),
                   (3, pytest.approx(2.25), pytest.approx(2.5))]
    assert result["step_s"] / scale == pytest.approx(2.625)


def test_two_in_flight_a_short_collective_does_not_end_the_long_one():
    """1 us and 10 us of work started together at half speed each: the
    short one ends after 2 us, the long one has 9 us left alone and ends 9 us
    later."""
    plan = T.plan_step(section(layers=[{"params": 1000, "fwd_ms": 0, "bwd_ms": 0},
                                       {"params": 1000, "fwd_ms": 0, "bwd_ms": 0}],
                               bucket=4000, in_flight=2, overlap=False))
    result = T.timeline(plan, lambda c: {0: 1e-6, 1: 1e-5}[c["bucket"]])
    finish = {c["bucket"]: c["finish"] for c in result["collectives"]}
    assert finish[0] == pytest.approx(2e-6) and finish[1] == pytest.approx(1.1e-5)


def test_without_overlap_the_collectives_follow_the_backward_pass_by_hand():
    """All four launch at 2.25 and run one after another: 2.25-2.5, 2.5-3.0,
    3.0-3.25, 3.25-3.375. Nothing hidden: exposed = comm = 1.125."""
    result = T.timeline(four(overlap=False), alone)
    got = [(c["launch"], c["start"], c["finish"]) for c in result["collectives"]]
    assert got == [(2.25, 2.25, 2.5), (2.25, 2.5, 3.0), (2.25, 3.0, 3.25), (2.25, 3.25, 3.375)]
    assert (result["step_s"], result["compute_s"], result["comm_s"], result["exposed_s"]) == (
        3.375, 2.25, 1.125, 1.125)
    assert result["overlap_efficiency"] == 0.0


def test_sharded_timeline_by_hand():
    """Gathers (launched at 0, in forward order, alone times by bucket):
    bucket 3 0-0.125, bucket 2 0.125-0.375, bucket 1 0.375-0.875, bucket 0
    0.875-1.125. Forward 0 waits for bucket 3's gather (0.125-0.375),
    forward 1 for buckets 1-3 (0.875-1.125), forwards 2 and 3 then run
    1.125-1.375; backward 3 1.375-1.625, 2 until 1.875 (reduce-scatter of
    bucket 0: 1.875-2.125), 1 until 2.375 (buckets 1 and 2), 0 until 2.875
    (bucket 3). Bucket 1 runs 2.375-2.875, 2 2.875-3.125, 3 3.125-3.25.
    Step 3.25, compute 2.25, network 1.125 + 0.25 + 0.875 = 2.25, exposed 1,
    efficiency 1 - 1/2.25 = 5/9."""
    result = T.timeline(four(mode="sharded"), alone)
    assert spans(result) == [("forward", 0, 0.125, 0.375), ("forward", 1, 0.875, 1.125),
                             ("forward", 2, 1.125, 1.25), ("forward", 3, 1.25, 1.375),
                             ("backward", 3, 1.375, 1.625), ("backward", 2, 1.625, 1.875),
                             ("backward", 1, 1.875, 2.375), ("backward", 0, 2.375, 2.875)]
    got = [(c["id"], c["collective"], c["bucket"], c["launch"], c["start"], c["finish"])
           for c in result["collectives"]]
    assert got == [(4, "allgather", 3, 0.0, 0.0, 0.125), (5, "allgather", 2, 0.0, 0.125, 0.375),
                   (6, "allgather", 1, 0.0, 0.375, 0.875), (7, "allgather", 0, 0.0, 0.875, 1.125),
                   (0, "reducescatter", 0, 1.875, 1.875, 2.125),
                   (1, "reducescatter", 1, 2.375, 2.375, 2.875),
                   (2, "reducescatter", 2, 2.375, 2.875, 3.125),
                   (3, "reducescatter", 3, 2.875, 3.125, 3.25)]
    assert (result["step_s"], result["compute_s"], result["comm_s"], result["exposed_s"]) == (
        3.25, 2.25, 2.25, 1.0)
    assert result["overlap_efficiency"] == pytest.approx(5 / 9)


def test_free_communication_is_perfectly_overlapped():
    """Collectives that take no time: the step is its compute, nothing is
    exposed, and the overlap efficiency is 1 (not 0/0)."""
    result = T.timeline(four(), lambda c: 0.0)
    assert (result["step_s"], result["comm_s"], result["exposed_s"]) == (2.25, 0.0, 0.0)
    assert result["overlap_efficiency"] == 1.0
    assert [c["finish"] for c in result["collectives"]] == [1.25, 1.75, 1.75, 2.25]


def test_a_plan_that_waits_for_a_collective_never_launched_is_a_bug_said_so():
    plan = T.Plan([T.Layer(1, 0.1, 0.2)], [], "allreduce", True, 1, "float",
                  compute=[{"name": "forward 0", "kind": "forward", "layer": 0, "seconds": 0.1,
                            "needs": [0], "releases": []}],
                  collectives=[{"id": 0, "name": "bucket 0 allreduce", "collective": "allreduce",
                                "bytes": 4, "bucket": 0}])
    with pytest.raises(RuntimeError) as exc:
        T.timeline(plan, lambda c: 1.0)
    assert str(exc.value) == "the step's plan waits forever"


def test_bounds_by_hand():
    """Compute 2.25 s: with 1.125 s of communication, overlap on lies
    between 2.25 (the larger) and 3.375 (the sum); with 3 s between 3 and
    5.25; overlap off is the sum exactly."""
    assert T.bounds(four(), 1.125) == (2.25, 3.375)
    assert T.bounds(four(), 3.0) == (3.0, 5.25)
    assert T.bounds(four(overlap=False), 1.125) == (3.375, 3.375)


# --- compute from the description --------------------------------------------------------

def test_a_layers_own_fwd_ms_wins_over_the_steps_and_flops():
    """Layer 0 gives 5 ms (backward twice: 10 ms); layer 1 counts FLOPs:
    2 x 3000 params x 500 tokens = 3e6 FLOPs forward at 1e6 FLOP/s (1e-6
    TFLOP/s) is 3 s, backward 6 s."""
    plan = T.plan_step(section(layers=[{"params": 1000, "fwd_ms": 5}, {"params": 3000}],
                               gpu_tflops=1e-6, tokens=500))
    # a TFLOP/s is 1e12 FLOP/s exactly: a few roundings away, not 1e-12 of it
    assert [(l.params, l.fwd_s, l.bwd_s) for l in plan.layers] == [
        (1000, pytest.approx(0.005, rel=1e-14), pytest.approx(0.010, rel=1e-14)),
        (3000, pytest.approx(3.0, rel=1e-14), pytest.approx(6.0, rel=1e-14))]
    given = T.plan_step(section(layers=[{"params": 10, "fwd_ms": 3}, {"params": 10}], fwd_ms=7))
    assert [(l.fwd_s, l.bwd_s) for l in given.layers] == [
        (pytest.approx(0.003), pytest.approx(0.006)), (pytest.approx(0.007), pytest.approx(0.014))]


def test_a_layers_own_bwd_ms_wins_over_the_steps():
    """Backward: the layer's own bwd_ms, else the step's, else twice the
    layer's forward time."""
    plan = T.plan_step(section(layers=[{"params": 10, "fwd_ms": 3, "bwd_ms": 4},
                                       {"params": 10, "fwd_ms": 3}, {"params": 10}],
                               fwd_ms=7, bwd_ms=9))
    assert [(l.fwd_s, l.bwd_s) for l in plan.layers] == [
        (pytest.approx(0.003), pytest.approx(0.004)), (pytest.approx(0.003), pytest.approx(0.009)),
        (pytest.approx(0.007), pytest.approx(0.009))]


def test_as_many_parameters_as_layers_is_one_each():
    plan = T.plan_step(section(layers=8, params=8))
    assert [l.params for l in plan.layers] == [1] * 8


# --- one-sentence refusals ----------------------------------------------------------------

def test_step_errors_name_their_key():
    err = T.StepError("bucket", "too small")
    assert (err.key, err.detail, str(err)) == ("bucket", "too small", "bucket: too small")
    assert str(T.StepError(None, "no key at fault")) == "no key at fault"


@pytest.mark.parametrize("keys,key,detail", [
    ({"layers": [{"params": 5}], "params": 10}, "params",
     "the layers are listed with their own params; give params with a layer count only"),
    ({"fwd_ms": 3, "gpu_tflops": 100, "tokens": 10}, "gpu_tflops",
     "compute comes from fwd_ms or from gpu_tflops and tokens, not both"),
    ({"gpu_tflops": 100}, "gpu_tflops", "needs tokens (per GPU per step) to count the FLOPs"),
    ({"tokens": 100}, "tokens",
     "counts FLOPs only with gpu_tflops (a GPU's rate); give both, or fwd_ms"),
    ({"params": 999, "layers": 1000}, "params", "999 parameters cannot fill 1000 layers"),
    ({"params": 7, "layers": 8}, "params", "7 parameters cannot fill 8 layers"),
    # 1e12 float parameters: 4e12 bytes / 262,144 = 15,258,789.06... -> 15,258,790 buckets
    ({"params": 10 ** 12}, "bucket", "262,144 bytes cut the gradients (4,000,000,000,000 bytes) "
                                     "into 15,258,790 buckets; at most 256: raise it"),
    # the largest bucket, 1G: 4e13 bytes / 1,073,741,824 = 37,252.9... -> 37,253 buckets
    ({"params": 10 ** 13, "bucket": "1G"}, "bucket",
     "1,073,741,824 bytes cut the gradients (40,000,000,000,000 bytes) into 37,253 buckets; "
     "at most 256: fewer parameters"),
])
def test_impossible_steps_are_refused_in_one_sentence(keys, key, detail):
    err = step_error(**keys)
    assert (err.key, err.detail, str(err)) == (key, detail, f"{key}: {detail}")


LAYERS_EXPECTED = ("expected a layer count from 1 to 1000, or a list of 1 to 1000 layers each "
                   "{params, fwd_ms, bwd_ms}, got ")
PARAMS_EXPECTED = "expected a parameter count from 1 to 1e13 (such as 1.3e9, 70B or 512k), got "


@pytest.mark.parametrize("layers,message", [
    ("x", LAYERS_EXPECTED + "'x'"),
    ([], LAYERS_EXPECTED + "[]"),
    (2.5, LAYERS_EXPECTED + "2.5"),
    ([{"fwd_ms": 3}], "layer 1: expected a mapping with params and, optionally, fwd_ms and "
                      "bwd_ms, got {'fwd_ms': 3}"),
    ([{"params": 4}, 7], "layer 2: expected a mapping with params and, optionally, fwd_ms and "
                         "bwd_ms, got 7"),
    ([{"params": 4, "bwd": 2}], "layer 1: unknown key 'bwd'; expected params, fwd_ms, bwd_ms"),
    ([{"params": 10}, {"params": 10, "fwd_ms": -1}],
     "layer 2: fwd_ms: expected a number from 0 to 1e+06 (ms), got -1"),
    ([{"params": 10, "bwd_ms": 2e6}],
     "layer 1: bwd_ms: expected a number from 0 to 1e+06 (ms), got 2000000.0"),
    ([{"params": 0}], "layer 1: params: " + PARAMS_EXPECTED + "0"),
])
def test_a_bad_layer_list_is_refused_in_one_sentence(layers, message):
    refused(f"layers: {message}", layers=layers)


def test_a_thousand_layers_are_the_most():
    assert len(section(layers=[{"params": 1}] * 1000)["layers"]) == 1000
    with pytest.raises(FabricError) as exc:
        section(layers=[{"params": 1}] * 1001)
    assert str(exc.value).startswith("t.yaml: experiment.step.layers: " + LAYERS_EXPECTED)


@pytest.mark.parametrize("params,message", [
    ("1.5x", PARAMS_EXPECTED + "'1.5x'"),
    (0, PARAMS_EXPECTED + "0"),
    ("0.4", PARAMS_EXPECTED + "'0.4'"),
    (10 ** 13 + 1, PARAMS_EXPECTED + "10000000000001"),
    (2e13, PARAMS_EXPECTED + "20000000000000.0"),
])
def test_a_bad_parameter_count_is_refused_in_one_sentence(params, message):
    refused(f"params: {message}", params=params)


@pytest.mark.parametrize("params,count", [
    (1, 1), (10 ** 13, 10 ** 13), (1e13, 10 ** 13), ("0.6", 1), ("1K", 1000), ("1Ki", 1024), (2.5e3, 2500)])
def test_parameter_counts_from_1_to_1e13_are_taken(params, count):
    assert section(params=params)["params"] == count


def test_256_buckets_are_the_most_and_counted_before_any_is_made(monkeypatch):
    """16,777,216 float parameters are 64 MiB: 256 buckets of 256 KiB, taken;
    one more parameter needs a 257th, refused before a bucket is built."""
    plan = T.plan_step(section(params=16_777_216))
    assert len(plan.buckets) == 256 and {b.bytes for b in plan.buckets} == {262_144}

    def never(*args):
        raise AssertionError("buckets built for a step refused by their count")
    monkeypatch.setattr(T, "make_buckets", never)
    err = step_error(params=16_777_217)
    assert str(err) == ("bucket: 262,144 bytes cut the gradients (67,108,868 bytes) into 257 "
                        "buckets; at most 256: raise it")


def test_the_plan_names_its_datatype():
    plan = T.plan_step(section(layers=2, params=1000), "bf16")
    assert plan.dtype == "bfloat16" and [b.bytes for b in plan.buckets] == [2000]
    assert T.plan_step(section(layers=2, params=1000)).dtype == "float"
