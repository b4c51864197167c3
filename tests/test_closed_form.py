"""The closed forms the simulator prices AllReduce with (sim/closed_form.py),
against figures worked out by hand in each test: the ring, the
hierarchical AllReduce pipelined as NCCL runs it (every phase's latency,
the in-server byte terms together against the inter-server one), and the
one-sentence refusals. Nothing here is computed with the module's own
helpers."""

import pytest

from sim import closed_form as CF


def approx(expected, rel=1e-12):
    return pytest.approx(expected, rel=rel, abs=0)


def refused(fn, *args, message):
    with pytest.raises(ValueError) as e:
        fn(*args)
    assert str(e.value) == message


# --- ring -----------------------------------------------------------------------------

def test_ring_allreduce_by_hand():
    # 2*7*1e-6 + 2*7/8 * 1e6 * 1e-9 = 14e-6 + 1.75e-3
    assert CF.ring_allreduce_seconds(8, 1e6, 1e-6, 1e-9) == approx(1.764e-3)
    # 2*3*10us + 2*3/4 * 1e6 B * 1 ns/B = 60 us + 1.5 ms
    assert CF.ring_allreduce_seconds(4, 1e6, 1e-5, 1e-9) == approx(1.56e-3)
    # 2*1*3 + 2*1/2 * 10 * 0.5 = 6 + 5
    assert CF.ring_allreduce_seconds(2, 10, 3, 0.5) == approx(11.0)
    assert CF.ring_allreduce_seconds(1, 1e9, 1.0, 1.0) == 0.0
    assert CF.ring_allreduce_seconds(10 ** 12, 0, 0, 0) == 0
    assert CF.ring_allreduce_seconds(4.0, 1e6, 1e-5, 1e-9) == approx(1.56e-3)   # a whole float


def test_ring_allreduce_refusals():
    at_least_1 = "a whole number of at least 1"
    refused(CF.ring_allreduce_seconds, 0, 1, 1, 1, message=f"n must be {at_least_1}, got 0")
    refused(CF.ring_allreduce_seconds, 10 ** 12 + 1, 1, 1, 1,
            message=f"n must be {at_least_1}, got 1000000000001")
    refused(CF.ring_allreduce_seconds, 2.5, 1, 1, 1, message=f"n must be {at_least_1}, got 2.5")
    refused(CF.ring_allreduce_seconds, True, 1, 1, 1, message=f"n must be {at_least_1}, got true")
    refused(CF.ring_allreduce_seconds, 2, -1, 1, 1,
            message="size_bytes must be a number of at least 0, got -1")
    refused(CF.ring_allreduce_seconds, 2, float("inf"), 1, 1,
            message="size_bytes must be a number of at least 0, got inf")
    refused(CF.ring_allreduce_seconds, 2, 1, -1, 1,
            message="alpha_s must be a number of at least 0, got -1")
    refused(CF.ring_allreduce_seconds, 2, 1, 1, -1,
            message="beta_s_per_byte must be a number of at least 0, got -1")


# --- hierarchical, pipelined --------------------------------------------------------------

def test_hierarchical_allreduce_by_hand():
    """4 servers of 8, 8e6 B, a_intra 1e-6, b_intra 1e-10, a_inter 5e-6,
    b_inter 2e-9. ReduceScatter: 7 x 1e-6 = 7e-6 of latency, 7/8 x 8e6 x
    1e-10 = 7e-4 of bytes; the AllGather the same; between servers a ring
    over 4 on 1e6 B: 6 x 5e-6 = 3e-5 and 1.5 x 1e6 x 2e-9 = 3e-3.
    Latencies 7e-6 + 3e-5 + 7e-6 = 4.4e-5; bytes max(7e-4 + 7e-4, 3e-3) =
    3e-3: 3.044e-3."""
    got = CF.hierarchical_allreduce_seconds(4, 8, 8e6, 1e-6, 1e-10, 5e-6, 2e-9)
    assert got == approx(3.044e-3)


def test_hierarchical_allreduce_where_the_server_is_the_slower_stage():
    """2 servers of 8, 8e6 B, b_intra 1e-10, b_inter 1e-10, every alpha 1e-6.
    In-server bytes 7e-4 each way, 1.4e-3 together; between servers 2 x 1/2
    x 1e6 x 1e-10 = 1e-4. Latencies 7 + 2 + 7 = 16 us: 1.416e-3."""
    got = CF.hierarchical_allreduce_seconds(2, 8, 8e6, 1e-6, 1e-10, 1e-6, 1e-10)
    assert got == approx(1.416e-3)


