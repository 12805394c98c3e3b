"""The kernel continues its notebook's session (SPEC §13 "Notebook identity"): after a
kernel restart or when the notebook is opened again, the first cell continues the
session the notebook's metadata names and says so in one line; a bare ``/resume``
means this notebook's session, never another notebook's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.jupyter import notebook_identity
from crystal_kernel.jupyter.notebook_map import notebooks_by_session

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


def _note(text: str) -> None:
    from crystal_kernel.jupyter.render import IPythonOutput, Renderer

    Renderer(IPythonOutput()).show_note(text)


def session_label(session_id: str, topic: str | None) -> str:
    """``topic (id)``, or the id alone when the session has no topic yet."""
    return f"{topic} ({session_id})" if topic else session_id


def _saved(session: Session, session_id: str) -> bool:
    try:
        return session.store.journal_path(session_id).is_file()
    except (OSError, UserError):
        return False


def resume_target(session: Session) -> tuple[str | None, str | None]:
    """What a bare ``/resume`` continues when a page reported the notebook: (session id,
    None), or (None, the line to show) when this notebook names no other saved session.
    Never another notebook's session: the workspace's latest is not a fallback here."""
    wanted = notebook_identity.notebook_session_id()
    if wanted and wanted != session.id and _saved(session, wanted) and session.store.signed(wanted):
        return wanted, None
    return None, (f"This notebook's session is {session_label(session.id, session.topic)}, the one in use; "
                  "/sessions lists the others and /resume ID continues one of them.")


def continue_notebook_session(session: Session) -> bool:
    """Resume, in the just-opened ``session``, the session the notebook's metadata names;
    one line says what happened. False when there is none to continue or it cannot be
    (another front has it open, it is gone, this Home did not sign it): the new session
    goes on and the line says why."""
    wanted = notebook_identity.notebook_session_id()
    if not wanted or wanted == session.id:
        return False
    if not _saved(session, wanted):
        _note(f"This notebook's session {wanted} is not among this workspace's saved sessions; "
              "a new session starts.")
        return False
    # TRUST-5: the notebook is a workspace file; only a session this Home signed is continued.
    if not session.store.signed(wanted):
        _note(f"This notebook names session {wanted}, which is not a session of this workspace signed "
              "by your Crystal Home; a new session starts.")
        return False
    try:
        session.resume(wanted)
    except UserError as exc:
        _note(f"This notebook's session {wanted} cannot be continued: {exc} A new session starts.")
        return False
    _note(f"Continuing this notebook's session {session_label(session.id, session.topic)}: "
          f"{len(session.transcript)} messages.")
    return True


def sessions_by_notebook(session: Session, rows: list[dict[str, Any]]) -> str:
    """``/sessions`` in a notebook: each session named by the notebook that used it last
    and its topic, then its id and numbers (``*`` marks this notebook's session)."""
    try:
        names = notebooks_by_session(session.workspace)
    except UserError:  # a corrupt map: the sessions are still listed, by topic and id
        names = {}
    here = notebook_identity.notebook_path() or session.notebook_path
    if here:
        names[session.id] = Path(here).name if Path(here).is_absolute() else here
    lines = []
    for row in rows:
        sid = str(row.get("id"))
        name = names.get(sid, "no notebook")
        topic = row.get("topic") or "no topic yet"
        unanswered = "" if row.get("answered", True) else "  (not answered: its last prompt got no reply)"
        lines.append(f"{'*' if sid == session.id else ' '} {name} · {topic}  ({sid})  {row.get('updated')}  "
                     f"turns {row.get('turns')}  tokens {row.get('tokens')}{unanswered}")
    return "\n".join(lines)
