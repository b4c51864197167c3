"""The parts that run alongside a lab's sweep: which a run gets, in what
order, and what a part that reads another's figures refuses."""

import pytest

from runs.experiment import Experiment
from runs.lab_parts import (CrossTraffic, Latency, LinkFailures, Links, Simulation, check_parts,
                            standard_parts, wire_split)
from runs.measured import LabBackend
from topologies.fabric import load_fabric
from harness import TOPOLOGIES


def names(parts):
    return [type(p).__name__ for p in parts]


def test_a_default_run_measures_links_latency_and_the_simulation_beside():
    assert names(standard_parts(Experiment())) == ["Links", "Latency", "Simulation"]


def test_cross_traffic_starts_after_the_idle_latency_and_failures_come_last():
    exp = Experiment(cross=["h1", "h4"], fail=["leaf1-spine1@1"])
    parts = standard_parts(exp)
    assert names(parts) == ["Links", "Latency", "CrossTraffic", "Simulation", "LinkFailures"]
    assert parts[2].ends == ("h1", "h4") and parts[4].specs == ["leaf1-spine1@1"]
    check_parts(parts)


@pytest.mark.parametrize("parts", [[Simulation()], [Simulation(), Links()],
                                   [Latency(), Simulation()]])
def test_the_simulation_without_the_links_before_it_is_refused(parts):
    with pytest.raises(ValueError, match="Simulation part reads from Links"):
        check_parts(parts)


def test_a_lab_backend_refuses_parts_in_an_order_that_cannot_work():
    class NoLab:
        fabric = None
    with pytest.raises(ValueError, match="must come before it"):
        LabBackend(NoLab(), None, [Simulation()])
    assert LabBackend(NoLab(), None, []).parts == []


def test_parts_that_read_nothing_go_in_any_order():
    check_parts([LinkFailures(["leaf1-spine1@1"]), CrossTraffic("h1", "h2"), Latency(), Links()])


def test_wire_bytes_count_what_switches_sent_towards_gpus_and_towards_servers():
    fabric = load_fabric(TOPOLOGIES / "multi-gpu.yaml")
    intra = [l for l in fabric.links if l.kind == "intra_node"]
    edge = [l for l in fabric.links if l.kind == "server_leaf"]
    links = {intra[0].b_intf: {"tx_bytes": 7}, intra[0].a_intf: {"tx_bytes": 1000},
             edge[0].b_intf: {"tx_bytes": 11}, edge[1].b_intf: {"tx_bytes": 13},
             edge[0].a_intf: {"tx_bytes": 1000}}
    assert wire_split(fabric, links) == {"intra_node": 7, "network_to_servers": 24}
