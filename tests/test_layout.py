"""The house rules of the code, checked: modules of one job that fit on a few
screens, functions that do one thing, and data that flows one way (the model
imports nothing from traffic/, the controller nothing of the lab)."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("topologies", "controller", "lab", "traffic", "planner")
PRODUCT = sorted(p for d in PACKAGES + ("bench",) for p in (REPO / d).rglob("*.py")) + [
    REPO / "run_topology.py"]
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 60


def imports(path: Path):
    """Every module `path` imports, at any depth (imports inside functions too)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


@pytest.mark.parametrize("path", PRODUCT, ids=lambda p: str(p.relative_to(REPO)))
def test_modules_and_functions_are_short(path):
    source = path.read_text()
    assert source.count("\n") <= MAX_MODULE_LINES
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long


@pytest.mark.parametrize("module", ["topologies/schema.py", "topologies/fabric.py"])
def test_the_model_imports_nothing_above_it(module):
    above = [m for m in imports(REPO / module)
             if m.split(".")[0] in ("traffic", "lab", "controller", "planner", "mininet")]
    assert not above


def test_the_controller_imports_nothing_privileged():
    for path in (REPO / "controller").glob("*.py"):
        privileged = [m for m in imports(path) if m.split(".")[0] in ("lab", "mininet", "traffic")]
        assert not privileged, path.name


def test_programs_in_namespaces_import_nothing_of_the_lab():
    for path in (REPO / "traffic" / "programs").glob("*.py"):
        assert not [m for m in imports(path) if m.split(".")[0] in ("lab", "mininet")], path.name


@pytest.mark.parametrize("package", [p for d in PACKAGES for p in [REPO / d] + [
    q.parent for q in (REPO / d).glob("*/__init__.py")]], ids=lambda p: str(p.relative_to(REPO)))
def test_every_package_says_what_it_is_for(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    assert doc and len(doc.split()) >= 10
