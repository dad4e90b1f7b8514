"""The layer rules: the import-linter contracts in pyproject.toml (run by `make test` as `lint-imports`) catch each
kind of violation; what they cannot see is checked here: no import circle inside `amrsim` (imports inside functions
included), no module loaded by a string name, and that starting the command line loads no Prefect, Ray or torch,
because the CLI imports flows only inside the commands that start them."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGES = ("amrsim", "tasks", "flows")


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of the three packages' Python files and pyproject.toml, to plant violations in."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=lambda d, names: [n for n in names if not n.endswith(".py") and
                                                 not (Path(d) / n).is_dir() or n == "__pycache__"])
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def lint_imports(checkout: Path) -> subprocess.CompletedProcess:
    importlinter = pytest.importorskip("importlinter",
                                       reason="import-linter is a dev dependency: pip install -e '.[dev]'")
    site = Path(importlinter.__file__).resolve().parents[1]
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--no-cache"], capture_output=True, text=True, cwd=checkout,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(checkout), str(site)])})


def plant(checkout: Path, module: str, body: str) -> None:
    path = checkout.joinpath(*module.split(".")).with_suffix(".py")
    path.write_text(textwrap.dedent(body), encoding="utf-8")


@pytest.mark.slow
def test_contracts_hold_on_this_checkout(checkout):
    proc = lint_imports(checkout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "5 kept, 0 broken" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("module, body, broken", [
    # a direct import in the library
    ("amrsim.warehouse.planted", "import ray\n", ["amrsim never imports Prefect or Ray"]),
    # inside a function: the load-time check this replaces could not see it
    ("amrsim.metrics.planted", "def f():\n    from prefect import flow\n    return flow\n",
     ["amrsim never imports Prefect or Ray"]),
    # the library reaching up to the task layer (and through it, to Ray)
    # (and through the task layer to the config, above the encoders)
    ("amrsim.encoders.planted", "import tasks.ray_map\n",
     ["amrsim never imports Prefect or Ray", "flows -> tasks -> amrsim", "amrsim library layers"]),
    # a task importing a flow
    ("tasks.planted", "from flows import demo\n", ["flows -> tasks -> amrsim"]),
    # one command group importing another (the cycle cli_train -> cli once was): shared pieces go to cli.common
    ("amrsim.cli.bench", "from amrsim.cli.train import show_training_progress\n",
     ["CLI command groups are independent"]),
    # a command group importing the package, which imports every group
    ("amrsim.cli.query", "from amrsim.cli import app\n", ["CLI command groups are independent"]),
    # the pure core reaching up to the application layer, inside a function
    ("amrsim.methods.planted", "def f():\n    from amrsim.stages import train\n    return train\n",
     ["amrsim library layers"]),
    # a lower core package importing a higher one
    ("amrsim.warehouse.planted", "from amrsim.metrics import engine\n", ["amrsim library layers"]),
    # an evaluator reading the loaded config
    ("amrsim.evaluate.planted", "from amrsim.config import LoadedConfig\n", ["amrsim library layers"]),
    # two siblings of one layer depending on each other
    ("amrsim.encoders.planted", "from amrsim.translate import marian\n", ["amrsim library layers"]),
    # an evaluator or a method reading the warehouse itself (down the layers, but not the pure core's to do)
    ("amrsim.evaluate.planted", "from amrsim.warehouse import Warehouse\n",
     ["evaluate, metrics and methods do not import the warehouse"]),
    ("amrsim.methods.planted", "def f():\n    from amrsim.warehouse.store import OK\n    return OK\n",
     ["evaluate, metrics and methods do not import the warehouse"]),
])
def test_contracts_catch_a_planted_violation(checkout, module, body, broken):
    plant(checkout, module, body)
    proc = lint_imports(checkout)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    for name in broken:
        assert f"{name} BROKEN" in proc.stdout
    assert f"{len(broken)} broken" in proc.stdout
    assert module in proc.stdout  # the report names the offending module


@pytest.mark.slow
def test_cli_start_up_loads_no_prefect_ray_or_torch():
    code = ("import sys, amrsim.cli, amrsim.config, amrsim.stages, amrsim.ingest, amrsim.encoders.cache, "
            "amrsim.evaluate.sts, amrsim.warehouse.query, amrsim.console, amrsim.methods\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('prefect', 'ray', 'torch')]\n"
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_method_params_validate_without_torch_and_packages_say_what_they_offer():
    """Each method's `Params` (what config validation uses) is `amrsim.methods.<name>.params.Params` and loads no
    torch; each core package lists its public names in `__all__`, and every one of them resolves."""
    code = ("import sys\nfrom amrsim.methods import METHODS\n"
            "assert all(p.__module__ == f'amrsim.methods.{m}.params' for m, p in METHODS.items()), METHODS\n"
            "print([m for m in sys.modules if m.split('.')[0] == 'torch'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr

    import importlib

    from amrsim.methods import METHODS

    packages = ["amrsim.methods", *(f"amrsim.methods.{m}" for m in METHODS), "amrsim.evaluate", "amrsim.metrics",
                "amrsim.encoders", "amrsim.amr", "amrsim.warehouse", "amrsim.augment", "amrsim.translate",
                "amrsim.ingest", "amrsim.stages"]
    for name in packages:
        package = importlib.import_module(name)
        assert package.__all__, name
        missing = [n for n in package.__all__ if not hasattr(package, n)]
        assert missing == [], f"{name}.__all__ names what it does not have: {missing}"
        assert "__getattr__" not in vars(package), f"{name} resolves names lazily"


def import_circles(package: str, path: Path) -> list[list[str]]:
    """The import circles among `package`'s modules (strongly connected components of more than one module; imports
    inside functions count: grimp reads every import statement)."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter: pip install -e '.[dev]'")
    sys.path.insert(0, str(path))
    try:
        graph = grimp.build_graph(package, cache_dir=None)
    finally:
        sys.path.remove(str(path))
    # an import of an enclosing package from inside it is left out: Python imports the package first anyway, and
    # grimp records `from amrsim.amr import _penman_reader` (a C extension it cannot see) as importing `amrsim.amr`
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if not m.startswith(i + ".")}
             for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges.get(module, ()):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(edges):
        if module not in index:
            visit(module)
    return circles


