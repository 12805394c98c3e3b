"""Crystal's built-in tools, registered through the project's own pluggy hook
(``crystal_builtin_tools``) as a plugin registers its parts.

Every module is imported here without a guard: a built-in that cannot be imported (a
missing dependency, a syntax error) fails the catalog loudly instead of silently leaving
the agent without the tool. The jupyter front registers its notebook tools itself
(:mod:`crystal_kernel.jupyter.notebook_plugin`).
"""

from __future__ import annotations

from typing import Any

from crystal_kernel.plugins import hookimpl
from crystal_kernel.tools.background import BashLogsTool, BashStartTool, BashStatusTool, BashStopTool
from crystal_kernel.tools.base import Tool
from crystal_kernel.tools.bash import BashTool
from crystal_kernel.tools.describe_image import DescribeImageTool
from crystal_kernel.tools.edit import EditTool
from crystal_kernel.tools.glob import GlobTool
from crystal_kernel.tools.grep import GrepTool
from crystal_kernel.tools.list import ListTool
from crystal_kernel.tools.notebook_edit import NotebookEditTool
from crystal_kernel.tools.notebook_run import NotebookRunTool
from crystal_kernel.tools.question import QuestionTool
from crystal_kernel.tools.read import ReadTool
from crystal_kernel.tools.search import SearchTool
from crystal_kernel.tools.skill import SkillTool
from crystal_kernel.tools.todo import TodoReadTool, TodoWriteTool
from crystal_kernel.tools.tree import TreeTool
from crystal_kernel.tools.view_image import ViewImageTool
from crystal_kernel.tools.write import WriteTool

TOOLS: tuple[type[Tool[Any]], ...] = (
    ReadTool, ListTool, TreeTool, GlobTool, GrepTool, SearchTool, TodoWriteTool, TodoReadTool, QuestionTool,
    SkillTool, EditTool, WriteTool, BashTool, BashStartTool, BashStatusTool, BashLogsTool, BashStopTool,
    NotebookEditTool, NotebookRunTool, ViewImageTool, DescribeImageTool,
)


@hookimpl
def crystal_builtin_tools() -> dict[str, type[Tool[Any]]]:
    return {cls.name: cls for cls in TOOLS}
