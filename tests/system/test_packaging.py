"""pyproject.toml declares what a user's install gets: every package-data pattern names files that exist, and the
C extensions declared there build into a wheel next to the data files the code reads."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
import zipfile

import pytest

from tests.helpers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]


def test_every_package_data_pattern_matches_a_file():
    for package, patterns in SETUPTOOLS["package-data"].items():
        base = ROOT.joinpath(*package.split("."))
        for pattern in patterns:
            assert list(base.glob(pattern)), f"package-data {package}: {pattern!r} matches no file under {base}"


def test_files_the_code_reads_are_package_data():
    shipped = {path for package, patterns in SETUPTOOLS["package-data"].items()
               for pattern in patterns for path in ROOT.joinpath(*package.split(".")).glob(pattern)}
    needed = [*(ROOT / "amrsim" / "amr" / "ud_lexicons").glob("*.json"), *(ROOT / "amrsim" / "sample").glob("*.tsv")]
    assert needed and not [p for p in needed if p not in shipped]


def test_declared_extensions_have_sources_and_import():
    modules = SETUPTOOLS["ext-modules"]
    assert {m["name"] for m in modules} == {"amrsim.metrics._smatch_core", "amrsim.amr._penman_reader",
                                            "amrsim.metrics._wwlk_core",
                                            "amrsim.warehouse._keys"}  # optional (OpenSSL headers), built here
    for module in modules:
        assert all((ROOT / src).is_file() for src in module["sources"]), module
        loaded = importlib.import_module(module["name"])
        assert loaded.__file__.endswith(".so"), f"{module['name']} is not the compiled extension: {loaded.__file__}"


@pytest.mark.slow
def test_wheel_holds_the_extensions_and_the_package_data(tmp_path):
    """Builds a wheel from this checkout with the installed setuptools (no network)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("amrsim-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in SETUPTOOLS["ext-modules"]:
        stem = module["name"].replace(".", "/")
        assert any(n.startswith(stem) and n.endswith(".so") for n in names), f"{stem}*.so missing from {wheel.name}"
    for data in ("amrsim/amr/ud_lexicons/concepts.json", "amrsim/amr/ud_lexicons/roles.json",
                 "amrsim/amr/ud_lexicons/words.json", "amrsim/sample/sts_pairs.tsv"):
        assert data in names
