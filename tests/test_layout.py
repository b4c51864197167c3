"""The house rules of the code, checked: data flows one way through declared
layers, no module imports itself round a circle, every package says what it
is for, no import is unused and no name undefined, and functions do one thing.
A module may be as long as its one subject needs (there is no line cap)."""

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parent.parent

# The layers, bottom first: a module may import its own package and any layer
# below, never one above (docs/how-it-works.md draws them).
LAYERS = (
    ("registries", "toolkit"),  # the one registry pattern; errors, units, YAML, validators
    ("policies", "networks"),  # routing policies; network technologies and their figures
    ("topologies",),          # the model: YAML to a Fabric
    ("collectives",),         # what a collective is: schedules, data types, busbw
    ("traces",),              # a job's recorded trace (Kineto, execution trace) read in
    ("controller",),          # routing: the pure plan, and the os-ken shim over it
    ("sim",),                 # the flow-level simulator, on the controller's routes
    ("planner",),             # closed forms and the simulator at any scale
    ("programs",),            # what runs inside a server's namespace
    ("lab",),                 # a fabric built for real on this host (or several)
    ("traffic",),             # engines and measurement on a live lab
    ("runs",),                # an experiment swept on an engine: the run record
    ("report",),              # the run record as tables, CSV and figures
    ("runner", "run_topology", "bench", "harness", "ncclperf",
     "devtools"),             # the run orchestrator, command lines, benchmarks, their
                              # harness, the test bed and VM test
)
# command lines inside a lower package: they sit on the top layer
ENTRY_POINTS = ("planner.cli", "planner.__main__", "controller.__main__")
LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}
PRODUCT = sorted(p for package in LAYER for p in (
    [REPO / f"{package}.py"] if (REPO / f"{package}.py").is_file()
    else (REPO / package).rglob("*.py")))
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PRODUCT}


def imports(path: Path):
    """Every project module `path` imports, at any depth (imports inside
    functions too): `from a import b` names the module a.b where there is one."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                     for alias in node.names]
        else:
            continue
        yield from (n for n in names if n.split(".")[0] in LAYER)


def layer(module: str) -> int:
    if module in ENTRY_POINTS:
        return len(LAYERS) - 1
    return LAYER[module.split(".")[0]]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_against_the_layer_order(module):
    above = [m for m in imports(MODULES[module])
             if m.split(".")[0] != module.split(".")[0] and layer(m) > layer(module)]
    assert not above, f"{module} (layer {LAYERS[layer(module)]}) imports from above: {above}"


SPEC_PART = re.compile(r"\.spec(\[|\.get\()")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.split(".")[0] != "topologies"))
def test_the_fabric_is_read_by_its_fields_outside_the_loader(module):
    """Outside topologies/ (the loader and the model) a fabric is read by its
    typed fields (`fabric.nic_rate_mbit`, `fabric.link_classes`,
    `fabric.routing`, ...), never by picking at its normalised spec; the
    spec is handed on whole only (to the controller, to a machine, to a digest)."""
    lines = [f"{n}: {line.strip()}" for n, line in
             enumerate(MODULES[module].read_text().splitlines(), 1) if SPEC_PART.search(line)]
    assert not lines, f"{module} reads the fabric's spec: {lines}"


def test_the_spec_reading_check_finds_a_read():
    assert SPEC_PART.search('rate = fabric.spec["links"]["server_leaf"]["rate_mbit"]')
    assert SPEC_PART.search('x = self.fabric.spec.get("experiment")')
    assert not SPEC_PART.search("json.dumps(fabric.spec)") and not SPEC_PART.search(
        "link.spec.rate_mbit")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path):
    """A name another module keeps to itself: `from module import _name`,
    or `module._name` where `module` is one of the project's, imported."""
    tree = ast.parse(path.read_text())
    modules = {}                                    # local name -> project module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield from (f"{node.module}.{a.name}" for a in node.names if _private(a.name))
            modules.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                            if f"{node.module}.{a.name}" in MODULES})
        elif isinstance(node, ast.Import):
            modules.update({a.asname or a.name: a.name for a in node.names
                            if a.name in MODULES and (a.asname or "." not in a.name)})
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and _private(node.attr)):
            yield f"{modules[node.value.id]}.{node.attr}"


