"""bench/trace_bench.py's synthetic trace is one the Kineto reader takes as
the job it describes: every rank, its groups, its collectives and their sizes."""

from collections import Counter

from bench import trace_bench as tb
from traces.reading import read_trace


def test_the_synthetic_trace_reads_as_the_job_it_describes(tmp_path):
    job = tb.sized(16, 1200)
    counted = tb.write_trace(job, tmp_path / "trace")
    trace = read_trace(tmp_path / "trace")
    assert trace.world == 16 and sorted(trace.ranks) == list(range(16))
    assert trace.groups["2"].ranks == tuple(range(8, 16))          # TP: a server's 8 GPUs
    assert trace.groups["4"].ranks == (1, 9)                        # DP: rank 1 and 9
    assert 0.7 < trace.iteration_s < 1.0
    shard = tb.TOKENS // tb.TP * tb.HIDDEN * 2                       # bf16 bytes
    for rank, rt in trace.ranks.items():
        kinds = Counter((c.kind, c.bytes) for c in rt.comms)
        assert kinds[("allgather", shard * tb.TP)] == 4 * tb.LAYERS
        assert kinds[("reducescatter", shard * tb.TP)] == 4 * tb.LAYERS
        assert kinds[("reducescatter", tb.BUCKET * 2)] == kinds[("allgather", tb.BUCKET * 2)] > 0
        assert {c.dtype for c in rt.comms} == {"bfloat16"}
        assert counted == tb.EVENTS_PER_OP * (len(rt.comms) + len(rt.compute)) + 1
