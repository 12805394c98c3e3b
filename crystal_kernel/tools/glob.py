"""The glob tool: files whose paths match a pattern, newest first."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from pydantic import Field

from crystal_kernel.core.access import is_credential_parts
from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._files import display_path
from crystal_kernel.tools._walk import list_relative
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output
from crystal_kernel.tools.grep import compile_glob

MAX_FILES = 100


class GlobInput(ToolInput):
    pattern: str = Field(
        description="A glob such as '**/*.py'."
    )
    path: str | None = Field(default=None, description="Default: the workspace.")


def literal_suffix(pattern: str) -> str:
    """The literal text every match must end with (``.py`` for ``**/*.py``): a cheap
    ``str.endswith`` test before the regex. Empty when the pattern ends in a wildcard."""
    tail = re.split(r"[*?\[\]{}\\/]", pattern)[-1]
    return tail


async def glob_files(root: Path, pattern: str, *, use_rg: bool = True,
                     prefix: tuple[str, ...] = ()) -> list[tuple[float, str]]:
    """Matching files as (mtime, path relative to ``root`` in POSIX form), newest first,
    ties by path.

    Built for 50,000-file trees: the listing stays relative strings, the literal suffix
    and then the (linear-time) glob regex filter it, and only matches are stat'ed.
    ``prefix``: root's components below its allowed folder (the credential rules apply
    to the path in that folder, TRUST-4)."""
    regex = compile_glob(pattern)
    suffix = literal_suffix(pattern.rstrip("/"))
    names = await list_relative(root, use_rg=use_rg)

    def stat_all() -> list[tuple[float, str]]:
        match = regex.match if regex is not None else None
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        stat = os.stat
        out: list[tuple[float, str]] = []
        try:
            for rel in names:
                if suffix and not rel.endswith(suffix):
                    continue
                if match is not None and not match(rel):
                    continue
                if is_credential_parts(prefix + tuple(rel.split("/"))):
                    continue
                try:
                    out.append((stat(rel, dir_fd=fd, follow_symlinks=False).st_mtime, rel))
                except OSError:
                    continue
        finally:
            os.close(fd)
        out.sort(key=lambda item: (-item[0], item[1]))
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
        # Path objects only for what is shown: a match may be one of 50,000.
        lines = [display_path(root / rel, ctx.workspace) for _, rel in found[:MAX_FILES]]
        text = "\n".join(lines)
        if len(found) > MAX_FILES:
            text += (
                f"\n\n[{len(found)} files match; the newest {MAX_FILES} are shown and {len(found) - MAX_FILES} "
                "more are not. Narrow the pattern or path.]"
            )
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
