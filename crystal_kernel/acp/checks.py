"""Checks on what an ACP client sends, where the agent reads it: the session's ``cwd``,
the names of the MCP servers it passes, and how a client's value is quoted back in an
error (one line, bounded, control characters visible).

The JSON-RPC lines themselves (not JSON, not an object, too deep, too long, lone
surrogates) are checked before the protocol library sees them (acp/stdio.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.textsafe import terminal_safe

# How much of a client's value an error message quotes.
SHOWN_CHARS = 120
# A client's MCP server name: as long as one in mcp.json may be (mcp/config.NAME_LIMIT).
SERVER_NAME_CHARS = 64
# Folders a client may add to one session (additionalDirectories).
MAX_CLIENT_FOLDERS = 32


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A client's value quoted for a one-line message: in quotes, control characters
    (newlines too) visible, cut to ``limit`` characters with an ellipsis."""
    text = str(value)
    cut = len(text) > limit
    text = terminal_safe(text[:limit].replace("\n", "\\n").replace("\t", "\\t"))
    return f"'{text}{'…' if cut else ''}'"


def one_line(message: str, limit: int = 400) -> str:
    """An error message made one line for the client: line breaks and other control
    characters visible, cut to ``limit`` characters."""
    text = terminal_safe(message.replace("\r", "\\r").replace("\n", "\\n"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def client_cwd(cwd: str, crystal_home: Path) -> Path:
    """The folder a client's ``cwd`` names, or UserError with one line saying why it
    cannot be a workspace: ACP requires an absolute path (a relative one would be read
    against the agent's own folder, which the client does not choose); it must be a
    folder; it may not be the root of the file system (every file would be the
    workspace's) nor the Crystal Home or a folder inside it (which only Crystal changes)."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in cwd):
        raise UserError(f"The cwd {shown(cwd)} contains a control character; send the folder's absolute path.")
    if not os.path.isabs(cwd):
        raise UserError(f"The cwd {shown(cwd)} is not an absolute path; ACP clients send the folder's absolute path.")
    path = Path(cwd)
    if not path.is_dir():
        raise UserError(f"The cwd {shown(cwd)} is not a folder.")
    resolved = Path(os.path.realpath(path))
    if resolved == Path(resolved.anchor):
        raise UserError(f"The cwd {shown(cwd)} is the root of the file system; open a project folder instead.")
    if _inside(resolved, Path(os.path.realpath(crystal_home))):
        where = shown(cwd) if str(resolved) == cwd else f"{shown(cwd)} ({resolved})"
        raise UserError(f"The cwd {where} is the Crystal Home or inside it, which only Crystal changes; "
                        "open a project folder instead.")
    return path


def client_folders(directories: Iterable[object] | None, note: Callable[[str], None]) -> tuple[str, ...]:
    """The client's ``additionalDirectories`` to check and add (host/folders.py, TRUST-6):
    each once, at most :data:`MAX_CLIENT_FOLDERS`; one with a control character is left
    out with a note (a path with a newline cannot be said in one line)."""
    out: list[str] = []
    for directory in directories or []:
        text = str(directory)
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
            note(f"The client's folder {shown(text)} was not added: it contains a control character.")
            continue
        if text in out:
            continue
        if len(out) == MAX_CLIENT_FOLDERS:
            note(f"The client passed more than {MAX_CLIENT_FOLDERS} folders; {shown(text)} and those after it "
                 "were not added.")
            break
        out.append(text)
    return tuple(out)


def server_name_problem(name: str) -> str | None:
    """Why a client's MCP server name cannot be used (None when it can): empty, longer
    than :data:`SERVER_NAME_CHARS`, or holding a control character. The name is shown in
    notes, tool listings and approvals."""
    if not name.strip():
        return "its name is empty"
    if len(name) > SERVER_NAME_CHARS:
        return f"its name is longer than {SERVER_NAME_CHARS} characters"
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in name):
        return "its name contains a control character"
    return None
