"""Switch roles, one table (topologies/roles.py): datapath ids, network or
inside a server, the figure's rows, and a new role from a kind's module."""

import pytest

from harness import TOPOLOGIES
from topologies import roles
from topologies.fabric import load_fabric
from topologies.roles import Role, network_roles, register_role, role, tier_names

EXAMPLES = sorted(p.name for p in TOPOLOGIES.glob("*.yaml"))


@pytest.mark.parametrize("file", EXAMPLES)
def test_every_switch_has_a_role_and_its_own_datapath_id(file):
    f = load_fabric(TOPOLOGIES / file)
    assert all(s.dpid == role(s.role).dpid_base + s.index for s in f.switches)
    assert len({s.dpid for s in f.switches}) == len(f.switches)
    assert set(f.network_switches) | set(f.nodes) == set(f.switches)
    assert not set(f.network_switches) & set(f.nodes)
    assert all(s.role in network_roles() for s in f.network_switches)


def test_the_network_roles_and_the_figures_rows():
    assert network_roles() == ("leaf", "spine", "agg", "core")
    assert tier_names() == {0: "GPU / server", 1: "node", 2: "leaf", 3: "spine / agg", 4: "core"}
    assert [r for r in roles.ROLES if role(r).edge] == ["leaf", "node", "nvswitch"]
    assert role("core").stp_priority < role("spine").stp_priority < role("agg").stp_priority \
        < role("leaf").stp_priority


def test_a_role_cannot_take_another_roles_datapath_ids():
    with pytest.raises(ValueError, match="would take datapath ids 0x200 and up, those of role 'spine'"):
        register_role(Role("superspine", 0x200, 5))
    assert "superspine" not in roles.ROLES


@pytest.fixture
def superspine():
    try:
        yield register_role(Role("superspine", 0x500, 5, stp_priority=0x1000,
                                 names="super-spine switches"))
    finally:
        if "superspine" in roles.ROLES:
            roles.ROLES.remove("superspine")


def test_a_new_role_joins_the_network_and_gets_its_own_row(superspine):
    assert network_roles()[-1] == "superspine"
    assert tier_names()[5] == "superspine"
    assert not role("superspine").in_server and not role("superspine").edge
