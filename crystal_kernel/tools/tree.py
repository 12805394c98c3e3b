"""The tree tool: a gitignore-aware outline of a folder, bounded in depth and entries."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import Field

from crystal_kernel.core.access import is_credential_path
from crystal_kernel.tools._files import display_path, existing_folder
from crystal_kernel.tools._walk import walk
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output

DEFAULT_DEPTH = 3
MAX_ENTRIES = 500


class TreeInput(ToolInput):
    path: str | None = Field(default=None, description="Default: the workspace.")
    depth: int | None = Field(
        default=None, ge=1, le=20, description=f"Folder levels to show (default {DEFAULT_DEPTH})."
    )


def build_tree(root: Path, depth: int, max_entries: int, prefix: tuple[str, ...] = ()) -> tuple[list[str], int]:
    """Indented lines (two spaces per level, folders end with '/') and how many entries
    were left out past ``max_entries``."""
    lines: list[str] = []
    left_out = 0
    for path, is_dir, level in walk(root, max_depth=depth, files_only=False):
        if is_credential_path(Path(*prefix, path.relative_to(root))):
            continue
        if len(lines) >= max_entries:
            left_out += 1
            continue
        lines.append("  " * (level - 1) + path.name + ("/" if is_dir else ""))
    return lines, left_out


class TreeTool(Tool[TreeInput]):
    name = "tree"
    Input = TreeInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: TreeInput, ctx: ToolContext) -> ToolResult:
        root = existing_folder(ctx, args.path)
        depth = args.depth or DEFAULT_DEPTH
        lines, left_out = await asyncio.to_thread(build_tree, root, depth, MAX_ENTRIES,
                                                 ctx.access.credential_prefix(root))
        head = display_path(root, ctx.workspace) + "/"
        if not lines:
            return ToolResult(ok=True, text=f"{head} has no entries (hidden and ignored ones are not shown).")
        text = "\n".join([head, *("  " + line for line in lines)])
        if left_out:
            text += f"\n[... {left_out} more entries not shown; outline a sub-folder or lower depth]"
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