@pytest.mark.parametrize("path", PRODUCT + sorted((REPO / "tests").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_imports_a_private_name_of_another(path):
    assert list(private_imports(path)) == []


def test_the_private_import_check_finds_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from report.tables import _auto, nccl_table\nfrom x import __version__\n"
                     "from sim.nccl import rails\nimport planner.steptime as ST\nimport os\n"
                     "rails._share(1)\nST._dur(2)\nos._exit(0)\n")
    assert list(private_imports(probe)) == ["report.tables._auto", "sim.nccl.rails._share",
                                            "planner.steptime._dur"]


def test_no_two_modules_share_a_name():
    """A module's name says its one subject: the same name in two packages
    (two sweep.py, two cli.py) makes the reader ask which."""
    names = {}
    for module in MODULES:
        leaf = module.rsplit(".", 1)[-1]
        if MODULES[module].name not in ("__init__.py", "__main__.py"):
            names.setdefault(leaf, []).append(module)
    assert not {leaf: where for leaf, where in names.items() if len(where) > 1}


def test_every_package_has_a_layer():
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")} - {"tests"}
    assert packages <= set(LAYER), f"packages with no layer: {packages - set(LAYER)}"


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycles_finds_a_circle_and_only_a_circle():
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert cycles({"a": ["b"], "b": [], "c": ["b"]}) == []


def test_no_module_imports_itself_round_a_circle():
    graph = {m: sorted({i for i in imports(p) if i in MODULES and i != m})
             for m, p in MODULES.items()}
    assert not cycles(graph)


def test_no_unused_import_and_no_undefined_name():
    """pyflakes' checks (flake8 --select=F) over the product and the tests."""
    done = subprocess.run([sys.executable, "-m", "flake8", "--select=F", *sorted(
        {str(p.relative_to(REPO)).split("/")[0] for p in PRODUCT}), "tests"],
        cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(REPO)))
def test_functions_are_short(path):
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long


def test_programs_in_namespaces_import_only_collectives_and_policies():
    """They run in a server's namespace, started with `python -m`: nothing of
    the lab, the engines or the runs may come along."""
    for path in (REPO / "programs").glob("*.py"):
        others = {m.split(".")[0] for m in imports(path)} - {"programs", "collectives",
                                                              "policies"}
        assert not others, path.name


@pytest.mark.parametrize("package", sorted(
    p.parent for p in REPO.glob("*/__init__.py") if p.parent.name in LAYER) + sorted(
    p.parent for p in REPO.glob("*/*/__init__.py") if p.parent.parent.name in LAYER),
    ids=lambda p: str(p.relative_to(REPO)))
def test_every_package_says_what_it_is_for(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    assert doc and len(doc.split()) >= 10


def test_the_experiment_is_plain_data():
    """What an experiment is, without what is done with it: checking,
    planning and cutting it into jobs are functions of runs/experiment.py."""
    from dataclasses import fields, is_dataclass
    from runs.experiment import Experiment
    assert is_dataclass(Experiment)
    own = [name for name, value in vars(Experiment).items()
           if callable(value) and not name.startswith("__")]
    assert own == [] and len(fields(Experiment)) == 22


NAMED_BY_REGISTRY = ("engine", "policy", "technology")     # what a registry names


def compared_names(path: Path):
    """`x.engine == "sim"`, `policy in ("spray", ...)`: a registered kind of
    thing picked out by its name rather than by what its class says."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = [s for s in sides if isinstance(s, ast.Attribute) and s.attr in NAMED_BY_REGISTRY
                 or isinstance(s, ast.Name) and s.id in NAMED_BY_REGISTRY]
        text = [s for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)
                or isinstance(s, (ast.Tuple, ast.List)) and s.elts and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in s.elts)]
        if named and text:
            yield node.lineno


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(REPO)))
def test_engines_policies_and_technologies_are_asked_not_named(path):
    """Outside its own package, an engine, a routing policy or a network
    technology is asked what it does (ENGINES[name].needs_lab,
    policy(name).moves_elephants, ...), never compared with its name."""
    own = {"engine": "traffic/engines", "policy": "policies", "technology": "networks"}
    if any(str(path.relative_to(REPO)).startswith(p) for p in own.values()):
        return
    assert list(compared_names(path)) == []


def test_the_name_comparison_check_finds_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('if exp.engine == "sim" or policy in ("spray", "flowlet"):\n    pass\n'
                     'if link.kind == "send" or exp.engine is None:\n    pass\n')
    assert list(compared_names(probe)) == [1, 1]


def algorithm_names_in(path: Path, names) -> List[int]:
    """The lines where a registered algorithm's name is written as a string
    (docstrings aside): the code picks that algorithm out by its name."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in names and id(n) not in docs]


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(REPO)))
def test_algorithms_are_named_only_by_their_package(path):
    """Outside collectives/ (the algorithms, their registry and the schedules'
    helpers), an algorithm is reached by what the registry derives from what
    it says (FLAT_RING, SERVER_RINGS, BY_SERVER, FOLDING, .nccl), never by its
    name; sim/nccl/ names NCCL's own algorithms, a namespace of its own; a
    benchmark (bench/) picks the algorithms it measures as a user does on the
    command line, as the tests do."""
    from collectives.registry import ALL_ALGORITHMS
    if str(path.relative_to(REPO)).startswith(("collectives/", "sim/nccl/", "bench/")):
        return
    assert algorithm_names_in(path, set(ALL_ALGORITHMS)) == []


def test_the_algorithm_name_check_finds_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('"""ring and rhd in a docstring are words."""\n'
                     'algorithm = "hierarchical" if local > 1 else "ring"\n')
    assert algorithm_names_in(probe, {"ring", "hierarchical", "rhd"}) == [2, 2]
