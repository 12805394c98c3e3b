"""The notebook tools (python, variables, cell_output: SPEC §11), which only the kernel and
the magics offer: the jupyter front registers them with the plugin manager itself
(:func:`register`), so the catalog never reaches up into the front."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crystal_kernel import plugins
from crystal_kernel.plugins import hookimpl

if TYPE_CHECKING:
    from crystal_kernel.tools.base import Tool


@hookimpl
def crystal_builtin_tools() -> dict[str, type[Tool[Any]]]:
    # Imported when a catalog is built, not when the kernel starts: the tools bring in
    # pydantic and the tool base, which the kernel's start to idle does not need.
    from crystal_kernel.jupyter.notebook_tools import CellOutputTool, PythonTool, VariablesTool

    return {cls.name: cls for cls in (PythonTool, VariablesTool, CellOutputTool)}


def register() -> None:
    """Offer the notebook tools to notebook sessions (idempotent)."""
    import sys

    plugins.register_builtin(sys.modules[__name__], "notebook-tools")
