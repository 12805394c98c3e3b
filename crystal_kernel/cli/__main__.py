"""`python -m crystal_kernel.cli`: the `crystal` command."""

from crystal_kernel.cli import console

console()
