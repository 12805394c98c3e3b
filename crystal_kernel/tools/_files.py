"""Small file helpers shared by the file tools: binary sniffing, diffs, and looking up a
folder argument (image sniffing is :func:`crystal_kernel.tools.images.sniff_image_type`)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING

from crystal_kernel.core.errors import ToolError

if TYPE_CHECKING:
    from crystal_kernel.tools.base import ToolContext

# How many leading bytes decide whether a file is text.
SNIFF_BYTES = 8192


def looks_binary(head: bytes) -> bool:
    """A NUL byte, or text that is not UTF-8 at all, marks a binary file."""
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the sniff boundary is still text.
        return exc.start < len(head) - 4
    return False


def existing_folder(ctx: ToolContext, path: str | None) -> Path:
    """The folder ``path`` names (default: the workspace), resolved through the access
    rules; a missing path or a file is a ToolError saying which."""
    folder: Path = ctx.access.resolve(path or ".")
    if not folder.exists():
        raise ToolError(f"'{path}' does not exist.")
    if not folder.is_dir():
        raise ToolError(f"'{path}' is a file, not a folder; use read to see its content.")
    return folder


def write_allowed(ctx: ToolContext, path: Path, text: str) -> None:
    """Write a tool's file atomically, race-free: ``path`` was resolved by the access
    rules (no link in it then), and the write is made relative to descriptors opened from
    the allowed folder that holds it, so a folder swapped for a link since cannot send it
    outside (TRUST-3, host/fsutil.py). Raises OSError."""
    from crystal_kernel.core.fsutil import atomic_write_text

    rule = ctx.access.rule_for(path)
    atomic_write_text(path, text, inside=rule.path if rule is not None else None)


def read_head(path: Path, size: int = SNIFF_BYTES) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(size)


def unified_diff(old: str, new: str, label: str, *, created: bool = False) -> str:
    """A unified diff of one file, git style labels."""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if created else f"a/{label}",
        tofile=f"b/{label}",
        n=3,
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


def display_path(path: Path, workspace: Path) -> str:
    """Workspace-relative when inside it, else absolute."""
    try:
        return path.relative_to(workspace).as_posix() or "."
    except ValueError:
        return str(path)
