"""The read tool: a text file as numbered lines, a window at a time; a notebook as
numbered cells with their outputs as text (:mod:`crystal_kernel.tools._notebook`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._files import display_path, looks_binary, read_head
from crystal_kernel.tools._notebook import NotANotebook, is_notebook, load_notebook, render
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output
from crystal_kernel.tools.images import sniff_image_type

DEFAULT_LIMIT = 2000
# Longer lines are cut so one minified file cannot flood the context.
MAX_LINE_CHARS = 2000


class ReadInput(ToolInput):
    path: str = Field(description="The file to read.")
    offset: int | None = Field(
        default=None, ge=1, description="The first line (notebook: cell) to show, from 1."
    )
    limit: int | None = Field(
        default=None, ge=1, description=f"Lines (notebook: cells) to show (default {DEFAULT_LIMIT})."
    )


class ReadTool(Tool[ReadInput]):
    name = "read"
    Input = ReadInput
    risk = Risk.READ
    path_arguments = ("path",)

    async def run(self, args: ReadInput, ctx: ToolContext) -> ToolResult:
        # ROBUST-3: file work runs in a worker thread, so a file system that stops
        # answering (a hung network mount) or a huge file cannot hold the turn; a cancel
        # returns at once.
        return await asyncio.to_thread(self._run, args, ctx)

    def _run(self, args: ReadInput, ctx: ToolContext) -> ToolResult:
        path = ctx.access.resolve(args.path)
        shown = display_path(path, ctx.workspace)
        if not path.exists():
            raise ToolError(f"'{args.path}' does not exist.")
        if path.is_dir():
            raise ToolError(f"'{args.path}' is a folder, not a file; use list or tree to see what it holds.")
        if not path.is_file():
            raise ToolError(f"'{args.path}' is not a regular file.")
        try:
            head = read_head(path)
        except OSError as exc:
            raise ToolError(f"Cannot read '{args.path}': {exc.strerror or exc}.") from None
        broken = ""
        if is_notebook(path):
            try:
                notebook = load_notebook(path, shown)
            except NotANotebook as exc:
                broken = f"[{exc} Showing it as text.]\n\n"  # the raw lines help fix it
            else:
                shown_cells = render(notebook, shown, offset=args.offset, limit=args.limit,
                                     attach=True if ctx.images_ok else None)
                return ToolResult(ok=True, text=truncate_output(shown_cells.text, ctx.config.tool_output_limit),
                                  images=shown_cells.images)
        mime = sniff_image_type(head)
        if mime:
            raise ToolError(
                f"'{args.path}' is an image ({mime}); read only shows text. "
                "Use view_image to look at it (or describe_image on a text-only model)."
            )
        if looks_binary(head):
            raise ToolError(f"'{args.path}' is a binary file ({path.stat().st_size} bytes); read only shows text.")

        start = args.offset or 1
        limit = args.limit or DEFAULT_LIMIT
        lines: list[str] = []
        total = 0
        cut_lines = 0
        # Stream the file: only the requested window is kept in memory.
        with open(path, encoding="utf-8", errors="replace", newline=None) as handle:
            for total, (line, cut) in enumerate(bounded_lines(handle, MAX_LINE_CHARS), start=1):
                if start <= total < start + limit:
                    if cut:
                        line += f" [... line cut at {MAX_LINE_CHARS} characters]"
                        cut_lines += 1
                    # No padding before the number: the tab aligns the text, and padding
                    # spaces cost the model ~2 tokens a line (o200k_base), every request.
                    lines.append(f"{total}\t{line}")
        if total == 0:
            return ToolResult(ok=True, text=f"'{shown}' is empty.")
        if start > total:
            raise ToolError(f"offset {start} is past the end of '{shown}', which has {total} lines.")
        end = start + len(lines) - 1
        body = broken + "\n".join(lines)
        if start > 1 or end < total:
            note = f"\n\n[lines {start}-{end} of {total}"
            if end < total:
                note += f"; read on with offset={end + 1}"
            body += note + "]"
        return ToolResult(ok=True, text=truncate_output(body, ctx.config.tool_output_limit))


def bounded_lines(handle: Any, keep: int, chunk: int = 1 << 16) -> Iterator[tuple[str, bool]]:
    """The lines of a text file as (at most ``keep`` characters, whether it was longer),
    reading at most ``chunk`` characters at a time: a file that is one huge line costs
    bounded memory (ROBUST-3), not the whole line."""
    while True:
        piece = handle.readline(keep + 1)
        if not piece:
            return
        if piece.endswith("\n"):
            yield piece[:-1], False
            continue
        if len(piece) <= keep:
            yield piece, False  # the last line, without a newline
            return
        # Longer than we keep: skip the rest of this line in bounded reads.
        while True:
            rest = handle.readline(chunk)
            if not rest or rest.endswith("\n"):
                break
        yield piece[:keep], True
