"""notebook_edit: change a notebook's cells (SPEC §12), written back atomically in the
file's own layout. The same per-cell diff is the approval preview and the result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._changes import note_change
from crystal_kernel.tools._files import display_path, write_allowed
from crystal_kernel.tools._notebook import Notebook, is_notebook, load_notebook
from crystal_kernel.tools._notebook_edit import Change, apply_edit
from crystal_kernel.tools.base import (
    FileChange,
    ToolContext,
    ToolInput,
    ToolResult,
    truncate_output,
)
from crystal_kernel.tools.file_change_tool import FileChangeTool

PREVIEW_CHARS = 8000


class NotebookEditInput(ToolInput):
    path: str = Field(description="The .ipynb file.")
    action: Literal["insert", "replace", "delete", "move", "set_type", "clear_outputs"] = Field(
        description="The change.")
    cell_id: str | None = Field(default=None, description="The cell's id.")
    index: int | None = Field(default=None, ge=1, description="Cell number from 1 (the cell, or a position).")
    source: str | None = Field(default=None, description="The cell's text.")
    cell_type: Literal["code", "markdown", "raw"] | None = Field(default=None, description="Default: code.")


def _edit(path: Path, shown: str, args: NotebookEditInput) -> tuple[str, str, Change]:
    """Load, apply, serialise; returns (old text, new text, change). Nothing is written."""
    notebook: Notebook = load_notebook(path, shown)
    before = notebook.dumps()
    change = apply_edit(notebook, shown, args.action, cell_id=args.cell_id, index=args.index,
                        source=args.source, cell_type=args.cell_type)
    after = notebook.dumps()
    # Unchanged cells keep their bytes whenever the file was in a layout json can write.
    return notebook.text, (notebook.text if after == before else after), change


class NotebookEditTool(FileChangeTool[NotebookEditInput]):
    name = "notebook_edit"
    Input = NotebookEditInput

    def preview(self, args: NotebookEditInput, ctx: ToolContext) -> str | None:
        """The per-cell diff the person approves; None when the call would fail anyway
        (the tool's own error follows)."""
        try:
            path = ctx.access.resolve(args.path, write=True)
            if not (is_notebook(path) and path.is_file()):
                return None
            _, _, change = _edit(path, display_path(path, ctx.workspace), args)
        except (ToolError, OSError, ValueError):
            return None
        text = change.summary + ("\n" + change.diff if change.diff else "")
        return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "\n[... preview cut ...]"

    async def run(self, args: NotebookEditInput, ctx: ToolContext) -> ToolResult:
        path = ctx.access.resolve(args.path, write=True)
        shown = display_path(path, ctx.workspace)
        if not is_notebook(path):
            raise ToolError(f"'{args.path}' is not a .ipynb notebook; use edit for other files.")
        if not path.exists():
            raise ToolError(f"'{args.path}' does not exist; notebook_edit changes existing notebooks "
                            "(create one with write).")
        if not path.is_file():
            raise ToolError(f"'{args.path}' is not a regular file.")
        live = ctx.live_notebook_edit
        if live is not None:
            # Open in JupyterLab with real-time collaboration: edit the shared document, so the
            # person sees the change at once and their unsaved edits stay.
            answer = await live(path, args.model_dump())
            if answer and answer.get("error"):
                raise ToolError(str(answer["error"]))
            if answer and answer.get("live"):
                note_change(ctx.workspace)
                diff = str(answer.get("diff") or "")
                text = f"Edited {shown} in the open notebook (live): {answer.get('summary', '')}" + (
                    "\n" + diff if diff else "")
                return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit), display="diff")
        old, new, change = await asyncio.to_thread(_edit, path, shown, args)
        if new == old:
            return ToolResult(ok=True, text=f"{shown}: {change.summary} The file is unchanged.")
        try:
            await asyncio.to_thread(write_allowed, ctx, path, new)
        except OSError as exc:
            raise ToolError(f"Cannot write '{args.path}': {exc.strerror or exc}.") from None
        note_change(ctx.workspace)
        text = f"Edited {shown}: {change.summary}" + ("\n" + change.diff if change.diff else "")
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit), display="diff",
                          file_change=FileChange(path=str(path), old_text=old, new_text=new))

