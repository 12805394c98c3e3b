"""The glob tool: files whose paths match a pattern, newest first."""

from __future__ import annotations

import asyncio
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import Field

from crystal_kernel.core.access import CredentialCheck
from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._files import display_path
from crystal_kernel.tools._walk import FileListing
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


# ``*.py`` or ``**/*.py``: every listed path ending in the literal matches (``*`` is any
# run without ``/``), so the suffix test alone decides.
_SUFFIX_ONLY = re.compile(r"(?:\*\*/)?\*[^*?\[\]{}\\/]+")


def _stat_some(fd: int, rels: list[str]) -> list[tuple[float, str]]:
    """(-mtime, path) of each path relative to the folder ``fd``; vanished files left out."""
    stat = os.stat
    out = []
    for rel in rels:
        try:
            out.append((-stat(rel, dir_fd=fd, follow_symlinks=False).st_mtime, rel))
        except OSError:
            continue
    return out


async def glob_files(root: Path, pattern: str, *, use_rg: bool = True,
                     prefix: tuple[str, ...] = ()) -> list[str]:
    """Matching files as paths relative to ``root`` in POSIX form, newest first, ties by
    path.

    Built for 50,000-file trees: the listing stays relative strings, the literal suffix
    and then the (linear-time) glob regex filter it, and only matches are stat'ed. Each
    batch of rg's output is filtered as it arrives and its matches are stat'ed by two
    worker threads (``stat`` releases the GIL), so the stats overlap rg's walk of the rest
    instead of following it: one stat per match is needed to sort newest first.
    ``prefix``: root's components below its allowed folder (the credential rules apply to
    the path in that folder, TRUST-4)."""
    simple = _SUFFIX_ONLY.fullmatch(pattern) is not None
    regex = None if simple else compile_glob(pattern)
    match = regex.match if regex is not None else None
    suffix = literal_suffix(pattern.rstrip("/"))
    is_credential = CredentialCheck(prefix)
    listing = FileListing(root, use_rg=use_rg, name_suffix=suffix)

    def find() -> list[str]:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with ThreadPoolExecutor(2, thread_name_prefix="glob-stat") as pool:
                parts = []
                for batch in listing.batches():
                    if suffix:
                        batch = [rel for rel in batch if rel.endswith(suffix)]
                    if match is not None:
                        batch = [rel for rel in batch if match(rel)]
                    parts.append(pool.submit(_stat_some, fd, is_credential.keep(batch)))
                # (-mtime, path): a plain tuple sort gives newest first, ties by path.
                found = [item for part in parts for item in part.result()]
        finally:
            os.close(fd)
        found.sort()
        return [rel for _, rel in found]

    try:
        return await asyncio.to_thread(find)
    except asyncio.CancelledError:
        listing.stop()  # the worker thread then sees the end of rg's output
        raise


class GlobTool(Tool[GlobInput]):
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
        lines = [display_path(root / rel, ctx.workspace) for rel in found[:MAX_FILES]]
        text = "\n".join(lines)
        if len(found) > MAX_FILES:
            text += (
                f"\n\n[{len(found)} files match; the newest {MAX_FILES} are shown and {len(found) - MAX_FILES} "
                "more are not. Narrow the pattern or path.]"
            )
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
