"""A recorded iteration as a step program (sim/trace_step.py) and its walk
(sim/step_program.py): what waits for what, read from the times, and the
iteration the program gives back with the trace's own times."""

import pytest

from sim import trace_step as TS
from sim.step_program import ProgramError, StepProgram, walk
from traces.trace_model import Comm, Compute, Group, RankTrace, Trace

MS = 1e-3


def comm(start, dur, kind="allreduce", nbytes=4096, group="0", seq=0, **kw):
    return Comm(start * MS, dur * MS, kind, nbytes, "float32", group, seq, **kw)


def rank(r, compute, comms, iteration):
    return RankTrace(r, f"rank{r}.json", iteration * MS,
                     [Compute(a * MS, (b - a) * MS, f"op{i}") for i, (a, b) in enumerate(compute)],
                     comms)


def two_ranks(compute, comms, iteration, groups=None):
    groups = groups or {"0": Group("0", (0, 1), "dp")}
    return Trace("kineto", "mem", 2, groups,
                 {r: rank(r, compute, comms, iteration) for r in (0, 1)})


def test_a_compute_that_started_when_an_allreduce_ended_waits_for_it():
    """A [0,10] ms, the AllReduce it released [10,15], B [15,25]: B waits for
    it; with the trace's own times the program gives the 25 ms back, and an
    AllReduce four times as long shows as 20 ms exposed, on the path."""
    p = TS.program_of(two_ranks([(0, 10), (15, 25)], [comm(10, 5)], 25))
    tasks = p.tasks[0]
    assert [t["releases"] for t in tasks] == [[0], [], []]
    assert [t["needs"] for t in tasks] == [[], [0], []]
    assert TS.measured_times(p).step_s == pytest.approx(25 * MS)
    slow = TS.times(p, lambda c: 20 * MS)
    assert slow.step_s == pytest.approx(40 * MS)
    assert slow.exposed_by_kind == {"allreduce on dp": pytest.approx(20 * MS)}
    assert slow.critical == {"compute": pytest.approx(20 * MS),
                             "allreduce on dp": pytest.approx(20 * MS)}


def test_a_gap_nothing_explains_is_the_hosts_own_time():
    p = TS.program_of(two_ranks([(0, 10), (12, 20)], [comm(3, 4)], 24))
    assert [t["needs"] for t in p.tasks[0]] == [[], [], []]
    assert [round(t["seconds"] / MS, 6) for t in p.tasks[0]] == [10, 10, 4]
    assert p.initial[0] == [0]          # issued before any compute ended
    assert TS.measured_times(p).step_s == pytest.approx(24 * MS)
    # hidden under compute: ten times as long still ends inside it
    assert TS.times(p, lambda c: 15 * MS).step_s == pytest.approx(24 * MS)


def test_an_operation_still_running_at_the_end_holds_the_iteration():
    p = TS.program_of(two_ranks([(0, 10)], [comm(10, 6)], 17))
    assert p.tasks[0][-1]["needs"] == [0]
    assert TS.measured_times(p).step_s == pytest.approx(17 * MS)
    assert TS.times(p, lambda c: 10 * MS).step_s == pytest.approx(21 * MS)


def test_a_groups_operations_run_one_after_the_other():
    """Two AllReduces issued together on one communicator: the second starts
    when the first ends, as NCCL's stream (or gloo's queue) runs them."""
    p = TS.program_of(two_ranks([(0, 10), (30, 31)], [comm(10, 5, seq=0), comm(15, 5, seq=1)],
                                31))
    assert p.collectives[1]["after"] == 0 and p.collectives[0]["after"] is None
    t = TS.times(p, lambda c: 8 * MS)
    assert t.walk.start[1] == pytest.approx(18 * MS) and t.walk.finish[1] == pytest.approx(26 * MS)
    # the path goes from the second back through the first, not to its launch
    assert t.critical == {"compute": pytest.approx(21 * MS),
                          "allreduce on dp": pytest.approx(16 * MS)}


def test_more_replicas_widen_only_the_groups_spanning_the_job():
    groups = {"0": Group("0", (0, 1), "dp"), "1": Group("1", (0,), "solo")}
    t = two_ranks([(0, 10), (15, 25)], [comm(10, 5)], 25, groups)
    p = TS.program_of(t, replicas=3)
    assert len(p.tasks) == 6 and len(p.collectives) == 1
    assert p.collectives[0]["members"] == [0, 1, 2, 3, 4, 5]
    one = TS.program_of(t)
    assert one.collectives[0]["members"] == [0, 1]


def test_a_send_and_its_receive_are_one_broadcast_over_the_two():
    groups = {"0": Group("0", (0, 1), "pp")}
    r0 = rank(0, [(0, 10), (20, 30)], [comm(10, 4, "send", group="0", seq=0, peer=1)], 30)
    r1 = rank(1, [(0, 2), (20, 30)], [comm(2, 12, "recv", group="0", seq=0, peer=0)], 30)
    p = TS.program_of(Trace("kineto", "mem", 2, groups, {0: r0, 1: r1}))
    assert len(p.collectives) == 1
    c = p.collectives[0]
    assert (c["collective"], c["members"], c["root"], c["bytes"]) == ("broadcast", [0, 1], 0, 4096)
    assert p.tasks[1][1]["needs"] == [0]              # rank 1 waited for its data


