"""Tab completion of what a person types to Crystal: slash commands, their arguments
(prompt set and attachment names included), and ``@paths``.

Front-neutral, one implementation for the notebook (the kernel's ``complete_request``)
and the terminal (``crystal``): :func:`complete` takes the text, the cursor position and
a folder (the workspace) and returns a Jupyter ``complete_reply`` content; what depends
on the session (job ids, the prompt names of Home and workspace) comes as callables,
called only when their command is being completed (:func:`session_sources`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

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


Names = Callable[[], list[str]]
# /promptattach's actions that take an attachment name.
_ATTACHMENT_ACTIONS = _ARGUMENTS["promptattach"]


def prompt_set_names(home: Path) -> list[str]:
    """PS-1/PS-2: the prompt sets of Home, and ``default``."""
    from crystal_kernel.prompts.names import DEFAULT_SET
    from crystal_kernel.prompts.promptsets import discover_sets

    return [DEFAULT_SET, *sorted(discover_sets(home, []))]


def attachment_names(home: Path, workspace: Path | None) -> list[str]:
    """PA-4: the attachments discovered in Home and the workspace."""
    from crystal_kernel.prompts.attachments import discover_attachments

    return list(discover_attachments(home, workspace, []))


def session_sources(session: Session) -> dict[str, Names]:
    """The callables :func:`complete` takes, for ``session`` (keyword arguments)."""

    def job_ids() -> list[str]:
        return [info.id for info in session.jobs.status()] if session.has_jobs else []

    return {"job_ids": job_ids,
            "prompt_sets": lambda: prompt_set_names(session.config.home),
            "attachments": lambda: attachment_names(session.config.home, session.workspace)}


def _listed(names: Names | None) -> list[str]:
    if names is None:
        return []
    try:
        return names()
    except Exception:  # a folder that went away mid-listing: no completions, never an error
        return []


def complete(code: str, cursor_pos: int, folder: Path, job_ids: Names | None = None, *,
             prompt_sets: Names | None = None, attachments: Names | None = None) -> dict[str, Any]:
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
        previous = line[:word_start].split()  # the words before the one being completed
        options: list[str] = list(_ARGUMENTS.get(command, ()))
        if command in ("logs", "stop"):
            options = _listed(job_ids) + options
        elif command in ("promptset", "prompts") and len(previous) == 1:
            options = _listed(prompt_sets)
        elif command == "promptattach" and len(previous) == 2 and previous[1] in _ATTACHMENT_ACTIONS:
            options = _listed(attachments)
        if command in ("cd",) or (command == "access" and len(words) >= 2 and words[1] == "add"):
            return _reply(path_matches(folder, word, only_dirs=True), start, cursor_pos)
        return _reply([o for o in options if o.startswith(word)], start, cursor_pos)
    return _reply([], cursor_pos, cursor_pos)
