"""The layer rules: the import-linter contracts in pyproject.toml (run by `make test` as `lint-imports`) catch each
kind of violation, and what they cannot see — that starting the command line loads no Prefect, Ray or torch, because
the CLI imports flows only inside the commands that start them — is checked by importing it."""

from __future__ import annotations

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
    assert "3 kept, 0 broken" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("module, body, broken", [
    # a direct import in the library
    ("amrsim.warehouse.planted", "import ray\n", ["amrsim never imports Prefect or Ray"]),
    # inside a function: the load-time check this replaces could not see it
    ("amrsim.metrics.planted", "def f():\n    from prefect import flow\n    return flow\n",
     ["amrsim never imports Prefect or Ray"]),
    # the library reaching up to the task layer (and through it, to Ray)
    ("amrsim.encoders.planted", "import tasks.ray_map\n",
     ["amrsim never imports Prefect or Ray", "flows -> tasks -> amrsim"]),
    # a task importing a flow
    ("tasks.planted", "from flows import demo\n", ["flows -> tasks -> amrsim"]),
    # one command group importing another (the cycle cli_train -> cli once was): shared pieces go to cli.common
    ("amrsim.cli.bench", "from amrsim.cli.train import show_training_progress\n",
     ["CLI command groups are independent"]),
    # a command group importing the package, which imports every group
    ("amrsim.cli.query", "from amrsim.cli import app\n", ["CLI command groups are independent"]),
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


def test_method_packages_validate_params_without_torch_and_keep_the_flat_modules_names():
    """Each method's pipeline entry (`amrsim.methods.<name>.run`, what config validation imports) loads no torch;
    the names the flat modules had (`amrsim.methods.pear.CrossEncoder`, ...) resolve to the package's classes."""
    code = ("import importlib, sys\nfrom amrsim.methods import METHODS\n"
            "assert all(importlib.import_module(m).Params for m in METHODS.values())\n"
            "print([m for m in sys.modules if m.split('.')[0] == 'torch'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr

    from amrsim.methods import dueam, meaning, mse_amr, pear, s3bert
    from amrsim.methods.mse_amr.data import load_triples
    from amrsim.methods.pear.train import CrossEncoder
    from amrsim.methods.training import NonFiniteLossError

    assert pear.CrossEncoder is CrossEncoder and mse_amr.load_triples is load_triples
    assert s3bert.NonFiniteLossError is dueam.NonFiniteLossError is pear.NonFiniteLossError is NonFiniteLossError
    assert s3bert.train_s3bert.__module__ == "amrsim.methods.s3bert.train"
    assert dueam.train_dueam.__module__ == "amrsim.methods.dueam.train"
    assert meaning.load_trained.__module__ == "amrsim.methods.meaning.train"
    assert mse_amr.AmrEncoder.__module__ == "amrsim.methods.mse_amr.train"
    with pytest.raises(AttributeError, match="has no attribute 'nothing_here'"):
        _ = s3bert.nothing_here
