"""Which Crystal session a notebook used last, so ``/resume`` in a reopened notebook
continues it.

jupyter_server tells a kernel its notebook through ``JPY_SESSION_NAME`` (the notebook's
path). The map lives in ``<workspace>/.crystal/notebooks.json``::

    {"version": 1, "notebooks": {"/path/to/analysis.ipynb": {"session": "…", "updated": "…"}}}

It is rewritten atomically; unknown fields survive; a corrupt file is left as it was
(the kernel then notes it and falls back to the workspace's latest session).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.fsutil import atomic_write_json, read_json_object
from crystal_kernel.host.store import now_iso

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

MAX_ENTRIES = 500


def map_path(workspace: Path) -> Path:
    return paths.notebook_map_file(workspace)


def _read(workspace: Path) -> dict[str, Any]:
    path = map_path(workspace)
    if not path.exists():
        return {}
    return read_json_object(path, "notebook map")


def last_session(workspace: Path, notebook: str | None) -> str | None:
    """The session id this notebook used last, or None. Raises UserError when the map
    is corrupt (callers note it and go on)."""
    if not notebook:
        return None
    entry = (_read(workspace).get("notebooks") or {}).get(notebook)
    session = entry.get("session") if isinstance(entry, dict) else None
    return session if isinstance(session, str) else None


def notebooks_by_session(workspace: Path, root: Path | None = None) -> dict[str, str]:
    """Session id -> the notebook that used it last: the kernel's and the magics'
    ``/sessions`` and the server's listings (server/transcripts.py, server/jobfiles.py)
    all read it here. A path the page reported is relative to the server root and shown
    as it is; an absolute one (``JPY_SESSION_NAME``) is shown relative to ``root`` when
    it is under it, else by its file name. Raises UserError when the map is corrupt."""
    notebooks = _read(workspace).get("notebooks")
    if not isinstance(notebooks, dict):
        return {}
    entries = sorted(((k, v) for k, v in notebooks.items() if isinstance(v, dict) and isinstance(k, str)),
                     key=lambda kv: str(kv[1].get("updated", "")))
    out: dict[str, str] = {}
    for name, entry in entries:  # newest last: a session keeps the notebook that used it last
        session = entry.get("session")
        if isinstance(session, str):
            out[session] = _shown(name, root)
    return out


def _shown(name: str, root: Path | None) -> str:
    path = Path(name)
    if not path.is_absolute():
        return name  # jupyter_server gives kernels the notebook's path relative to its root
    if root is not None:
        real = Path(os.path.realpath(path))
        if root in real.parents:
            return os.path.relpath(real, root)
    return path.name


def remember_session(session: Session, notebook: str | None) -> str | None:
    """Record a live session as its notebook's (kernel and magics alike). The map is a
    convenience for /resume, never a reason to fail a turn: an error comes back as text."""
    if session is None or not notebook:
        return None
    try:
        remember(session.workspace, notebook, session.id)
    except OSError as exc:
        return f"Cannot record the notebook's session: {exc}"
    return None


def remember(workspace: Path, notebook: str | None, session_id: str) -> None:
    """Record ``session_id`` as this notebook's session. A corrupt map is not rewritten."""
    if not notebook:
        return
    try:
        data = _read(workspace)
    except UserError:
        return
    notebooks = data.get("notebooks")
    if not isinstance(notebooks, dict):
        notebooks = {}
    old = notebooks.get(notebook)
    entry = dict(old) if isinstance(old, dict) else {}
    if entry.get("session") == session_id:
        return
    entry.update({"session": session_id, "updated": now_iso()})
    notebooks[notebook] = entry
    if len(notebooks) > MAX_ENTRIES:  # bounded: drop the oldest entries
        ordered = sorted(notebooks.items(), key=lambda kv: str((kv[1] or {}).get("updated", "")))
        notebooks = dict(ordered[-MAX_ENTRIES:])
    data["version"] = data.get("version", 1)
    data["notebooks"] = notebooks
    atomic_write_json(map_path(workspace), data, inside=Path(workspace))
