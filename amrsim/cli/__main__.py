"""`python -m amrsim.cli`: the `amrsim` command."""

from amrsim.cli import entry

entry()
