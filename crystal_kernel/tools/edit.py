"""The edit tool: exact string replacement in one file, returning a unified diff."""

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


class EditInput(ToolInput):
    path: str = Field(description="The file to change.")
    old_string: str = Field(description="The exact text to replace.")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class EditTool(FileChangeTool[EditInput]):
    name = "edit"
    Input = EditInput

    def change(self, args: EditInput, ctx: ToolContext) -> ToolResult:
        path = ctx.access.resolve(args.path, write=True)
        shown = display_path(path, ctx.workspace)
        if not path.exists():
            raise ToolError(f"'{args.path}' does not exist; use write to create a new file.")
        if path.is_dir():
            raise ToolError(f"'{args.path}' is a folder, not a file.")
        if args.old_string == "":
            raise ToolError("old_string is empty; give the exact text to replace (use write to create a file).")
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are the same; nothing would change.")
        try:
            if looks_binary(read_head(path)):
                raise ToolError(f"'{args.path}' is a binary file; edit only changes text.")
            # newline="" keeps \r\n files byte for byte outside the replaced text.
            with open(path, encoding="utf-8", newline="") as handle:
                old = handle.read()
        except UnicodeDecodeError:
            raise ToolError(f"'{args.path}' is not UTF-8 text; edit only changes text.") from None
        except OSError as exc:
            raise ToolError(f"Cannot read '{args.path}': {exc.strerror or exc}.") from None
        count = old.count(args.old_string)
        if count == 0:
            raise ToolError(
                f"old_string was not found in '{shown}'. It must match the file exactly, whitespace and "
                "indentation included; read the file again and copy the text."
            )
        if count > 1 and not args.replace_all:
            raise ToolError(
                f"old_string occurs {count} times in '{shown}'; include more surrounding lines to make it "
                "unique, or set replace_all to replace every occurrence."
            )
        new = old.replace(args.old_string, args.new_string) if args.replace_all else old.replace(
            args.old_string, args.new_string, 1
        )
        try:
            write_allowed(ctx, path, new)  # text mode on POSIX writes newlines unchanged
        except OSError as exc:
            raise ToolError(f"Cannot write '{args.path}': {exc.strerror or exc}.") from None
        note_change(ctx.workspace)
        replaced = f"{count} occurrences" if count > 1 else "1 occurrence"
        text = f"Edited {shown}: replaced {replaced}.\n" + unified_diff(old, new, shown)
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit), display="diff",
                          file_change=FileChange(path=str(path), old_text=old, new_text=new))

