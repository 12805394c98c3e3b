"""The glob tool: files whose paths match a pattern, newest first."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import Field

from crystal_kernel.errors import ToolError
from crystal_kernel.tools._files import display_path
from crystal_kernel.tools._walk import list_files
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output
from crystal_kernel.tools.grep import compile_glob, path_allowed

MAX_FILES = 100


class GlobInput(ToolInput):
    pattern: str = Field(
        description="A glob such as '**/*.py'."
    )
    path: str | None = Field(default=None, description="Default: the workspace.")


async def glob_files(root: Path, pattern: str, *, use_rg: bool = True,
                     prefix: tuple[str, ...] = ()) -> list[tuple[float, Path]]:
    """Matching files as (mtime, path), newest first, ties by path."""
    regex = compile_glob(pattern)
    files = await list_files(root, use_rg=use_rg)

    def stat_all() -> list[tuple[float, Path]]:
        out = []
        for path in files:
            if not path_allowed(path, root, regex, prefix):
                continue
            try:
                out.append((os.stat(path).st_mtime, path))
            except OSError:
                continue
        out.sort(key=lambda item: (-item[0], str(item[1])))
        return out

    return await asyncio.to_thread(stat_all)


class GlobTool(Tool):
    name = "glob"
    Input = GlobInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: GlobInput, ctx: ToolContext) -> ToolResult:
        if not args.pattern.strip():
            raise ToolError("The pattern is empty.")
        root = ctx.access.resolve(args.path or ".")
        if not root.is_dir():
            raise ToolError(f"'{args.path}' is not a folder." if root.exists() else f"'{args.path}' does not exist.")
        found = await glob_files(root, args.pattern, prefix=ctx.access.credential_prefix(root))
        if not found:
            return ToolResult(ok=True, text=f"No files match '{args.pattern}' in {display_path(root, ctx.workspace)}.")
        lines = [display_path(p, ctx.workspace) for _, p in found[:MAX_FILES]]
        text = "\n".join(lines)
        if len(found) > MAX_FILES:
            text += (
                f"\n\n[{len(found)} files match; the newest {MAX_FILES} are shown and {len(found) - MAX_FILES} "
                "more are not. Narrow the pattern or path.]"
            )
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
