"""The notebook ``crystal space`` opens: a new Crystal notebook, or the one that holds the
session ``--resume`` names.

A session follows its notebook through ``metadata.crystal.session_id`` (SPEC §13
"Notebook identity", notebook_identity.py): the kernel continues the session the
notebook names at its first cell, when this Home signed it. So resuming in a space is
opening a notebook that names the session: the one that used it last when it still
names it, else a new ``crystal-<id>.ipynb`` that does. Existing notebooks are never
changed; a new one is written under a free name, whole or not at all.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.host.store import SessionStore
from crystal_kernel.jupyter.kernelspec import DISPLAY_NAME, KERNEL_NAME

MAX_NOTEBOOK_BYTES = 50 * 1024 * 1024  # a notebook larger than this is not read to check its metadata


def notebook_json(session_id: str | None = None) -> dict[str, Any]:
    """An nbformat 4.5 notebook with one empty cell, on the ``crystal`` kernelspec,
    naming ``session_id`` when given."""
    metadata: dict[str, Any] = {
        "kernelspec": {"name": KERNEL_NAME, "display_name": DISPLAY_NAME, "language": "markdown"},
        "language_info": {"name": "markdown"},
    }
    if session_id:
        metadata["crystal"] = {"session_id": session_id}
    cell: dict[str, Any] = {"cell_type": "code", "execution_count": None, "id": os.urandom(4).hex(), "metadata": {},
            "outputs": [], "source": ""}
    return {"cells": [cell], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def create_notebook(workspace: Path, stem: str, session_id: str | None = None) -> Path:
    """Write a new notebook ``<stem>.ipynb`` (or ``<stem>-2.ipynb``, … when taken) in
    ``workspace``; never replaces a file. Returns its path."""
    text = json.dumps(notebook_json(session_id), indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".crystal-space-", suffix=".ipynb", dir=workspace)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        for n in range(1, 1000):
            target = workspace / (f"{stem}.ipynb" if n == 1 else f"{stem}-{n}.ipynb")
            try:
                os.link(tmp, target)  # atomic and exclusive: a file already there stays as it is
            except FileExistsError:
                continue
            return target
        raise UserError(f"No free notebook name {stem}-N.ipynb in {workspace}.")
    except OSError as exc:
        raise UserError(f"Cannot write a notebook in {workspace}: {exc.strerror or exc}.") from None
    finally:
        os.unlink(tmp)


def names_session(path: Path, session_id: str) -> bool:
    """Whether the notebook at ``path`` names ``session_id`` in its metadata."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    crystal = data.get("metadata", {}).get("crystal") if isinstance(data, dict) else None
    return isinstance(crystal, dict) and crystal.get("session_id") == session_id


def check_resumable(workspace: Path, home: Path, session_id: str) -> None:
    """Refuse, before anything starts, a session the kernel would not continue."""
    store = SessionStore(workspace, home)
    if not store.exists(session_id):  # UserError for an id of the wrong shape
        raise UserError(f"There is no saved session {session_id} in {workspace} (crystal run /sessions lists them).")
    if not store.signed(session_id):
        raise UserError(f"Session {session_id} is unverified (not the last save this Crystal Home signed for "
                        "this workspace), so it cannot be continued here (TRUST-5, TRUST-7); crystal run --resume "
                        f"{session_id} reads it as history.")


@dataclass(frozen=True)
class SpaceNotebook:
    """The notebook a space opens, and whether the space wrote it (then a failed start
    removes it again)."""

    path: Path
    created: bool


def space_notebook(workspace: Path, home: Path, resume: str | None) -> SpaceNotebook:
    """The notebook to open: for ``resume``, the one that used the session last when it
    still names it, else a new one naming it; otherwise a new notebook for a new session."""
    if resume is None:
        return SpaceNotebook(create_notebook(workspace, datetime.now().strftime("crystal-%Y-%m-%d")), True)
    check_resumable(workspace, home, resume)
    from crystal_kernel.jupyter.notebook_map import notebooks_by_session

    try:
        # Paths relative to the workspace: a page's (the space's root is the workspace;
        # another lab's root may not be, and then no notebook names the session there).
        last = notebooks_by_session(workspace, workspace.resolve()).get(resume)
    except UserError:
        last = None  # a corrupt map: a new notebook still resumes the session
    if last:
        candidate = (workspace / last).resolve()
        if candidate.is_relative_to(workspace.resolve()) and names_session(candidate, resume):
            return SpaceNotebook(candidate, False)
    return SpaceNotebook(create_notebook(workspace, f"crystal-{resume}", resume), True)
