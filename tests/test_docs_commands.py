"""Every command the README and docs/ show, run as the docs say, and what
they quote a command printing, printed by it today. Commands: those that
need no root as they are (simulations, the planner, nccl-tests' programs,
--check), those that build a lab with --check added, which validates every
flag as the run would without root. An example whose next line in the
docs is an `error:` must fail so (status 2); every other must succeed.
What cannot run here is named with its reason (`NOT_HERE`): set-up, the
test suite, benchmarks and the test bed need root and build labs, and
their own tests and the privileged suite run them."""

import re
import shlex

import pytest

from harness import REPO
from harness.commands import python

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"(sudo )?(python |fabric-plan |scripts/lab |\.venv/bin/python |"
                     r"all_reduce_perf )")
# what a docs command stands for where its file is the reader's own
PLACEHOLDERS = {"topologies/my-fabric.yaml": "topologies/default.yaml"}
NOT_HERE = {
    "scripts/lab setup": "installs packages and starts Open vSwitch (run by .ci/run)",
    "scripts/lab test": "the suite itself",
    "scripts/lab run": "set-up then a lab (the privileged suite runs labs)",
    "scripts/lab bench": "benchmarks build labs for minutes (docs/benchmarks.md)",
    "scripts/lab testbed": "containers for cluster mode (tests/privileged/test_cluster_lab.py)",
    "scripts/lab vm-test": "a VM boot (tests/privileged/test_vm.py)",
    "scripts/lab nccl": "nccl-tests' programs on a lab (tests/privileged/test_nccl_perf_lab.py)",
    "scripts/lab up": "a lab kept up (tests/privileged/test_lab_up.py)",
    "scripts/lab down": "a lab kept up", "scripts/lab inspect": "a lab kept up",
    "scripts/lab exec": "a lab kept up",
    "python -m lab.cluster_preflight": "ssh to the cluster's machines",
    "python -m bench.": "benchmarks (docs/benchmarks.md)",
    ".venv/bin/python -m bench.": "benchmarks (docs/benchmarks.md)",
    "fabric-plan": "the installed entry point: the same as python -m planner, run below",
}
LAB_ONLY = ("--cleanup", "--cli", "--calibrate")      # no --check form: their tests run them


def code_lines():
    """(file:line, the line, the lines after it in its block) of every line
    inside a fenced block of README and docs/."""
    for path in DOCS:
        lines, inside = path.read_text().splitlines(), False
        for i, line in enumerate(lines):
            if line.startswith("```"):
                inside = not inside
            elif inside:
                rest = lines[i + 1:]
                end = next((k for k, after in enumerate(rest) if after.startswith("```")),
                           len(rest))
                yield f"{path.relative_to(REPO)}:{i + 1}", line, rest[:end]


def documented():
    """(file:line, the command, whether the docs show it failing)."""
    for where, line, after in code_lines():
        text = line.strip()[2:] if line.strip().startswith("$ ") else line.strip()
        if COMMAND.match(text) and not text.endswith("\\"):
            fails = bool(after) and after[0].startswith("error:")
            yield where, re.sub(r"\s+#.*$", "", text), fails


CASES = list(documented())


def why_not_here(words):
    text = " ".join(words)
    for prefix, why in NOT_HERE.items():
        if text.startswith(prefix):
            return why
    if any(flag in words for flag in LAB_ONLY):
        return "builds or removes a lab; no --check form"
    return None


def as_run_here(words, sudo: bool, tmp_path):
    """The argv that runs this command here: run_topology.py with --check
    where it builds a lab, results into `tmp_path`; the planner as is."""
    words = [PLACEHOLDERS.get(w, w) for w in words]
    if words[:2] == ["scripts/lab", "check"]:
        return ["run_topology.py", "--check", *words[2:]]
    if words[:2] == ["scripts/lab", "plan"]:
        return ["-m", "planner", *words[2:]]
    if words[0] == "all_reduce_perf":
        words = ["python", "-m", "ncclperf.all_reduce_perf", *words[1:]]
    args = words[1:]
    if args[:1] == ["run_topology.py"] or args[:2] == ["-m", "ncclperf.all_reduce_perf"] \
            or (args[:1] == ["-m"] and args[1].startswith("ncclperf.")):
        check = "--dry-run" if args[0] == "-m" else "--check"
        if sudo and check not in args:
            args.append(check)
        if check not in args:
            args += ["--results", str(tmp_path)]
    return args


@pytest.mark.slow
@pytest.mark.parametrize("where,command,fails", CASES, ids=[c[0] for c in CASES])
def test_every_documented_command_runs_as_documented(where, command, fails, tmp_path):
    words = shlex.split(command)
    sudo = words[0] == "sudo"
    words = words[1:] if sudo else words
    why = why_not_here(words)
    if why:
        pytest.skip(f"{command}: {why}")
    out = python(*as_run_here(words, sudo, tmp_path), timeout=300)
    if fails:
        assert out.returncode == 2 and out.stderr.startswith("error: "), (where, out.stderr)
    else:
        assert out.returncode == 0, (where, command, out.stdout[-1500:], out.stderr[-1500:])


def test_the_docs_show_commands_and_most_run_here():
    """The parser finds the docs' commands (a change of format would leave
    the test above with nothing to run), and most of them run here."""
    runnable = [c for c in CASES if not why_not_here(shlex.split(c[1])[
        1 if c[1].startswith("sudo ") else 0:])]
    assert len(CASES) >= 80 and len(runnable) >= 50, (len(CASES), len(runnable))


def quoted_outputs():
    """(file:line, `$ command`, the output lines the docs quote under it)."""
    for where, line, after in code_lines():
        if line.startswith("$ "):
            end = next((k for k, a in enumerate(after) if a.startswith("$ ")), len(after))
            if end:
                yield where, line[2:], after[:end]


QUOTED = list(quoted_outputs())


@pytest.mark.slow
@pytest.mark.parametrize("where,command,shown", QUOTED, ids=[q[0] for q in QUOTED])
def test_what_the_docs_quote_a_command_printing_it_prints(where, command, shown, tmp_path):
    """Every line quoted under a `$ command` is a line the command prints
    today (these are the deterministic ones: --check, the planner, the
    simulator); `...` stands for lines left out."""
    words = shlex.split(re.sub(r"\s+#.*$", "", command))
    out = python(*as_run_here(words, False, tmp_path), timeout=300)
    printed = {line.strip() for line in (out.stdout + out.stderr).splitlines()}
    missing = [line for line in shown if line.strip() not in ("...", "")
               and line.strip() not in printed]
    assert not missing, (where, missing[:3])
