"""Builds the Smatch search extension; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("amrsim.metrics._smatch_core", ["amrsim/metrics/_smatch_core.c"], extra_compile_args=["-O2"]),
    ],
)