@pytest.mark.slow
def test_no_import_circle_in_the_library():
    assert import_circles("amrsim", ROOT) == []


def test_the_circle_check_finds_a_planted_circle(tmp_path):
    """The check above can fail: a circle made of a module-top import and an import inside a function is found."""
    package = tmp_path / "planted_package"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "a.py").write_text("from planted_package import b\n", encoding="utf-8")
    (package / "b.py").write_text("def f():\n    from planted_package import a\n    return a\n", encoding="utf-8")
    (package / "c.py").write_text("from planted_package import a\n", encoding="utf-8")
    assert import_circles("planted_package", tmp_path) == [["planted_package.a", "planted_package.b"]]


def modules_loaded_by_name(source: str) -> list[int]:
    """Lines of `source` that load a module by a string name (importlib.import_module, __import__,
    importlib.util.spec_from_file_location / module_from_spec)."""
    names = {"import_module", "__import__", "spec_from_file_location", "module_from_spec"}
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in names)
        or (isinstance(node.func, ast.Attribute) and node.func.attr in names))]


def test_no_module_is_loaded_by_a_string_name():
    found = {str(f.relative_to(ROOT)): lines for f in sorted((ROOT / "amrsim").rglob("*.py"))
             if (lines := modules_loaded_by_name(f.read_text(encoding="utf-8")))}
    assert found == {}
    assert modules_loaded_by_name("import importlib\nm = importlib.import_module('amrsim.' + name)\n") == [2]


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of each function of `source` longer than `limit` lines, its nested functions counted in it."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit]


def test_no_function_in_the_training_core_is_over_80_lines():
    found = {str(f.relative_to(ROOT)): long for f in sorted((ROOT / "amrsim" / "methods").rglob("*.py"))
             if (long := long_functions(f.read_text(encoding="utf-8"), 80))}
    assert found == {}
    assert long_functions("def f():\n" + "    x = 1\n" * 80, 80) == [("f", 81)]
