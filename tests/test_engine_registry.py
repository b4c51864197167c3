"""The engines register themselves (traffic/engines/): every module of the
package that defines one is found, its promises read from the class; a new
engine is one new module, which --engine, the experiment section and
make_engine then take with nothing else edited."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from harness import REPO
from traffic.engines import ENGINES, Engine, make_engine
from topologies.fabric import load_fabric


def test_the_four_engines_and_what_each_promises():
    assert ENGINES.names() == ("agents", "iperf3", "scapy", "sim")
    promises = {name: (e.checks_data, e.needs_lab, e.max_ranks, e.runs_steps,
                       e.scale_up_in_memory) for name, e in ENGINES.items()}
    assert promises == {"agents": (True, True, 0, True, True),
                        "iperf3": (False, True, 0, False, False),
                        "scapy": (False, True, 256, False, False),
                        "sim": (False, False, 0, True, True)}
    assert all(issubclass(e, Engine) and e.help for e in ENGINES.values())


def test_an_engine_that_needs_a_lab_is_refused_without_one():
    fabric = load_fabric(REPO / "topologies" / "default.yaml")
    with pytest.raises(ValueError, match="the agents engine replays on a running lab"):
        make_engine("agents", fabric, ["h1", "h2"])
    with pytest.raises(ValueError, match="no engine called 'nccl'; there are: agents, iperf3"):
        make_engine("nccl", fabric, ["h1", "h2"])
    assert make_engine("sim", fabric, ["h1", "h2"]).__class__ is ENGINES["sim"]


def test_a_new_engine_is_one_new_file(tmp_path):
    shutil.copytree(REPO / "traffic", tmp_path / "traffic",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "traffic" / "engines" / "loopback.py").write_text(textwrap.dedent('''
        from traffic.engines import Engine, register

        @register
        class Loopback(Engine):
            name, help = "loopback", "each rank's data handed to itself"
            checks_data, needs_lab = True, True

            def __init__(self, fabric, ranks, lab):
                self.ranks = ranks
    '''))
    program = textwrap.dedent(f'''
        from runs import flags
        from runs.experiment import experiment_from
        from topologies.fabric import load_fabric
        from traffic.engines import ENGINES, make_engine
        fabric = load_fabric({str(REPO / "topologies" / "default.yaml")!r})
        args = flags.parse_args(["--engine", "loopback"], "", None)
        exp = experiment_from(fabric, {{"engine": args.engine}})
        engine = make_engine(exp.engine, fabric, ["h1", "h2"], lab=object())
        print(ENGINES.names(), exp.engine, type(engine).__name__, engine.ranks)
    ''')
    # the copied traffic/ first, the rest of the project from this checkout
    out = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == ("('agents', 'iperf3', 'loopback', 'scapy', 'sim') "
                                         "loopback Loopback ['h1', 'h2']")
