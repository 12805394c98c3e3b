"""The Plan and Work tool catalogs (MODE-1, MODE-2, MODE-3, MODE-7).

Order is part of the contract. Built-in tools are looked up by name in
:data:`BUILTIN_TOOLS` (module path, class name); external tools (exec sets, plugin tool
sets, MCP servers) come from :func:`external_tools` sources, which a session passes in.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crystal_kernel.core.errors import UserError
from crystal_kernel.tools.base import Tool

if TYPE_CHECKING:
    pass

# name -> "module:Class". Every built-in name is reserved (MODE-7), even when disabled.
BUILTIN_TOOLS: dict[str, str] = {
    "read": "crystal_kernel.tools.read:ReadTool",
    "list": "crystal_kernel.tools.list:ListTool",
    "tree": "crystal_kernel.tools.tree:TreeTool",
    "glob": "crystal_kernel.tools.glob:GlobTool",
    "grep": "crystal_kernel.tools.grep:GrepTool",
    "search": "crystal_kernel.tools.search:SearchTool",
    "todowrite": "crystal_kernel.tools.todo:TodoWriteTool",
    "todoread": "crystal_kernel.tools.todo:TodoReadTool",
    "question": "crystal_kernel.tools.question:QuestionTool",
    "skill": "crystal_kernel.tools.skill:SkillTool",
    "edit": "crystal_kernel.tools.edit:EditTool",
    "write": "crystal_kernel.tools.write:WriteTool",
    "bash": "crystal_kernel.tools.bash:BashTool",
    "bash_start": "crystal_kernel.tools.background:BashStartTool",
    "bash_status": "crystal_kernel.tools.background:BashStatusTool",
    "bash_logs": "crystal_kernel.tools.background:BashLogsTool",
    "bash_stop": "crystal_kernel.tools.background:BashStopTool",
    # Notebook files (SPEC §12): Work only; read renders notebooks in both modes.
    "notebook_edit": "crystal_kernel.tools.notebook_edit:NotebookEditTool",
    "notebook_run": "crystal_kernel.tools.notebook_run:NotebookRunTool",
    "view_image": "crystal_kernel.tools.view_image:ViewImageTool",
    "describe_image": "crystal_kernel.tools.describe_image:DescribeImageTool",
    # Notebook tools: registered only by the kernel and the magics (SPEC §11).
    "python": "crystal_kernel.jupyter.notebook_tools:PythonTool",
    "variables": "crystal_kernel.jupyter.notebook_tools:VariablesTool",
    "cell_output": "crystal_kernel.jupyter.notebook_tools:CellOutputTool",
}

PLAN_ORDER = ("read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill")
WORK_ORDER = (
    "read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill",
    "edit", "write", "bash", "bash_start", "bash_status", "bash_logs", "bash_stop",
    "notebook_edit", "notebook_run",
)
# Image tools are built-ins the seeds name (MODE-7) without placing them: they follow the
# SPEC lists in both modes (after bash_stop and the notebook tools in Work).
IMAGE_TOOLS = ("view_image", "describe_image")
NOTEBOOK_TOOLS = ("python", "variables", "cell_output")

RESERVED_NAMES = frozenset(BUILTIN_TOOLS)


def check_disabled(names: Iterable[str]) -> list[str]:
    """MODE-7: each --disable-tool value must name a built-in tool."""
    out: list[str] = []
    for name in names:
        if name not in BUILTIN_TOOLS:
            raise UserError(f"--disable-tool: unknown built-in tool '{name}'.")
        if name not in out:
            out.append(name)
    return out


def load_builtin(name: str) -> Tool:
    module_name, _, class_name = BUILTIN_TOOLS[name].partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)()


@dataclass
class CatalogOptions:
    """What decides which tools a session registers."""

    mode: str = "work"
    disabled: list[str] = field(default_factory=list)
    person_present: bool = True
    # A front with a person who cannot answer forms (an ACP client without elicitation)
    # omits the question tool but still asks for approvals.
    questions_available: bool = True
    skills_available: bool = False
    notebook: bool = False


def builtin_names(options: CatalogOptions) -> list[str]:
    """The built-in tool names for a mode, in catalog order."""
    order = list(PLAN_ORDER if options.mode == "plan" else WORK_ORDER)
    if options.notebook and options.mode == "work":
        order.extend(NOTEBOOK_TOOLS)
    order.extend(IMAGE_TOOLS)
    names = []
    for name in order:
        if name in options.disabled:
            continue
        if name == "question" and not (options.person_present and options.questions_available):
            continue
        if name == "skill" and not options.skills_available:
            continue
        names.append(name)
    return names


def build_catalog(options: CatalogOptions, external: Iterable[Tool] = ()) -> list[Tool]:
    """Built-ins in order (skipping modules that do not exist yet), then external tools
    whose catalogs include the mode. External tools must not reuse reserved names."""
    tools: list[Tool] = []
    for name in builtin_names(options):
        try:
            tools.append(load_builtin(name))
        except ModuleNotFoundError:
            continue
    seen = {t.name for t in tools}
    for tool in external:
        if tool.name in RESERVED_NAMES or tool.name in seen:
            continue
        tools.append(tool)
        seen.add(tool.name)
    return tools
