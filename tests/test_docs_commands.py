"""Every command the README and docs/ show, run as the docs say, and what
they quote a command printing, printed by it today.

Each runs as typed in a shell where `.venv` is not activated: the
machine's own `python` first on PATH, `.venv/bin` appended after it as the
README's "From any folder" says (under `sudo`, whose PATH has no `.venv/bin`,
not even that). So `python run_topology.py`, `python -m planner` and the
other `python -m` entries must hand themselves over to `.venv`, and
`all_gather_perf` or `fabric-plan` must be found where the README says.
They run from the repository's root, and a representative subset (one
command of each form, and the README's "From any folder" block) from
another folder too, written as the README says to write them there.

Commands that need no root run as they are (simulations, the planner,
nccl-tests' programs with --engine sim, --check), with their results in
a folder of the test's; those that build a lab (`sudo`) with --check added
(nccl-tests' programs: --dry-run), which validates every flag as the run
would without root. An example whose next line in the docs is an
`error:` must fail so (status 2); every other must succeed. What cannot
run here is named with its reason (`NOT_HERE`): set-up, the test suite,
benchmarks, kept labs and the test bed build labs or need root and
minutes, and their own tests and the privileged suite run them."""

import os
import re
import shlex
import shutil
import subprocess

import pytest

from harness import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
ANYWHERE = "/path/to/fabric-lab"        # the README's name for the repository, from elsewhere
COMMAND = re.compile(r"(sudo )?(python3? |fabric-plan |fabric-lab (?![0-9])|scripts/lab |\.venv/bin/\S+ |"
                     rf"{ANYWHERE}/\S+ |[a-z_]+_perf )")
# sudo's own PATH (Debian's secure_path): the machine's python, no .venv/bin
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOT_HERE = {
    "scripts/lab setup": "installs packages and starts Open vSwitch (run by .ci/run)",
    "scripts/lab test": "the suite itself",
    "scripts/lab run": "set-up then a lab (the privileged suite runs labs)",
    "scripts/lab bench": "set-up (packages, Open vSwitch) first, then a benchmark: 35 s to many "
                         "minutes, most of them building labs (docs/benchmarks.md)",
    "scripts/lab testbed": "containers for cluster mode (tests/privileged/test_cluster_lab.py)",
    "scripts/lab vm-test": "a VM boot (tests/privileged/test_vm.py)",
    "scripts/lab up": "a lab kept up (tests/privileged/test_lab_up.py)",
    "scripts/lab down": "a lab kept up (tests/privileged/test_lab_up.py)",
    "scripts/lab inspect": "a lab kept up (tests/privileged/test_lab_up.py)",
    "scripts/lab exec": "a lab kept up (tests/privileged/test_lab_up.py)",
    "python -m lab.cluster.cluster_preflight": "ssh to the cluster's machines",
    "python -m bench.": "a benchmark: 35 s to many minutes, most build labs (docs/benchmarks.md)",
    ".venv/bin/python -m bench.": "a benchmark: 35 s to many minutes, most build labs "
                                  "(docs/benchmarks.md)",
}
LAB_ONLY = ("--cleanup", "--cli", "--calibrate")      # no --check form: their tests run them
OUTPUTS = ("-J", "--csv", "--json-out", "--out")      # flags whose file a run writes


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


def typed(command):
    """(whether it is run with sudo, its words without sudo)."""
    words = shlex.split(command)
    return (True, words[1:]) if words[0] == "sudo" else (False, words)


def why_not_here(words):
    text = " ".join(words)
    for prefix, why in NOT_HERE.items():
        if text == prefix or text.startswith(prefix if prefix.endswith(".") else prefix + " "):
            return why
    if any(flag in words for flag in LAB_ONLY):
        return "builds or removes a lab; no --check form"
    return None


def kind(words):
    """What the command runs: "run" (run_topology.py), "nccl" (nccl-tests'
    programs), or None (the planner, scripts/lab check and plan, ...)."""
    program = words[0].rsplit("/", 1)[-1]
    if program.endswith("_perf") or (program == "lab" and words[1:2] == ["nccl"]) \
            or (words[1:2] == ["-m"] and words[2].startswith("ncclperf.")):
        return "nccl"
    if program == "fabric-lab" or any(w.endswith("run_topology.py") for w in words[1:2]):
        return "run"
    return None


def as_run_here(words, sudo: bool, tmp_path):
    """The words that run this command here: --check (--dry-run) added
    where it builds a lab, results and output files into `tmp_path`."""
    words = [w.replace(ANYWHERE, str(REPO)) for w in words]
    for i, word in enumerate(words[:-1]):
        if word in OUTPUTS and not os.path.isabs(words[i + 1]):
            words[i + 1] = str(tmp_path / os.path.basename(words[i + 1]))
    what = kind(words)
    if what:
        check = "--dry-run" if what == "nccl" else "--check"
        if sudo and check not in words:
            words.append(check)
        if check not in words:
            words += ["--results", str(tmp_path)]
    return words


