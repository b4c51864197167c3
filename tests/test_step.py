"""A training step's plan and its closed-form timeline (sim/training_step.py):
overlap off takes compute + communication; with overlap a step never takes
less than the larger of the two and, with buckets small enough, comes close
to it; buckets launch in backward order; compute follows FLOPs; a bad step
description is refused in one sentence naming its key."""

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import REPO
from topologies.fabric import load_fabric, parse_fabric
from toolkit.validators import normalise
from toolkit.errors import FabricError
from sim import training_step as T
from runs.experiment import experiment_from, step_plan
from collectives import registry


def section(**keys) -> dict:
    return normalise(keys, T.STEP_SCHEMA, "experiment.step", "t.yaml")


def per_byte(seconds_per_byte: float):
    return lambda c: c["bytes"] * seconds_per_byte


@pytest.mark.parametrize("mode", T.MODES)
@pytest.mark.parametrize("layers,bucket", [(8, 256 * 1024), (8, 100_000), (24, 1 << 20),
                                           (3, 1 << 30)])
@pytest.mark.parametrize("comm_per_byte", [1e-8, 1e-7, 1e-6])
def test_overlap_off_is_the_sum_and_on_is_never_below_the_larger(mode, layers, bucket,
                                                                comm_per_byte):
    step = section(layers=layers, bucket=bucket, mode=mode)
    on = T.timeline(T.plan_step(step), per_byte(comm_per_byte))
    off = T.timeline(T.plan_step({**step, "overlap": False}), per_byte(comm_per_byte))
    plan = T.plan_step(step)
    comm = sum(c["bytes"] * comm_per_byte for c in plan.collectives)
    assert off["compute_s"] == pytest.approx(plan.compute_s)
    assert off["step_s"] == pytest.approx(plan.compute_s + comm)
    assert off["exposed_s"] == pytest.approx(comm) and off["overlap_efficiency"] < 1e-9
    assert on["step_s"] >= max(plan.compute_s, comm) - 1e-9
    assert on["step_s"] <= off["step_s"] + 1e-9
    assert on["comm_s"] == pytest.approx(comm)


def test_with_small_buckets_overlap_comes_close_to_the_larger():
    """Compute-bound: all but the last bucket hide behind the backward pass,
    so the step is compute plus the last bucket's collective; comm-bound:
    the step is the first bucket's wait plus all communication."""
    step = section(layers=64, params=64 * 4096, bucket=4096 * 4, fwd_ms=10)
    plan = T.plan_step(step)
    assert len(plan.buckets) == 64
    small = per_byte(1e-7)                        # 1.6 ms a bucket, 20 ms of backward
    on = T.timeline(plan, small)
    last = plan.buckets[-1].bytes * 1e-7
    assert on["step_s"] == pytest.approx(plan.compute_s + last)
    big = per_byte(1e-4)                          # 1.6 s a bucket: the network bounds it
    on = T.timeline(plan, big)
    comm = sum(b.bytes for b in plan.buckets) * 1e-4
    first_ready = sum(l.fwd_s for l in plan.layers) + plan.layers[-1].bwd_s
    assert on["step_s"] == pytest.approx(first_ready + comm)
    assert on["step_s"] / max(plan.compute_s, comm) < 1.02


def test_buckets_fill_and_launch_in_backward_order():
    plan = T.plan_step(section(layers=[{"params": 1000}, {"params": 3000}, {"params": 500},
                                       {"params": 500}, {"params": 2000}], bucket=4000))
    # layer 4's 8,000 bytes fill two buckets, layers 3 and 2 share one, layer 1 fills three
    assert [b.layers for b in plan.buckets] == [(4,), (4,), (2, 3), (1,), (1,), (1,), (0,)]
    assert [b.bytes for b in plan.buckets] == [4000] * 7
    result = T.timeline(plan, per_byte(1e-6))
    launches = [(c["launch"], c["bucket"]) for c in result["collectives"]]
    assert [b for _, b in sorted(launches)] == list(range(7))
    assert all(a <= b for (a, _), (b, _) in zip(launches, launches[1:]))
    # each bucket is launched when the backward pass of its first layer ends
    fwd = sum(l.fwd_s for l in plan.layers)
    bwd_end = {i: fwd + sum(plan.layers[j].bwd_s for j in range(i, 5)) for i in range(5)}
    for c in result["collectives"]:
        assert c["launch"] == pytest.approx(bwd_end[min(plan.buckets[c["bucket"]].layers)])
        assert c["start"] >= c["launch"] and c["finish"] > c["start"]


