"""The list tool: the entries of one folder."""

from __future__ import annotations

import asyncio
import os

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._files import display_path, existing_folder
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output

MAX_ENTRIES = 1000


class ListInput(ToolInput):
    path: str | None = Field(default=None, description="Default: the workspace.")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


class ListTool(Tool[ListInput]):
    name = "list"
    Input = ListInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: ListInput, ctx: ToolContext) -> ToolResult:
        # ROBUST-3: file work runs in a worker thread, so a file system that stops
        # answering (a hung network mount) cannot hold the turn; a cancel returns at once.
        return await asyncio.to_thread(self._run, args, ctx)

    def _run(self, args: ListInput, ctx: ToolContext) -> ToolResult:
        folder = existing_folder(ctx, args.path)
        shown = display_path(folder, ctx.workspace)
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            raise ToolError(f"Cannot list '{args.path}': {exc.strerror or exc}.") from None
        rows: list[tuple[int, str, str]] = []
        for entry in entries:
            try:
                if entry.is_symlink():
                    target = os.readlink(entry.path)
                    kind = 0 if entry.is_dir() else 1
                    rows.append((kind, entry.name, f"{entry.name}{'/' if kind == 0 else ''} -> {target}"))
                elif entry.is_dir(follow_symlinks=False):
                    rows.append((0, entry.name, entry.name + "/"))
                else:
                    size = entry.stat(follow_symlinks=False).st_size
                    rows.append((1, entry.name, f"{entry.name}  ({_size(size)})"))
            except OSError:
                rows.append((1, entry.name, entry.name))
        if not rows:
            return ToolResult(ok=True, text=f"{shown}/ is empty.")
        # Folders first, then files, each by name.
        rows.sort(key=lambda r: (r[0], r[1].lower(), r[1]))
        folders = sum(1 for r in rows if r[0] == 0)
        lines = [f"{shown}/ ({folders} folders, {len(rows) - folders} files)"]
        lines += [r[2] for r in rows[:MAX_ENTRIES]]
        if len(rows) > MAX_ENTRIES:
            lines.append(f"[... {len(rows) - MAX_ENTRIES} more entries not shown]")
        return ToolResult(ok=True, text=truncate_output("\n".join(lines), ctx.config.tool_output_limit))