def environment(sudo: bool, elsewhere: bool = False) -> dict:
    """A shell's, with .venv not activated: the machine's python first,
    .venv/bin appended (README: `export PATH="$PATH:..../.venv/bin"`), not
    under sudo; `elsewhere`: PYTHONPATH names the repository, as the README
    says to write `python -m` from another folder."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "FABRIC_LAB_NO_REEXEC")}
    env["PATH"] = SYSTEM_PATH if sudo else f"{SYSTEM_PATH}:{REPO / '.venv' / 'bin'}"
    env["PYTHONUNBUFFERED"] = "1"
    if elsewhere:
        env["PYTHONPATH"] = str(REPO)
    return env


def from_elsewhere(words):
    """The command as the README writes it from another folder: the
    repository's files by their path; console scripts and `python -m` as
    they are (PATH and PYTHONPATH do the rest)."""
    out = []
    for word in words:
        if (word.startswith(("topologies/", "scripts/", ".venv/")) or word == "run_topology.py") \
                and (REPO / word).exists():
            word = str(REPO / word)
        out.append(word)
    return out


def run_typed(words, sudo, cwd, pythonpath=False) -> subprocess.CompletedProcess:
    assert not {">", "|", "<", "&&"} & set(words), f"a shell command line: {words}"
    return subprocess.run(words, capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=environment(sudo, pythonpath))


def check_outcome(out, where, command, fails):
    if fails:
        assert out.returncode == 2 and out.stderr.startswith("error: "), (where, out.stderr)
    else:
        assert out.returncode == 0, (where, command, out.stdout[-1500:], out.stderr[-1500:])


@pytest.fixture(scope="module", autouse=True)
def not_activated():
    """The commands must meet a python that is not .venv's, and .venv there."""
    python = shutil.which("python", path=SYSTEM_PATH)
    assert python and not python.startswith(str(REPO)), f"no python on {SYSTEM_PATH}"
    assert (REPO / ".venv" / "bin" / "python").exists(), "no .venv: scripts/setup.sh builds it"


@pytest.mark.slow
@pytest.mark.parametrize("where,command,fails", CASES, ids=[c[0] for c in CASES])
def test_every_documented_command_runs_as_documented(where, command, fails, tmp_path):
    sudo, words = typed(command)
    why = why_not_here(words)
    if why:
        pytest.skip(f"{command}: {why}")
    out = run_typed(as_run_here(words, sudo, tmp_path), sudo, REPO)
    check_outcome(out, where, command, fails)


def form(words):
    """One command of each form is run from elsewhere: its program and, for
    scripts/lab and python, the subcommand or module's package."""
    head = words[0].replace(ANYWHERE, "")
    if head.endswith("python") or head == "scripts/lab":
        second = words[2] if words[1:2] == ["-m"] else words[1]
        return head, second.split(".")[0].rsplit("/", 1)[-1]
    return (head,)


def elsewhere_cases():
    seen, chosen = set(), []
    for where, command, fails in CASES:
        sudo, words = typed(command)
        if why_not_here(words):
            continue
        key = (sudo, *form(words))
        if ANYWHERE in command or key not in seen:
            seen.add(key)
            chosen.append((where, command, fails))
    return chosen


ELSEWHERE = elsewhere_cases()


@pytest.mark.slow
@pytest.mark.parametrize("where,command,fails", ELSEWHERE, ids=[c[0] for c in ELSEWHERE])
def test_documented_commands_run_from_another_folder(where, command, fails, tmp_path):
    """From a folder outside the repository, as the README writes them
    there: one command of each form (all of them from there would double
    this file's time, and the forms are what differ)."""
    sudo, words = typed(command)
    out = run_typed(from_elsewhere(as_run_here(words, sudo, tmp_path)), sudo, tmp_path,
                    pythonpath=words[1:2] == ["-m"])
    check_outcome(out, where, command, fails)


def test_the_docs_show_commands_and_most_run_here():
    """The parser finds the docs' commands (a change of format would leave
    the tests above with nothing to run), most of them run here, and every
    form runs from elsewhere too."""
    runnable = [c for c in CASES if not why_not_here(typed(c[1])[1])]
    assert len(CASES) >= 80 and len(runnable) >= 50, (len(CASES), len(runnable))
    forms = {form(typed(c[1])[1]) for c in ELSEWHERE}
    assert {("python", "run_topology"), ("python", "planner"), ("python", "ncclperf"),
            ("fabric-plan",), ("fabric-lab",), ("all_gather_perf",),
            ("scripts/lab", "nccl")} <= forms, forms


def python_m_modules():
    """Every `python -m NAME` the docs name, in a block or in the text; not
    the lab's own (the controller and lab.cluster.machine, which the lab starts in
    .venv)."""
    names = set()
    for path in DOCS:
        names |= set(re.findall(r"python -m ([a-z_][a-z_.]*[a-z_])\b(?!\.)", path.read_text()))
    return sorted(names - {"controller", "lab.cluster.machine"})


@pytest.mark.parametrize("elsewhere", [False, True], ids=["root", "elsewhere"])
@pytest.mark.parametrize("module", python_m_modules())
def test_every_documented_python_m_hands_itself_over_to_the_venv(module, elsewhere, tmp_path):
    """`python -m NAME --help` with the machine's python, which has none of
    the project's dependencies: in the repository's root, and from another
    folder with PYTHONPATH naming it (README)."""
    out = run_typed(["python", "-m", module, "--help"], False, tmp_path if elsewhere else REPO,
                    pythonpath=elsewhere)
    assert out.returncode == 0 and "Traceback" not in out.stderr, (module, out.stderr[-800:])
    assert out.stdout.strip()


def test_a_python_m_without_the_project_on_its_path_says_so_in_one_line(tmp_path):
    """What the README warns of: from another folder without PYTHONPATH,
    Python itself does not find the module (nothing of ours runs)."""
    out = run_typed(["python", "-m", "planner", "--help"], False, tmp_path)
    assert out.returncode == 1 and out.stderr.strip().endswith("No module named planner")


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
    sudo, words = typed(re.sub(r"\s+#.*$", "", command))
    out = run_typed(as_run_here(words, sudo, tmp_path), sudo, REPO)
    printed = {line.strip() for line in (out.stdout + out.stderr).splitlines()}
    missing = [line for line in shown if line.strip() not in ("...", "")
               and line.strip() not in printed]
    assert not missing, (where, missing[:3])