def test_one_in_flight_runs_them_one_after_another_and_two_share_the_fabric():
    step = section(layers=8, bucket=256 * 1024, fwd_ms=1)
    one = T.timeline(T.plan_step(step), per_byte(1e-5))["collectives"]
    assert all(a["finish"] <= b["start"] + 1e-12 for a, b in zip(one, one[1:]))
    two = T.timeline(T.plan_step({**step, "in_flight": 2}), per_byte(1e-5))
    spans = [(c["start"], c["finish"]) for c in two["collectives"]]
    assert any(b[0] < a[1] - 1e-9 for a, b in zip(spans, spans[1:]))       # overlapping
    assert two["step_s"] == pytest.approx(T.timeline(T.plan_step(step), per_byte(1e-5))
                                          ["step_s"], rel=0.05)     # the same bytes to move


def test_sharded_gathers_before_the_forward_pass_and_reduce_scatters_after_the_backward():
    plan = T.plan_step(section(layers=4, bucket=512 * 1024, mode="sharded"))
    kinds = [c["collective"] for c in plan.collectives]
    assert kinds.count("allgather") == kinds.count("reducescatter") == 4
    result = T.timeline(plan, per_byte(1e-7))
    forward = {s["layer"]: s for s in result["compute"] if s["kind"] == "forward"}
    for c in result["collectives"]:
        layer = plan.buckets[c["bucket"]].layers[0]
        if c["collective"] == "allgather":
            assert c["launch"] == 0 and c["finish"] <= forward[layer]["start"] + 1e-12
        else:
            assert c["launch"] >= sum(l.fwd_s for l in plan.layers)


def test_compute_follows_flops_at_the_gpus_rate():
    """The article's arithmetic: forward 2 x params x tokens FLOPs, backward twice that."""
    plan = T.plan_step(section(layers=4, params=4_000_000, gpu_tflops=1, tokens=1000))
    assert [l.fwd_s for l in plan.layers] == pytest.approx([2e6 * 1000 / 1e12] * 4)
    assert plan.compute_s == pytest.approx(6 * 4e6 * 1000 / 1e12)
    given = T.plan_step(section(layers=2, fwd_ms=10, bwd_ms=30))
    assert given.compute_s == pytest.approx(0.08)


BAD = [
    ("bucket: 3", "experiment.step.bucket: expected a size in bytes from 4"),
    ("overlap: maybe", "experiment.step.overlap: expected true or false, got 'maybe'"),
    ("mode: zero3", "experiment.step.mode: expected one of allreduce, sharded"),
    ("layers: 0", "experiment.step.layers: expected a whole number from 1 to 1000"),
    ("layers: [{fwd_ms: 3}]", "experiment.step.layers: layer 1: expected a mapping with params"),
    ("layers: [{params: 5, bwd: 2}]", "experiment.step.layers: layer 1: unknown key 'bwd'"),
    ("layers: [{params: 5}], params: 10", "experiment.step.params: the layers are listed"),
    ("params: 3, layers: 8", "experiment.step.params: 3 parameters cannot fill 8 layers"),
    ("fwd_ms: 3, gpu_tflops: 100", "experiment.step.gpu_tflops: compute comes from fwd_ms or"),
    ("gpu_tflops: 100", "experiment.step.gpu_tflops: needs tokens"),
    ("params: 1e12", "experiment.step.bucket: 262,144 bytes cut the gradients"),
    ("params: 1e9, layers: 1000", "experiment.step.bucket: 262,144 bytes cut the gradients"),
    ("in_flight: 9", "experiment.step.in_flight: expected a whole number from 1 to 8"),
    ("bukket: 3", "experiment.step.bukket: unknown key (did you mean 'bucket'?)"),
    ("fwd_ms: 1e6, layers: 100", "experiment.step: 6 steps would take at least"),
    ("tokens: 100", "experiment.step.tokens: counts FLOPs only with gpu_tflops"),
    ("params: 3e8, bucket: 1G", "experiment.step: 1,200,000,000 bytes of gradients would be held"),
    ("params: 2e8, bucket: 1G, mode: sharded", "experiment.step: 1,600,000,000 bytes of gradients "
                                              "and parameters"),
    ("params: 1.5x", "experiment.step.params: expected a parameter count from 1 to 1e13"),
]


