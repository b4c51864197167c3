"""scripts/lab, the one entry point: its paths mean what they mean where the
user stands, and every benchmark under bench/ is one of its names."""

import re
import subprocess

import pytest

from harness import REPO, TOPOLOGIES

LAB = REPO / "scripts" / "lab"
VENV = REPO / ".venv" / "bin" / "python"


@pytest.mark.skipif(not VENV.exists(), reason="needs the set-up's .venv (scripts/lab setup)")
def test_check_and_plan_take_a_file_in_the_users_own_folder(tmp_path):
    (tmp_path / "my.yaml").write_text((TOPOLOGIES / "default.yaml").read_text())
    check = subprocess.run([str(LAB), "check", "my.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0 and check.stdout.startswith("my.yaml: valid"), check.stderr
    plan = subprocess.run([str(LAB), "plan", "--fabric", "my.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0 and plan.stdout.startswith("Plan for 4 GPUs"), plan.stderr


def test_every_benchmark_is_a_name_of_lab_bench():
    listed = re.search(r"\n      ([a-z|]+)\)\n\s+name=\$1", LAB.read_text()).group(1).split("|")
    benches = sorted(p.name[:-len("_bench.py")] for p in (REPO / "bench").glob("*_bench.py"))
    assert sorted(listed) == benches
