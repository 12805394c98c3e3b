"""Tab completion in Crystal cells: slash commands, their arguments, and ``@paths``.

Front-neutral: :func:`complete` takes the cell text, the cursor position and a folder
(the workspace) and returns a Jupyter ``complete_reply`` content.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_MATCHES = 200

# Fixed argument words per command; job ids and folders are filled in dynamically.
_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "mode": ("plan", "work"),
    "approval": ("plan", "default", "edit", "review", "audit", "full"),
    "access": ("add", "remove"),
    "promptattach": ("enable", "disable", "up", "down"),
    "logs": ("--follow",),
}


def _reply(matches: list[str], start: int, end: int) -> dict[str, Any]:
    return {"status": "ok", "matches": matches[:MAX_MATCHES], "cursor_start": start, "cursor_end": end,
            "metadata": {}}


def command_words() -> list[str]:
    from crystal_kernel.host.commands import command_names

    return ["/" + n for n in command_names()]


def path_matches(folder: Path, partial: str, *, only_dirs: bool = False) -> list[str]:
    """Entries under ``folder`` completing ``partial`` (a relative or ~/absolute path);
    folders end with '/'. Hidden entries only when the partial name starts with '.'."""
    head, _, name = partial.rpartition("/")
    base = Path(os.path.expanduser(head or ".")) if head.startswith(("~", "/")) else folder / (head or ".")
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        if not entry.name.startswith(name) or (entry.name.startswith(".") and not name.startswith(".")):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if only_dirs and not is_dir:
            continue
        out.append((head + "/" if head else "") + entry.name + ("/" if is_dir else ""))
        if len(out) >= MAX_MATCHES:
            break
    return out


def complete(code: str, cursor_pos: int, folder: Path,
             job_ids: Callable[[], list[str]] | None = None) -> dict[str, Any]:
    """Completions at ``cursor_pos`` (code points, as in the Jupyter protocol)."""
    before = code[:cursor_pos]
    line_start = before.rfind("\n") + 1
    line = before[line_start:]
    word_start = max(line.rfind(" "), line.rfind("\t")) + 1
    word = line[word_start:]
    start = line_start + word_start
    if word.startswith("@"):
        partial = word[1:].lstrip('"')
        return _reply(["@" + m for m in path_matches(folder, partial)], start, cursor_pos)
    stripped = line.lstrip()
    if stripped.startswith("/"):
        words = stripped.split()
        if word_start <= len(line) - len(stripped) or (len(words) == 1 and not line.endswith((" ", "\t"))):
            return _reply([w for w in command_words() if w.startswith(word)], start, cursor_pos)
        command = words[0][1:]
        options: list[str] = list(_ARGUMENTS.get(command, ()))
        if command in ("logs", "stop") and job_ids is not None:
            try:
                options = job_ids() + options
            except Exception:
                pass
        if command in ("cd",) or (command == "access" and len(words) >= 2 and words[1] == "add"):
            return _reply(path_matches(folder, word, only_dirs=True), start, cursor_pos)
        return _reply([o for o in options if o.startswith(word)], start, cursor_pos)
    return _reply([], cursor_pos, cursor_pos)
