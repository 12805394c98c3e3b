"""What an ``edit`` or ``write`` call would change, computed before it is approved, once
for every front (GUARD-4: the person judges the call and its diff).

The diff is taken against the file on disk, so its hunk headers carry the file's real
line numbers and a few lines of context; a fragment replaced in mid-line is one changed
line, not two texts without newlines. Nothing is written here, and the same access rules
as the tool apply: a path the tool could not write shows no diff (its error follows).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.tool_types import FileChange
from crystal_kernel.tools._files import display_path, unified_diff

#: A file larger than this is not read for a preview (the tool's result still says what changed).
PROPOSED_FILE_LIMIT = 1_000_000
#: A diff longer than this is cut, saying so: the approval form is not a file viewer.
PREVIEW_DIFF_CHARS = 200_000


def proposed_change(access: AccessRules, tool: str, args: Mapping[str, Any]) -> FileChange | None:
    """The whole file before and after ``edit``/``write`` would run, or None when the call
    would fail anyway (unreadable, too large, old_string not found) or is another tool."""
    if tool not in ("edit", "write") or not isinstance(args.get("path"), str):
        return None
    try:
        path = access.resolve(args["path"], write=True)
        if path.exists() and (not path.is_file() or path.stat().st_size > PROPOSED_FILE_LIMIT):
            return None
        # newline="" as the edit tool reads it: \r\n files keep their bytes.
        old = None
        if path.exists():
            with open(path, encoding="utf-8", newline="") as handle:
                old = handle.read()
    except Exception:  # ToolError, OSError, UnicodeDecodeError, ValueError: no preview
        return None
    if tool == "write":
        new = args.get("content")
        if not isinstance(new, str):
            return None
    else:
        find, repl = args.get("old_string"), args.get("new_string")
        if old is None or not isinstance(find, str) or not isinstance(repl, str) or not find or find not in old:
            return None
        new = old.replace(find, repl) if args.get("replace_all") else old.replace(find, repl, 1)
    return FileChange(path=str(path), old_text=old, new_text=new)


def proposed_diff(access: AccessRules, tool: str, args: Mapping[str, Any]) -> str | None:
    """The unified diff (git-style labels, workspace-relative path, real line numbers,
    three lines of context) ``edit``/``write`` would make; None as for
    :func:`proposed_change`. A new file is a diff from ``/dev/null``."""
    change = proposed_change(access, tool, args)
    if change is None:
        return None
    shown = display_path(Path(change.path), access.workspace)
    text = unified_diff(change.old_text or "", change.new_text, shown, created=change.old_text is None)
    if not text:
        return f"{shown}: the contents are unchanged\n"
    if len(text) > PREVIEW_DIFF_CHARS:
        text = text[:PREVIEW_DIFF_CHARS] + f"\n[... the diff is {len(text):,} characters; the rest is not shown ...]\n"
    return text
