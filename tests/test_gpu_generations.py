"""GPU generations and server models, one module each (topologies/gpus/,
topologies/servers/): every generation supplies every figure the NCCL model
reads, a module missing one is refused, and a new generation or server is
found from its module alone and priced by the model."""

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

import sim.nccl as nccl
import topologies.gpus as gpus_package
import topologies.servers as servers_package
from topologies.gpus import GENERATIONS, Generation, generation
from topologies.gpus.generation import NCCL_TUNER, REGISTRY, REQUIRED
from topologies.hardware import SERVERS, server

GPUS_DIR = Path(gpus_package.__file__).parent
SERVERS_DIR = Path(servers_package.__file__).parent


def test_the_generations_oldest_first():
    assert GENERATIONS == ("volta", "ampere", "hopper", "blackwell", "cdna3", "cdna4")
    assert [g for g in GENERATIONS if generation(g).rccl] == ["cdna3", "cdna4"]


@pytest.mark.parametrize("name", GENERATIONS)
def test_every_generation_supplies_every_field_the_model_reads(name):
    gen = generation(name)
    assert gen.missing() == ()
    for speeds in (gen.intra_speeds, gen.inter_speeds):
        assert speeds and list(speeds) == sorted(speeds, reverse=True) and speeds[-1] > 0
    for flag in ("keeps_slow_channels", "doubles_across_servers", "tree_at_the_nics"):
        assert isinstance(getattr(gen, flag), bool)
    if not gen.rccl:
        assert all(len(getattr(gen, f)) == 3 for f in ("per_channel_tree_ll128",
                   "per_channel_tree", "per_channel_nvls_tree"))
        assert len(gen.nvls_channels) == 2 and 0 <= gen.nvls_efficiency <= 1
    assert set(gen.reads()) == set(REQUIRED + (() if gen.rccl else NCCL_TUNER))
    assert gen.sources


def test_a_generation_missing_a_field_is_refused_with_its_name():
    class Half(type(generation("hopper"))):
        name = "half"
        per_channel_tree = None
    with pytest.raises(ValueError, match="GPU generation half leaves unset what the NCCL "
                                         "model reads: per_channel_tree"):
        REGISTRY.register(Half)
    assert "half" not in REGISTRY


def test_an_rccl_generation_need_not_give_nccls_tuner_rows():
    class Amd(Generation):
        name, library = "amd-test", "rccl"
        intra_speeds = inter_speeds = (48, 24)
        keeps_slow_channels = doubles_across_servers = tree_at_the_nics = False
    assert Amd().missing() == ()
    assert Generation().missing() == REQUIRED + NCCL_TUNER


def modules(folder: Path, skip: str):
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", skip))


def test_each_module_of_gpus_registers_one_generation():
    assert sorted(type(g).__module__.rsplit(".", 1)[1] for g in REGISTRY.values()) == \
        modules(GPUS_DIR, "generation")


def test_each_module_of_servers_registers_one_server_in_order():
    assert list(SERVERS) == ["dgx-1v", "dgx-a100", "hgx-h100", "hgx-h200", "hgx-b200",
                             "gb200-nvl72", "gb300-nvl72", "mi300x", "mi325x", "mi355x"]
    found = sorted(m for m in modules(SERVERS_DIR, "sold")
                   if any(isinstance(v, servers_package.Server) and v.name in SERVERS
                          for v in vars(importlib.import_module(
                              f"topologies.servers.{m}")).values()))
    assert found == modules(SERVERS_DIR, "sold") and len(found) == len(SERVERS)
    assert all(s.gpu.arch in GENERATIONS for s in SERVERS.values())


def test_an_unknown_server_is_one_sentence():
    with pytest.raises(ValueError, match=r"^no server called 'dgx-2'; there are: dgx-1v, "):
        server("dgx-2")


RUBIN = '''
"""A made-up generation for the test: Blackwell's figures, faster NVLink."""
from topologies.gpus.blackwell import Blackwell
from topologies.gpus.generation import Gpu, register


@register
class Rubin(Blackwell):
    name = "rubin"
    order = 6


R100 = Gpu("R100", "rubin", 18, 80.0, True, 5000.0, 288.0, 13.0)
'''
RUBIN_SERVER = '''
from topologies.gpus.rubin import R100
from topologies.servers.sold import Server, register

HGX_R100 = register(Server("hgx-r100", R100, 8, 8, 800, 96.0, "intel"))
'''


@pytest.fixture
def rubin(tmp_path):
    """A generation's module and a server's, each on its package's path;
    taken away afterwards."""
    (tmp_path / "gpus").mkdir()
    (tmp_path / "servers").mkdir()
    (tmp_path / "gpus" / "rubin.py").write_text(textwrap.dedent(RUBIN))
    (tmp_path / "servers" / "hgx_r100.py").write_text(textwrap.dedent(RUBIN_SERVER))
    gpus_package.__path__.append(str(tmp_path / "gpus"))
    servers_package.__path__.append(str(tmp_path / "servers"))
    try:
        yield
    finally:
        gpus_package.__path__.remove(str(tmp_path / "gpus"))
        servers_package.__path__.remove(str(tmp_path / "servers"))
        for registry, name in ((SERVERS, "hgx-r100"), (REGISTRY, "rubin")):
            if name in registry:
                registry.remove(name)
        for module in ("topologies.gpus.rubin", "topologies.servers.hgx_r100"):
            sys.modules.pop(module, None)
        importlib.invalidate_caches()


def test_a_new_generation_and_server_are_found_from_their_modules_alone(rubin):
    from registries import discover
    discover("topologies.gpus", gpus_package.__path__, skip=("generation",))
    discover("topologies.servers", servers_package.__path__, skip=("sold",))
    assert REGISTRY.names()[-1] == "rubin" and list(SERVERS)[-1] == "hgx-r100"
    # inside one server its faster NVLink carries Blackwell's rings further
    faster = nccl.predict(nccl.cluster(server("hgx-r100"), 1), "allreduce", 1 << 30, "ring")
    b200 = nccl.predict(nccl.cluster(server("hgx-b200"), 1), "allreduce", 1 << 30, "ring")
    assert faster.chosen.time_us < b200.chosen.time_us
