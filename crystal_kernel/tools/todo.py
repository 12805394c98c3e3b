"""todowrite / todoread: the session's todo list (MODE-5: it belongs to the session, not
the mode)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.todos import Todo
from crystal_kernel.tools.base import EmptyInput, Risk, Tool, ToolContext, ToolInput, ToolResult

MAX_TODOS = 200
MAX_CONTENT_CHARS = 2000
MARKS = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}


class TodoItem(ToolInput):
    content: str = Field(description="One short imperative sentence.")
    status: Literal["pending", "in_progress", "completed"]


class TodoWriteInput(ToolInput):
    todos: list[TodoItem] = Field(description="The whole list; it replaces the current one.")


def render_todos(todos: list[Todo]) -> str:
    """The list as the model and a person read it, with a one-line count."""
    if not todos:
        return "The todo list is empty."
    counts = {s: sum(1 for t in todos if t.status == s) for s in MARKS}
    lines = [f"{MARKS[t.status]} {t.content}" for t in todos]
    lines.append(
        f"({len(todos)} todos: {counts['completed']} completed, {counts['in_progress']} in progress, "
        f"{counts['pending']} pending)"
    )
    return "\n".join(lines)


class TodoWriteTool(Tool[TodoWriteInput]):
    name = "todowrite"
    Input = TodoWriteInput
    risk = Risk.READ

    async def run(self, args: TodoWriteInput, ctx: ToolContext) -> ToolResult:
        if len(args.todos) > MAX_TODOS:
            raise ToolError(f"The list has {len(args.todos)} todos; at most {MAX_TODOS} are kept.")
        new: list[Todo] = []
        for i, item in enumerate(args.todos, start=1):
            content = item.content.strip()
            if not content:
                raise ToolError(f"Todo {i} has empty content.")
            if len(content) > MAX_CONTENT_CHARS:
                raise ToolError(f"Todo {i} is {len(content)} characters long; keep each under {MAX_CONTENT_CHARS}.")
            new.append(Todo(content=content, status=item.status))
        # The session replaces its list (in place: fronts and its document hold the list).
        ctx.replace_todos(new)
        return ToolResult(ok=True, text=render_todos(ctx.todos))


class TodoReadTool(Tool[EmptyInput]):
    name = "todoread"
    Input = EmptyInput
    risk = Risk.READ

    async def run(self, args: EmptyInput, ctx: ToolContext) -> ToolResult:
        return ToolResult(ok=True, text=render_todos(ctx.todos))