def test_a_count_is_rounded_to_whole_blocks_of_the_group():
    """An all-gather's bytes are its output, as nccl-tests counts them; its
    count is rounded down to whole blocks of the group, as nccl-tests rounds."""
    p = TS.program_of(two_ranks([(0, 10)], [comm(10, 2, "allgather", nbytes=804)], 13))
    assert p.collectives[0]["count"] == 200 and p.collectives[0]["bytes"] == 800


def test_a_program_that_cannot_finish_says_which_rank_waits_for_what():
    p = StepProgram(
        collectives=[{"id": 0, "members": [0, 1]}, {"id": 1, "members": [0, 1]}],
        tasks={0: [{"seconds": 1, "needs": [0], "releases": [1], "kind": "c", "layer": 0}],
               1: [{"seconds": 1, "needs": [1], "releases": [0], "kind": "c", "layer": 0}]})
    with pytest.raises(ProgramError, match="rank 0's task 0 waits for collective 0"):
        walk(p, lambda c: 1.0)


def test_the_walk_is_one_pass_over_a_long_chain():
    """10,000 operations chained `after` one another on 2 ranks: no recursion
    limit, and the chain's time is the sum."""
    n = 10_000
    cs = [{"id": i, "members": [0, 1], "after": i - 1 if i else None} for i in range(n)]
    tasks = {r: [{"seconds": 0.0, "needs": [], "releases": list(range(n)), "kind": "c",
                  "layer": 0}, {"seconds": 0.0, "needs": [n - 1], "releases": [], "kind": "c",
                                "layer": 1}] for r in (0, 1)}
    w = walk(StepProgram(cs, tasks, {}), lambda c: 1.0)
    assert w.step_s == n


def test_the_hosts_time_before_an_issue_is_kept():
    """Compute [0, 100] ms, an operation issued at 150 (the host's own 50 ms
    in between), compute [300, 400], a 1 s iteration: given back whole; and
    an operation issued 100 ms into an iteration with no compute before it."""
    issued = comm(150, 10, issued_s=150 * MS)
    p = TS.program_of(two_ranks([(0, 100), (300, 400)], [issued], 1000))
    assert [(t["kind"], round(t["seconds"] / MS, 6)) for t in p.tasks[0]] == [
        ("compute", 100), ("host", 50), ("compute", 240), ("host", 600)]   # it waited 10
    assert p.tasks[0][1]["releases"] == [0]
    assert TS.measured_times(p).step_s == pytest.approx(1.0)
    late = TS.program_of(two_ranks([(300, 400)], [comm(100, 10)], 1000))
    assert late.initial[0] == [] and late.tasks[0][0]["releases"] == [0]
    assert TS.measured_times(late).step_s == pytest.approx(1.0)


def test_an_operation_inside_a_tiny_span_is_not_waited_for_by_it():
    """A zero-length operation issued inside a span shorter than the clock's
    resolution: released by the span before, needed by none at or before it
    (no task waits for what it launches itself)."""
    t = two_ranks([(0, 10), (500, 500.0008), (600, 610)], [comm(500.0004, 0)], 700)
    assert TS.measured_times(TS.program_of(t)).step_s == pytest.approx(0.7)


def test_messages_both_ways_between_two_ranks_run_in_their_order():
    groups = {"0": Group("0", (0, 1), "pp")}
    sends = {0: [comm(10, 2, "send", group="0", seq=0, peer=1),
                 comm(20, 2, "recv", group="0", seq=1, peer=1),
                 comm(30, 2, "send", group="0", seq=2, peer=1)],
             1: [comm(10, 2, "recv", group="0", seq=0, peer=0),
                 comm(20, 2, "send", group="0", seq=1, peer=0),
                 comm(30, 2, "recv", group="0", seq=2, peer=0)]}
    t = Trace("kineto", "mem", 2, groups,
              {r: rank(r, [(0, 10), (40, 50)], sends[r], 50) for r in (0, 1)})
    p = TS.program_of(t)
    assert [(c["members"], c["after"]) for c in p.collectives] == [
        ([0, 1], None), ([1, 0], 0), ([0, 1], 1)]


def test_a_waves_collectives_each_take_until_their_own_ranks_are_done():
    """Two pairs all-gather at once (one wave): the pair inside a server of
    multi-gpu.yaml is done long before the pair across two servers, and each
    is priced as the simulator replays it alone, being disjoint."""
    from pathlib import Path
    from sim.simulator import Simulator
    from sim.step_program import merged_schedule
    from topologies.fabric import load_fabric
    fabric = load_fabric(Path(__file__).parent.parent / "topologies" / "multi-gpu.yaml",
                         emulate=False)
    groups = {"a": Group("a", (0, 1), "inside"), "b": Group("b", (2, 3), "across")}
    ranks = {r: rank(r, [(0, 10)], [comm(10, 5, "allgather", nbytes=1 << 20,
                                         group="a" if r < 2 else "b")], 20) for r in range(4)}
    p = TS.program_of(Trace("kineto", "mem", 4, groups, ranks))
    assert p.collectives[0]["wave"] == p.collectives[1]["wave"]
    sim = Simulator.on_fabric(fabric, ["h1g1", "h1g2", "h2g1", "h3g1"])
    seconds = TS.fabric_seconds(p, sim)
    alone = [sim.replay_seconds(merged_schedule([c])) for c in p.collectives]
    assert seconds[0] < seconds[1] / 3
    assert [seconds[0], seconds[1]] == [pytest.approx(a, rel=1e-6) for a in alone]