@pytest.mark.parametrize("keys,message", BAD)
def test_a_bad_step_is_refused_in_one_sentence(keys, message):
    text = (REPO / "topologies" / "default.yaml").read_text().split("experiment:")[0]
    with pytest.raises(FabricError) as exc:
        experiment_from(parse_fabric(text + f"experiment:\n  step: {{{keys}}}\n", "t.yaml"))
    assert str(exc.value).startswith(f"t.yaml: {message}"), str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("flags,message", [
    (["--step", "--engine", "iperf3"], "--engine: a training step runs on the rank agents"),
    (["--step", "-c", "allgather"], "-c/--collective: a training step's collectives come"),
    (["--step-mode", "sharded", "-a", "rhd"], "-a/--algorithm: sharded steps run ring"),
    (["--params", "12", "--layers", "20"], "--params: 12 parameters cannot fill 20 layers"),
    (["--overlap", "maybe"], "argument --overlap: expected on or off, got 'maybe'"),
    (["--step", "--compare", "rhd"], "--compare replays a size sweep per algorithm"),
    (["--step", "--fail", "leaf1-spine1@1"], "--fail: is for size sweeps"),
    (["--params", "1e12", "--bucket", "4"], "--bucket: 4 bytes cut the gradients "
                                            "(4,000,000,000,000 bytes) into 1,000,000,000,000"),
    (["--step", "-b", "64K"], "-b/--minbytes is for size sweeps: a training step's sizes"),
    (["--bucket", "1M", "--probe", "h1,h2"], "--probe is for size sweeps: a training step runs"),
    (["--params", "1e8", "--bucket", "1G", "--piece-bytes", "4K"],
     "--piece-bytes: 4K cuts the largest bucket (400,000,000 bytes) into 97,657 pieces"),
])
def test_bad_step_flags_are_refused_in_one_sentence(flags, message):
    proc = subprocess.run([sys.executable, str(REPO / "run_topology.py"), "--check", *flags],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith(f"error: {message}"), proc.stderr
    assert proc.stderr.count("\n") == 1


def test_buckets_hold_the_gradients_exactly_but_for_the_last_ones_rounding():
    for params, bucket, dtype in ((100, 5, "float"), (99, 64, "bfloat16"),
                                  (10 ** 6, 1_000_001, "bfloat16"), (12345, 4096, "int8")):
        plan = T.plan_step(section(layers=3, params=params, bucket=bucket), dtype, None)
        exact = params * {"float": 4, "bfloat16": 2, "int8": 1}[dtype]
        assert exact <= plan.gradient_bytes <= exact + 3, (params, bucket, dtype)
        assert all(b.bytes % 4 == 0 for b in plan.buckets)


def test_parameters_take_suffixes_as_sizes_do():
    assert section(params="1.5K")["params"] == 1500            # counts: powers of 1000
    assert section(params="7G")["params"] == section(params="7B")["params"] == 7 * 10 ** 9
    assert section(params="70B")["params"] == 70 * 10 ** 9
    assert section(params=1.3e9)["params"] == 1_300_000_000


def test_flags_override_the_files_step_key_by_key():
    text = (REPO / "topologies" / "default.yaml").read_text().split("experiment:")[0]
    fabric = parse_fabric(text + "experiment:\n  step: {layers: 4, bucket: 1M}\n", "t.yaml")
    exp = experiment_from(fabric, {"step": {"overlap": False}})
    assert exp.step["layers"] == 4 and exp.step["bucket"] == 1 << 20
    assert exp.step["overlap"] is False
    assert step_plan(experiment_from(load_fabric(), {"step": {}})).overlap is True


# --- communication time: the union of the collectives' busy spans -------------------

def two_buckets(**keys) -> T.Plan:
    """Two layers of 1,024 float parameters (4 KiB each), a 4 KiB bucket per
    layer; forward 10 ms and backward 20 ms a layer (60 ms of compute)."""
    return T.plan_step(section(layers=2, params=2048, bucket=4096, fwd_ms=10, **keys))


def test_two_collectives_in_flight_count_their_overlap_once():
    """Overlap off: both buckets launch when the backward pass ends (60 ms)
    and run together, each at half speed. Alone they take 1 s and 3 s: the
    first ends at 60 ms + 2 s, the second has 2 s of its own left and ends
    at 60 ms + 4 s. The network was busy 4 s, not 2 + 4 = 6."""
    plan = two_buckets(overlap=False, in_flight=2)
    assert [b.bytes for b in plan.buckets] == [4096, 4096]
    result = T.timeline(plan, lambda c: {0: 1.0, 1: 3.0}[c["bucket"]])
    spans = sorted((c["start"], c["finish"]) for c in result["collectives"])
    assert spans == [pytest.approx((0.06, 2.06)), pytest.approx((0.06, 4.06))]
    assert result["compute_s"] == pytest.approx(0.06)
    assert result["comm_s"] == pytest.approx(4.0)
    assert result["step_s"] == pytest.approx(4.06)
    assert result["exposed_s"] == pytest.approx(4.0)
    assert result["overlap_efficiency"] == pytest.approx(0.0, abs=1e-9)


def test_one_in_flight_communication_is_the_sum_of_the_collectives():
    plan = two_buckets(overlap=False, in_flight=1)
    result = T.timeline(plan, lambda c: {0: 1.0, 1: 3.0}[c["bucket"]])
    assert result["comm_s"] == pytest.approx(4.0) and result["step_s"] == pytest.approx(4.06)


@pytest.mark.parametrize("spans,busy", [
    ([(0, 1), (0, 3)], 3), ([(0, 2), (1, 3)], 3), ([(0, 1), (2, 3)], 2),
    ([(0, 4), (1, 2), (3, 5), (7, 8)], 6), ([(5, 6), (0, 1), (0.5, 1.5)], 2.5), ([], 0)])
def test_the_time_covered_by_spans_counts_each_instant_once(spans, busy):
    assert T.union_seconds(spans) == pytest.approx(busy)


def test_the_measured_step_counts_overlapping_collectives_once_per_rank():
    """Two ranks' replies, each with both buckets running together: rank 0
    busy from 60 ms to 2.06 s (2 s), rank 1 from 60 ms to 1.56 s (1.5 s).
    The step's communication is the busier rank's, 2 s; summing the spans
    would say 3 s."""
    from runs.training import merge_ranks
    plan = two_buckets(overlap=False, in_flight=2)
    compute = [{"kind": "forward", "layer": 0, "start": 0.0, "end": 0.01},
               {"kind": "forward", "layer": 1, "start": 0.01, "end": 0.02},
               {"kind": "backward", "layer": 1, "start": 0.02, "end": 0.04},
               {"kind": "backward", "layer": 0, "start": 0.04, "end": 0.06}]

    def reply(rank, t0, ends):
        return {"rank": rank, "t0": t0, "t1": t0 + max(ends), "compute": compute,
                "pieces": 1, "reordered": 0,
                "collectives": [{"id": cid, "launch": 0.06, "start": 0.06, "finish": end,
                                 "wrong": 0, "bad_chunk_elements": 0}
                                for cid, end in enumerate(ends)]}
    step = merge_ranks([reply(0, 100.0, (1.06, 2.06)), reply(1, 100.5, (0.56, 1.56))], plan)
    assert step["comm_s"] == pytest.approx(2.0)
    assert step["step_s"] == pytest.approx(2.06) and step["compute_s"] == pytest.approx(0.06)
    assert step["exposed_s"] == pytest.approx(2.0)
    assert step["overlap_efficiency"] == pytest.approx(0.0, abs=1e-9)


def test_the_simulated_step_with_two_in_flight_is_busy_exactly_after_the_compute():
    """The simulator's prediction (--engine sim) with overlap off and two
    collectives in flight: the network is busy from the end of the backward
    pass to the end of the step, once, however many collectives overlap."""
    from runs.training import simulate_step
    text = (REPO / "topologies" / "default.yaml").read_text().split("experiment:")[0]
    fabric = parse_fabric(text + "experiment:\n  engine: sim\n  step: {layers: 4, bucket: 256K, "
                                 "in_flight: 2, overlap: false, fwd_ms: 1}\n", "t.yaml")
    off = simulate_step(fabric, experiment_from(fabric, {}))["predicted"]["overlap_off"]
    spans = sorted((c["start"], c["finish"]) for c in off["collectives"])
    assert any(b[0] < a[1] - 1e-9 for a, b in zip(spans, spans[1:]))     # they do overlap
    assert off["compute_s"] == pytest.approx(0.012)
    assert off["comm_s"] == pytest.approx(off["step_s"] - off["compute_s"])
    assert off["comm_s"] < sum(f - s for s, f in spans) / 1.5
    assert off["lower_bound_s"] == off["upper_bound_s"] == pytest.approx(off["step_s"])



def rail_step(algorithm: str):
    """topologies/rail-2x4.yaml (2 servers x 4 GPUs, a NIC per GPU) with a
    simulated step of 2 layers, 1 MiB buckets, AllReduce by `algorithm`."""
    text = (REPO / "topologies" / "rail-2x4.yaml").read_text().split("experiment:")[0]
    fabric = parse_fabric(text + f"experiment:\n  engine: sim\n  algorithm: {algorithm}\n"
                                 "  scale_up: memory\n  step: {layers: 2, bucket: 1M, "
                                 "params: 1M, fwd_ms: 1}\n", "t.yaml")
    return fabric, experiment_from(fabric, {})


@pytest.mark.parametrize("algorithm", registry.BY_SERVER)
def test_a_step_with_an_algorithm_laid_out_by_server_gets_the_server_layout(algorithm):
    """Every algorithm laid out by whole servers (rail-ring, nccl-tree,
    hierarchical) gets its bucket AllReduces' GPUs per server, not only
    hierarchical: without it rail-ring ran the flat ring over the 8 ranks.
    On rail-2x4 the rail ring's 4 channels leave a server by its 4 NICs, so
    its step's communication is a quarter of the flat ring's (measured in
    the simulator: 2.96 s against 11.83 s; given one GPU per server, as
    before, rail-ring took the 11.83 s too)."""
    from runs.sweep import RankCosts
    from runs.training import jobs_of, simulate_step
    fabric, exp = rail_step(algorithm)
    jobs = jobs_of(exp, step_plan(exp), RankCosts.of(fabric, [h.name for h in fabric.endpoints]),
                   fabric.policy)
    assert jobs and {(j.collective, j.algorithm, j.local) for j in jobs.values()} == {
        ("allreduce", algorithm, 4)}
    flat_fabric, flat = rail_step("ring")
    assert {j.local for j in jobs_of(flat, step_plan(flat), RankCosts.of(
        fabric, [h.name for h in fabric.endpoints]), fabric.policy).values()} == {1}
    if algorithm == "rail-ring":
        comm, flat_comm = (simulate_step(f, e)["summary"]["comm_s"]
                           for f, e in ((fabric, exp), (flat_fabric, flat)))
        assert comm < 0.3 * flat_comm, (comm, flat_comm)

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 10)), max_size=12))
def test_the_covered_time_is_the_unit_cells_any_span_covers(pieces):
    """Whole-second spans: the covered time is the count of seconds [t, t+1)
    inside at least one span, counted cell by cell."""
    spans = [(a, a + length) for a, length in pieces]
    cells = {t for a, b in spans for t in range(a, b)}
    assert T.union_seconds(spans) == len(cells)