def test_hierarchical_phases_are_not_summed_again():
    """The three phases one after the other (what the planner printed before
    it priced NCCL's pipelining) would be 2 x (7e-6 + 7e-4) + (3e-5 + 3e-3)
    = 4.444e-3 s for the shape of the first test; pipelined, the in-server
    bytes (1.4e-3) hide behind the inter-server ones: 1.4e-3 less."""
    got = CF.hierarchical_allreduce_seconds(4, 8, 8e6, 1e-6, 1e-10, 5e-6, 2e-9)
    summed = 2 * (7e-6 + 7e-4) + 3e-5 + 3e-3
    assert got == approx(summed - 1.4e-3)
    assert got < summed / 1.4


def test_the_in_server_phases_share_their_nvlink_ports():
    """The ReduceScatter and the AllGather inside a server send on the same
    NVLink ports: their byte terms add, not overlap. Where the inter-server
    term lies between one of them and both (2 servers of 8, 8e6 B,
    b_intra 1e-10: 7e-4 each; b_inter 8e-10: 2 x 1/2 x 1e6 x 8e-10 = 8e-4),
    the time is 1.4e-3 of bytes, not the largest single phase's 8e-4."""
    got = CF.hierarchical_allreduce_seconds(2, 8, 8e6, 0, 1e-10, 0, 8e-10)
    assert got == approx(1.4e-3)


def test_hierarchical_degenerates_to_a_ring():
    # one server: a ring over its 8 GPUs on NVLink, 2*7*1e-6 + 2*7/8*8e6*1e-10
    assert CF.hierarchical_allreduce_seconds(1, 8, 8e6, 1e-6, 1e-10, 5e-6, 2e-9) == \
        approx(1.4e-5 + 1.4e-3)
    # one GPU a server: the flat ring over 4, 2*3*5e-6 + 2*3/4*8e6*2e-9
    assert CF.hierarchical_allreduce_seconds(4, 1, 8e6, 1e-6, 1e-10, 5e-6, 2e-9) == \
        approx(3e-5 + 2.4e-2)
    assert CF.hierarchical_allreduce_seconds(10 ** 12, 10 ** 6, 0, 0, 0, 0, 0) == 0


def test_hierarchical_terms_phase_by_phase():
    """The same shape as the first test, each phase on its own."""
    scatter, across, gather = CF.hierarchical_allreduce_terms(4, 8, 8e6, 1e-6, 1e-10, 5e-6, 2e-9)
    assert scatter.name == "intra-node reduce-scatter" and gather.name == "intra-node allgather"
    assert across.name == "inter-node allreduce"
    assert (scatter.latency_s, scatter.bytes_s) == (approx(7e-6), approx(7e-4))
    assert (across.latency_s, across.bytes_s) == (approx(3e-5), approx(3e-3))
    assert (gather.latency_s, gather.bytes_s) == (approx(7e-6), approx(7e-4))


def test_hierarchical_allreduce_refusals():
    at_least_1 = "a whole number of at least 1"
    args = [2, 2, 1, 1, 1, 1, 1]

    def bad(i, value, message):
        a = list(args)
        a[i] = value
        refused(CF.hierarchical_allreduce_seconds, *a, message=message)
        refused(CF.hierarchical_allreduce_terms, *a, message=message)
    bad(0, 0, f"nodes must be {at_least_1}, got 0")
    bad(0, 10 ** 12 + 1, f"nodes must be {at_least_1}, got 1000000000001")
    bad(1, 0, f"gpus_per_node must be {at_least_1}, got 0")
    bad(1, 10 ** 6 + 1, f"gpus_per_node must be {at_least_1}, got 1000001")
    bad(2, -1, "size_bytes must be a number of at least 0, got -1")
    bad(3, -1, "alpha_intra must be a number of at least 0, got -1")
    bad(4, -1, "beta_intra must be a number of at least 0, got -1")
    bad(5, -1, "alpha_inter must be a number of at least 0, got -1")
    bad(6, float("nan"), "beta_inter must be a number of at least 0, got nan")
