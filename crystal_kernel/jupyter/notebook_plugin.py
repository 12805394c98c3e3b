"""The notebook tools (python, variables, cell_output: SPEC §11), which only the kernel and
the magics offer: the jupyter front registers them with the plugin manager itself
(:func:`register`), so the catalog never reaches up into the front."""

from __future__ import annotations

from typing import Any

from crystal_kernel import plugins
from crystal_kernel.jupyter.notebook_tools import CellOutputTool, PythonTool, VariablesTool
from crystal_kernel.plugins import hookimpl
from crystal_kernel.tools.base import Tool


@hookimpl
def crystal_builtin_tools() -> dict[str, type[Tool[Any]]]:
    return {cls.name: cls for cls in (PythonTool, VariablesTool, CellOutputTool)}


def register() -> None:
    """Offer the notebook tools to notebook sessions (idempotent)."""
    import sys

    plugins.register_builtin(sys.modules[__name__], "notebook-tools")
