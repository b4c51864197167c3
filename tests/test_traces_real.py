"""The kept real traces (tests/data/traces/) read into the job their script
ran: its ranks, groups, collectives and sizes (scripts/make_traces.py), and
one rank of HTA's real NCCL GPU trace."""

import math
from collections import Counter
from pathlib import Path

import pytest

from traces import execution, kineto
from traces.c10d_args import describe
from traces.reading import read_trace

DATA = Path(__file__).parent / "data" / "traces"
WIDTHS = (512, 1024, 1024, 512, 256)          # scripts/make_traces.py's MLP
GRADIENT_BYTES = 4 * sum(a * b + b for a, b in zip(WIDTHS, WIDTHS[1:]))
BATCH = 64
A2A_ROWS = ((8, 24), (16, 40))
A2A_WIDTH = 256


@pytest.fixture(scope="module", params=[4, 8])
def job(request):
    return request.param, read_trace(DATA / f"gloo-mlp-{request.param}")


def test_the_job_has_every_rank_and_its_groups(job):
    n, trace = job
    assert trace.format == "execution-trace" and trace.world == n
    assert trace.iteration == "ProfilerStep#3" and sorted(trace.ranks) == list(range(n))
    expected = {"0": tuple(range(n))}
    expected.update({str(1 + r // 2): (r, r + 1) for r in range(0, n, 2)})
    assert {g.name: g.ranks for g in trace.groups.values()} == expected
    assert trace.groups["0"].desc == "default_pg" and trace.groups["1"].desc == "tp0"


def test_each_rank_ran_the_scripts_collectives(job):
    n, trace = job
    for rank, rt in trace.ranks.items():
        kinds = Counter(c.kind for c in rt.comms)
        p2p = "send" if rank < n // 2 else "recv"
        assert kinds == Counter({"allreduce": 3, "allgather": 2, "reducescatter": 1,
                                 "alltoall": 1, p2p: 1}), rank
        assert {c.dtype for c in rt.comms} == {"float"}


def test_the_sizes_are_the_scripts(job):
    n, trace = job
    for rank, rt in trace.ranks.items():
        tp, world = str(1 + rank // 2), "0"
        ddp = [c for c in rt.comms if c.kind == "allreduce"]
        assert {c.group for c in ddp} == {world}
        assert sum(c.bytes for c in ddp) == GRADIENT_BYTES == 8_924_160
        assert sorted(c.bytes for c in ddp) == [2_101_248, 2_624_512, 4_198_400]
        gathers = {c.group: c.bytes for c in rt.comms if c.kind == "allgather"}
        assert gathers == {tp: 2 * BATCH * WIDTHS[1] * 4, world: 4 * n}
        (rs,) = [c for c in rt.comms if c.kind == "reducescatter"]
        assert (rs.group, rs.bytes) == (tp, 2 * BATCH * WIDTHS[1] // 2 * 4)
        (a2a,) = [c for c in rt.comms if c.kind == "alltoall"]
        place = rank % 2
        assert a2a.group == tp
        assert a2a.in_splits == tuple(r * A2A_WIDTH for r in A2A_ROWS[place])
        assert a2a.out_splits == tuple(A2A_ROWS[q][place] * A2A_WIDTH for q in range(2))
        assert a2a.bytes == sum(A2A_ROWS[place]) * A2A_WIDTH * 4
        (p2p,) = [c for c in rt.comms if c.kind in ("send", "recv")]
        assert (p2p.group, p2p.bytes, p2p.peer) == (world, 16 * 256 * 4, (rank + n // 2) % n)


def test_every_group_and_seq_agrees_across_its_ranks(job):
    n, trace = job
    seen = {}
    for rank, rt in trace.ranks.items():
        for c in rt.comms:
            if c.kind in ("send", "recv"):
                continue
            size = None if c.kind == "alltoall" else c.bytes    # uneven: checked below
            seen.setdefault((c.group, c.seq), {})[rank] = (c.kind, size, c.dtype)
    assert len(seen) == 4 + 3 * (n // 2)
    for (group, seq), by_rank in seen.items():
        assert sorted(by_rank) == list(trace.groups[group].ranks), (group, seq)
        assert len(set(by_rank.values())) == 1, (group, seq, by_rank)
    assert sorted(s for g, s in seen if g == "0") == [0, 1, 2, 3]
    for rank, rt in trace.ranks.items():          # what one sends the other receives
        (mine,) = [c for c in rt.comms if c.kind == "alltoall"]
        partner = rank ^ 1
        (theirs,) = [c for c in trace.ranks[partner].comms if c.kind == "alltoall"]
        assert mine.in_splits[partner % 2] == theirs.out_splits[rank % 2]


def test_times_lie_in_the_iteration_and_compute_is_a_plausible_share(job):
    n, trace = job
    assert 0.05 < trace.iteration_s < 1.0
    low, high = trace.iteration_range_s            # the job's is the mean of its ranks'
    assert low <= trace.iteration_s <= high and high - low < 0.2 * trace.iteration_s
    for rank, rt in trace.ranks.items():
        assert low <= rt.iteration_s <= high
        for c in rt.comms:
            assert 0 <= c.issued_s <= c.start_s + 1e-6 and c.dur_s > 0
            assert c.start_s < rt.iteration_s
        spans = sorted(rt.compute, key=lambda s: s.start_s)
        assert all(a.start_s + a.dur_s <= b.start_s + 1e-9 for a, b in zip(spans, spans[1:]))
        share = sum(s.dur_s for s in rt.compute) / rt.iteration_s
        assert 0.2 < share < 0.95, (rank, share)
        # compute stops where a communication is issued on the training thread
        for c in rt.comms:
            assert not any(s.start_s < c.issued_s - 1e-6 < s.start_s + s.dur_s - 2e-6
                           for s in spans), (rank, c)


def test_an_earlier_iteration_is_read_when_asked():
    last = read_trace(DATA / "gloo-mlp-4")
    first = read_trace(DATA / "gloo-mlp-4", iteration=2)
    assert first.iteration == "ProfilerStep#2" and read_trace(
        DATA / "gloo-mlp-4", "ProfilerStep#2").iteration == "ProfilerStep#2"
    assert [c.bytes for c in first.ranks[0].comms] == [c.bytes for c in last.ranks[0].comms]
    assert first.ranks[0].comms[0].start_s != last.ranks[0].comms[0].start_s


def test_the_execution_trace_and_kineto_say_the_same_of_each_operation():
    """Each c10d operator of the iteration: what Kineto's own arguments say
    matches what the execution trace says (Kineto lacks only tensor lists' types)."""
    import gzip
    import json
    for rank in range(4):
        et_path = DATA / "gloo-mlp-4" / f"rank-{rank}.et.json.gz"
        nodes = json.load(gzip.open(et_path))["nodes"]
        from_et = execution.communication(nodes, et_path.name)
        window = execution.iteration_ids(nodes, 3, et_path.name)
        _, events = kineto.load(DATA / "gloo-mlp-4" / f"rank-{rank}.kineto.json.gz")
        ops = [e for e in events if kineto.c10d_kind(e)
               and int(e.arg("record_function_id", -1)) in window]
        assert len(ops) == 8 == len([rf for rf in from_et if rf in window])
        typed = 0
        for op in ops:
            mine = describe(op.name, op.arg("input_type"), op.arg("input_dims"),
                            op.arg("concrete_inputs"))
            theirs = from_et[int(op.arg("record_function_id"))]
            for key in ("elems", "in_splits", "out_splits", "peer", "root", "group_size"):
                assert mine.get(key) == theirs.get(key), (rank, op.name, key)
            if mine["dtype"] is not None:
                typed += 1
                assert (mine["dtype"], mine["size"]) == (theirs["dtype"], theirs["size"])
            assert theirs["dtype"] == "float"
        assert typed == 4                 # the two all-gathers, reduce-scatter, all-to-all


def test_a_real_nccl_gpu_rank_reads_from_its_kernels():
    read = kineto.read_rank(DATA / "hta-nccl-resnet" / "rank-0.json.gz")
    assert (read.rank, read.world, read.iteration) == (0, 2, "ProfilerStep#6")
    assert read.steps == [4, 5, 6]
    assert {g.name: g.ranks for g in read.groups.values()} == {"0": (0, 1)}
    kinds = [(c.kind, c.dtype, c.bytes) for c in read.comms]
    assert kinds[:2] == [("broadcast", "float", 212_480), ("broadcast", "int8", 424)]
    assert [b for k, _, b in kinds if k == "allreduce"] == [
        8_196_000, 31_502_336, 26_255_360, 26_550_272, 9_724_160]
    assert [c.seq for c in read.comms] == list(range(7))
    assert all(c.name.startswith("ncclKernel") and 0 <= c.issued_s <= c.start_s
               for c in read.comms)
    assert read.trace.compute and not any("nccl" in s.name.lower() for s in read.trace.compute)
    assert math.isclose(read.trace.iteration_s, 0.224936, rel_tol=1e-4)
    busy = sum(s.dur_s for s in read.trace.compute) / read.trace.iteration_s
    assert 0.05 < busy < 1.5            # kernels of several streams may overlap
    earlier = kineto.read_rank(DATA / "hta-nccl-resnet" / "rank-0.json.gz", iteration=4)
    assert earlier.iteration == "ProfilerStep#4" and earlier.comms
