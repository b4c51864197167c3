"""Routing policies as registered classes (policies/): the registry lists
each once, in --policy's order; each says what it asks of the controller,
the senders and the simulator; and a new policy is found from its file alone."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from policies import POLICIES, all_policies, policy
from policies.policy import Policy, register

REPO = Path(__file__).resolve().parent.parent


def test_the_registry_lists_every_policy_once_in_the_documented_order():
    assert POLICIES == ("ecmp", "single-path", "stp", "flowlet", "spray", "adaptive", "dmodk")
    assert list(all_policies()) == list(POLICIES)
    assert all(isinstance(policy(name), Policy) and policy(name).name == name
               for name in POLICIES)
    with pytest.raises(KeyError):
        policy("ospf")


def test_a_second_policy_of_the_same_name_is_refused():
    with pytest.raises(ValueError, match="two routing policies are called 'ecmp'"):
        @register
        class Again(Policy):
            name = "ecmp"


@pytest.mark.parametrize("name, controller, simulated, spreads, paths, faithful", [
    ("ecmp", True, True, False, "hash", True),
    ("single-path", True, True, False, "hash", True),
    ("stp", False, False, False, "hash", True),
    ("flowlet", True, True, True, "hash", False),
    ("spray", True, True, True, "per-connection", True),
    ("adaptive", True, True, False, "least-placed", True),
])
def test_what_each_policy_asks(name, controller, simulated, spreads, paths, faithful):
    p = policy(name)
    assert (p.controller, p.simulated, p.spreads, p.sim_paths, p.sim_faithful) == (
        controller, simulated, spreads, paths, faithful)
    assert p.moves_elephants == (name == "adaptive")
    assert bool(p.why_not_simulated) == (not simulated)
    assert p.summary.startswith(name)


def test_single_path_pins_destination_leaf_k_to_port_k_mod_n():
    pin = policy("single-path").pin
    assert [pin((5, 6, 7), leaf) for leaf in (1, 2, 3, 4)] == [(5,), (6,), (7,), (5,)]
    assert pin((9,), 3) == (9,)
    assert policy("ecmp").pin((5, 6, 7), 2) == (5, 6, 7)


@pytest.mark.parametrize("name, expected", [
    ("ecmp", (2, 2, 0)), ("adaptive", (2, 2, 0)), ("single-path", (2, 2, 0)),
    ("flowlet", (16, 2, 0)), ("spray", (16, 16, 16))])
def test_connections_the_senders_and_the_simulator_keep(name, expected):
    p = policy(name)
    assert (p.connections_per_peer(2, 16), p.sim_channels(2, 16), p.roce_paths(16)) == expected


def test_only_spray_cuts_pieces_small_and_not_below_the_cap():
    assert policy("ecmp").piece_bytes(65536, 4) == 65536
    assert policy("spray").piece_bytes(65536, 4) == 8192
    assert policy("spray").piece_bytes(4096, 4) == 4096
    assert policy("spray").piece_bytes(65536, 65536) == 65536


def test_a_policy_that_does_not_spread_refuses_to_choose():
    with pytest.raises(NotImplementedError, match="ecmp policy does not spread"):
        policy("ecmp").choose([], 0, 0.0, 0.0, 0, lambda n: 0)


def test_a_new_policy_is_one_new_file(tmp_path):
    """The registry finds a module dropped into the package, with nothing
    else edited: its name joins the list, a fabric file may ask for it, and
    the simulator routes by it (ECMP's defaults)."""
    shutil.copytree(REPO / "policies", tmp_path / "policies",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "policies" / "valiant.py").write_text(textwrap.dedent('''
        from policies.policy import Policy, register

        @register
        class Valiant(Policy):
            name = "valiant"
            order = 6
            summary = "valiant sends each flow through a random spine first"
    '''))
    program = textwrap.dedent('''
        import policies
        from topologies.fabric import parse_fabric
        from sim.network import Network
        print(policies.POLICIES)
        fabric = parse_fabric("fabric: {spines: 2, leaves: 2, servers_per_leaf: 1}\\n"
                              "links: {server_leaf: {rate_mbit: 50}, leaf_spine: {rate_mbit: 50}}\\n"
                              "routing: {policy: valiant}\\n")
        print(fabric.policy, len(Network(fabric).path("h1", "h2")))
    ''')
    # the copied policies/ first, the rest of the project from this checkout
    out = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True,
                         text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out.split("\n")[:2] == [
        "('ecmp', 'single-path', 'stp', 'flowlet', 'spray', 'adaptive', 'dmodk', 'valiant')",
        "valiant 4"]
