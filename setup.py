"""Builds the C extensions (Smatch search, PENMAN reader); everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("amrsim.metrics._smatch_core", ["amrsim/metrics/_smatch_core.c"], extra_compile_args=["-O2"]),
        Extension("amrsim.amr._penman_reader", ["amrsim/amr/_penman_reader.c"], extra_compile_args=["-O2"]),
    ],
)
