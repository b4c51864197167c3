"""The readers' parts on their own: PyTorch's names, a c10d operator's
arguments, and how an operation whose group the trace does not name is placed."""

import pytest

from traces.c10d_args import describe
from traces.naming import COLLECTIVE_KINDS, scalar_type
from traces.placing import Pending, RankRead, settle
from traces.trace_model import Group, RankTrace, TraceError
from collectives.registry import COLLECTIVES
from collectives.datatypes import TYPE_NAMES


def test_names_map_into_the_projects():
    assert set(COLLECTIVE_KINDS.values()) <= set(COLLECTIVES) | {"send", "recv"}
    assert COLLECTIVE_KINDS["_allgather_base"] == "allgather"
    assert COLLECTIVE_KINDS["all_to_allv"] == "alltoall"
    assert scalar_type("Float") == ("float", 4) and scalar_type("c10::BFloat16") == ("bfloat16", 2)
    assert scalar_type("Tensor(c10::Half)") == ("half", 2) and scalar_type("int") == ("int32", 4)
    assert scalar_type("Long") == ("int8", 8)          # no name for it: bytes kept
    assert scalar_type("TensorList") is None and scalar_type("Scalar") is None
    assert all(scalar_type(t)[0] in TYPE_NAMES for t in ("Float", "Char", "Byte", "double"))


def test_a_c10d_operators_arguments_from_kineto_and_from_an_execution_trace():
    a2a = describe("c10d::alltoall_base_", ["float", "float", "", "ScalarList", "ScalarList"],
                   [[24, 256], [32, 256], [], [], []], ["", "", "", "[8, 16]", "[8, 24]"])
    assert (a2a["dtype"], a2a["elems"], a2a["group_size"]) == ("float", 32 * 256, 2)
    assert a2a["in_splits"] == (8 * 256, 24 * 256) and a2a["out_splits"] == (8 * 256, 16 * 256)
    gather = describe("c10d::_allgather_base_", ["float", "float"], [[128, 1024], [64, 1024]], [])
    assert (gather["elems"], gather["group_size"]) == (128 * 1024, 2)
    scatter = describe("c10d::_reduce_scatter_base_", ["c10::Half", "c10::Half"],
                       [[64, 512], [256, 512]], [])
    assert (scatter["dtype"], scatter["elems"], scatter["group_size"]) == ("half", 256 * 512, 4)
    listed = describe("c10d::allreduce_", ["TensorList"], [[[656128]]], [])
    assert listed["dtype"] is None and listed["elems"] == 656128
    et = describe("c10d::send", ["GenericList[Tensor(float)]", "Object", "Int", "Int"],
                  [[[16, 256]], [], [], []], [[[1, 2, 0, 4096, 4, "cpu"]], "<Object>", 1, 0])
    assert (et["dtype"], et["elems"], et["peer"]) == ("float", 4096, 1)
    root = describe("c10d::broadcast_", ["TensorList", "", "Scalar"], [[[10]], [], []],
                    ["", "", "3"])
    assert root["root"] == 3


WORLD = Group("0", (0, 1, 2, 3), "default_pg")
TP0, PP0 = Group("1", (0, 1), "tp0"), Group("3", (0, 2), "pp0")


def pending(kind, start, group_size=0, thread=-1, peer_place=-1, group=""):
    return Pending(start=start, dur=0.001, kind=kind, elems=10, size=4, dtype="float",
                   group=group, where=f"rank-0.json: c10d::{kind} at {start * 1e3:.3f} ms",
                   name=f"c10d::{kind}", group_size=group_size, thread=thread,
                   peer_place=peer_place, issued=start)


def rank_read(ops, groups=(WORLD, TP0)):
    return RankRead(0, 4, "rank-0.json", {g.name: g for g in groups}, RankTrace(0, "x", 0.1),
                    ops, [1], "ProfilerStep#1")


def test_the_shapes_place_an_operation_when_one_group_fits():
    read = rank_read([pending("allgather", 0.001, group_size=2),
                      pending("allgather", 0.002, group_size=4)])
    settle(read)
    assert [(c.group, c.seq) for c in read.comms] == [("1", 0), ("0", 0)]


def test_the_worker_thread_places_what_the_shapes_leave_open():
    read = rank_read([pending("allgather", 0.001, group_size=2, thread=7),
                      pending("allreduce", 0.002, thread=7),
                      pending("allreduce", 0.003, thread=9)])
    settle(read)
    assert [c.group for c in read.comms] == ["1", "1", "0"]   # the last: the default group
    assert [c.seq for c in read.comms] == [0, 1, 0]


def test_an_operation_no_rule_places_is_refused():
    read = rank_read([pending("allgather", 0.001, group_size=2)], groups=(WORLD, TP0, PP0))
    with pytest.raises(TraceError, match=r"^rank-0.json: c10d::allgather at 1.000 ms: the trace "
                       r"does not say which process group it ran in, and the rank's groups that "
                       r"fit it are: 1 \[0, 1\], 3 \[0, 2\]\.$"):
        settle(read)


def test_a_peer_outside_a_group_rules_it_out_and_p2p_is_numbered_per_peer():
    read = rank_read([pending("send", 0.001, peer_place=2), pending("send", 0.002, peer_place=1,
                                                                    group="0"),
                      pending("allreduce", 0.003, group="0"), pending("send", 0.004, peer_place=2)])
    settle(read)
    assert [(c.kind, c.group, c.peer, c.seq) for c in read.comms] == [
        ("send", "0", 2, 0), ("send", "0", 1, 0), ("allreduce", "0", -1, 0), ("send", "0", 2, 1)]


def test_a_named_group_whose_ranks_are_unknown_is_refused():
    read = rank_read([pending("allreduce", 0.001, group="7")])
    with pytest.raises(TraceError, match=r"its process group '7' is unknown \(its ranks are "
                                         r"given nowhere in the trace\)\.$"):
        settle(read)
