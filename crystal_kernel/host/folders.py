"""Folders added to a session besides its workspace: one check for every way in
(``/access add``, ACP ``additionalDirectories`` through the front door; TRUST-3, TRUST-6).

- A folder is resolved against the session's workspace (its cwd), never against the
  host process's cwd; ``~`` is the person's home.
- Refused: ``/``, the person's home and the Crystal Home (and any folder holding either),
  anything inside the Crystal Home, and credential folders (``.ssh``, ``.aws``, ...).
- The person's ``/access add`` is the person's grant: signed into the session document
  (host/grants.py) and restored on resume. A folder a *client* adds is for that session
  only: it is noted in the session, never written into the document as a grant, so a
  later ``crystal run --resume`` (or any front) does not honour it without the person.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from crystal_kernel.core.access import DirectoryRule, is_credential_path
from crystal_kernel.core.errors import UserError

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _holds(folder: Path, inner: Path) -> bool:
    """True when ``inner`` is ``folder`` or lies inside it."""
    return inner == folder or folder in inner.parents


def check_folder(directory: str, *, workspace: Path, crystal_home: Path) -> Path:
    """The resolved folder ``directory`` names, or UserError with one line saying why it
    cannot be added to a session."""
    text = str(directory).strip()
    if not text:
        raise UserError("The folder to add is empty.")
    if "\x00" in text:
        raise UserError(f"The folder {text!r} contains a NUL character.")
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # "~someone" with no such user
        raise UserError(f"'{text}' names the home folder of an unknown user.") from None
    resolved = _real(path if path.is_absolute() else Path(workspace) / path)
    if not resolved.is_dir():
        raise UserError(f"'{text}' is not a folder.")
    if resolved == Path(resolved.anchor):
        raise UserError(f"'{text}' is the root of the file system; add a folder inside it instead.")
    for protected, what in ((_real(Path.home()), "your home folder"), (_real(crystal_home), "the Crystal Home")):
        if _holds(resolved, protected):
            raise UserError(f"'{text}' ({resolved}) is or holds {what}; add a folder inside it instead.")
    if _holds(_real(crystal_home), resolved):
        raise UserError(f"'{text}' ({resolved}) is inside the Crystal Home, which only Crystal changes.")
    if is_credential_path(resolved):
        raise UserError(f"'{text}' ({resolved}) is a credential folder; it cannot be added.")
    return resolved


Origin = Literal["person", "client"]


def add_folder(session: Session, directory: str, mode: Literal["ro", "rw"] = "rw", *,
               origin: Origin = "person") -> DirectoryRule:
    """Check ``directory`` and add it to ``session``'s access rules. ``origin="client"``:
    for this session only, noted in it, never saved as the person's grant."""
    resolved = check_folder(directory, workspace=session.workspace, crystal_home=session.home)
    rule = session.access.add(resolved, mode, granted=origin == "person")
    if origin == "client":
        access = "read and write" if mode == "rw" else "read only"
        session.note(f"The client added the folder {resolved} ({access}) for this session only; "
                     "it is not saved with the session (add it with /access add to keep it).")
    session.refresh_system()
    return rule


def add_client_folders(session: Session, directories: tuple[str, ...]) -> None:
    """The folders a client passed with the session (ACP ``additionalDirectories``);
    each refused one is a note, the others are added read-write for this session."""
    for directory in directories:
        try:
            add_folder(session, directory, "rw", origin="client")
        except UserError as exc:
            session.note(f"The client's folder {directory} was not added: {exc}")
