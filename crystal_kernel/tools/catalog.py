"""The Plan and Work tool catalogs (MODE-1, MODE-2, MODE-3, MODE-7).

Order is part of the contract, and so are the built-in names (reserved even when
disabled). The tools behind the names come from the ``crystal_builtin_tools`` hook:
:mod:`crystal_kernel.tools.builtins` registers the built-ins, the jupyter front its
notebook tools. External tools (exec sets, plugin tool sets, MCP servers) come from the
sources a session passes in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from crystal_kernel import plugins
from crystal_kernel.core.errors import UserError
from crystal_kernel.tools import builtins
from crystal_kernel.tools.base import Tool

PLAN_ORDER = ("read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill")
WORK_ORDER = (
    "read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill",
    "edit", "write", "bash", "bash_start", "bash_status", "bash_logs", "bash_stop",
    "notebook_edit", "notebook_run",
)
# Image tools are built-ins the seeds name (MODE-7) without placing them: they follow the
# SPEC lists in both modes (after bash_stop and the notebook tools in Work).
IMAGE_TOOLS = ("view_image", "describe_image")
# Notebook tools: registered only by the kernel and the magics (SPEC §11).
NOTEBOOK_TOOLS = ("python", "variables", "cell_output")

# Every built-in name, reserved (MODE-7) even when disabled or not registered.
BUILTIN_TOOLS: tuple[str, ...] = (*WORK_ORDER, *IMAGE_TOOLS, *NOTEBOOK_TOOLS)
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


def builtin_classes() -> dict[str, type[Tool[Any]]]:
    """The registered tool class of each built-in name. The hook is called directly, not
    through ``call_each``: a built-in that raises is a bug and must be seen."""
    plugins.register_builtin(builtins, "builtin-tools")
    found: dict[str, type[Tool[Any]]] = {}
    for answer in plugins.plugin_manager().hook.crystal_builtin_tools():
        for name, cls in answer.items():
            if name in RESERVED_NAMES:
                found.setdefault(name, cls)
    return found


def load_builtin(name: str) -> Tool[Any]:
    """A fresh instance of a built-in tool; a name no part registered is an error."""
    cls = builtin_classes().get(name)
    if cls is None:
        where = "the jupyter front (kernel or magics)" if name in NOTEBOOK_TOOLS else "crystal_kernel.tools.builtins"
        raise LookupError(f"The built-in tool '{name}' is not registered; {where} registers it.")
    return cls()


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
    order: list[str] = list(PLAN_ORDER if options.mode == "plan" else WORK_ORDER)
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


def build_catalog(options: CatalogOptions, external: Iterable[Tool[Any]] = ()) -> list[Tool[Any]]:
    """Built-ins in order, then external tools whose catalogs include the mode. External
    tools must not reuse reserved names. A built-in the mode needs that no part has
    registered raises :class:`LookupError`."""
    tools = [load_builtin(name) for name in builtin_names(options)]
    seen = {t.name for t in tools}
    for tool in external:
        if tool.name in RESERVED_NAMES or tool.name in seen:
            continue
        tools.append(tool)
        seen.add(tool.name)
    return tools
