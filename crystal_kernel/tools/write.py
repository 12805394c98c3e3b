"""The write tool: create or overwrite a whole file, atomically."""

from __future__ import annotations

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools._changes import note_change
from crystal_kernel.tools._files import display_path, looks_binary, read_head, unified_diff, write_allowed
from crystal_kernel.tools.base import (
    FileChange,
    ToolContext,
    ToolInput,
    ToolResult,
    truncate_output,
)
from crystal_kernel.tools.file_change_tool import FileChangeTool


class WriteInput(ToolInput):
    path: str = Field(description="The file to write.")
    content: str = Field(description="The complete new content.")


class WriteTool(FileChangeTool[WriteInput]):
    name = "write"
    Input = WriteInput

    def change(self, args: WriteInput, ctx: ToolContext) -> ToolResult:
        path = ctx.access.resolve(args.path, write=True)
        shown = display_path(path, ctx.workspace)
        if path.is_dir():
            raise ToolError(f"'{args.path}' is a folder; give a file path to write.")
        existed = path.exists()
        old = ""
        if existed:
            if not path.is_file():
                raise ToolError(f"'{args.path}' is not a regular file; writing is refused.")
            try:
                binary = looks_binary(read_head(path))
                old = "" if binary else path.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise ToolError(f"Cannot read '{args.path}' before writing: {exc.strerror or exc}.") from None
        # A parent that exists as a file cannot become a folder: say so plainly.
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise ToolError(f"Cannot create '{args.path}': '{parent}' is a file, not a folder.")
                break
        try:
            write_allowed(ctx, path, args.content)
        except OSError as exc:
            raise ToolError(f"Cannot write '{args.path}': {exc.strerror or exc}.") from None
        note_change(ctx.workspace)
        lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
        if not existed:
            head = f"Created {shown} ({lines} lines, {len(args.content.encode('utf-8'))} bytes)."
            diff = unified_diff("", args.content, shown, created=True)
        elif old == args.content:
            return ToolResult(ok=True, text=f"{shown} already had exactly this content; nothing changed.")
        else:
            head = f"Overwrote {shown} ({lines} lines)."
            diff = unified_diff(old, args.content, shown)
        text = truncate_output(head + ("\n" + diff if diff else ""), ctx.config.tool_output_limit)
        change = FileChange(path=str(path), old_text=old if existed else None, new_text=args.content)
        if not existed:
            # A new file's diff is the content the model just sent: the person sees it, the
            # model gets the one line (else every later request would carry the file twice).
            return ToolResult(ok=True, text=head, display="diff", file_change=change, shown_text=text)
        return ToolResult(ok=True, text=text, display="diff", file_change=change)
