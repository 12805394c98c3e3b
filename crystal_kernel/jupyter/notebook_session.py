"""The kernel continues its notebook's session (SPEC §13 "Notebook identity"): after a
kernel restart or when the notebook is opened again, the first cell continues the
session the notebook's metadata names and says so in one line; a bare ``/resume``
means this notebook's session, never another notebook's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.host.prompt_topic import first_prompt_topic
from crystal_kernel.host.store import UNVERIFIED_LEGEND, UNVERIFIED_MARK
from crystal_kernel.jupyter import notebook_identity
from crystal_kernel.jupyter.notebook_map import last_session, notebooks_by_session

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session


def _note(text: str) -> None:
    from crystal_kernel.jupyter.render import IPythonOutput, Renderer

    Renderer(IPythonOutput()).show_note(text)


def session_label(session: Session) -> str:
    """``topic (id)`` — the topic, else the first prompt quoted — or the id alone when
    the session has neither yet."""
    prompt = first_prompt_topic(session.history)
    title = session.topic or (f"“{prompt}”" if prompt else None)
    return f"{title} ({session.id})" if title else session.id


def _saved(session: Session, session_id: str) -> bool:
    try:
        return session.store.journal_path(session_id).is_file()
    except (OSError, UserError):
        return False


def resume_target(session: Session, notebook: str | None) -> tuple[str | None, str | None]:
    """What a bare ``/resume`` continues in a notebook (the Crystal kernel's or one with
    the ``%crystal`` magics): (session id, None), or (None, the line to show) when this
    notebook has no other saved session. ``notebook`` is the path the kernel was started
    for (``JPY_SESSION_NAME``).

    The notebook's metadata names its session when the page reported it (the Crystal
    kernel); otherwise the notebook map (``.crystal/notebooks.json``) says which session
    the notebook used last, under its reported path or ``notebook``. Never another
    notebook's session: the workspace's latest is not a fallback here. Only a session
    this Home signed is picked (TRUST-5: the metadata and the map are workspace files).
    (None, None) when the kernel knows no notebook at all (a terminal IPython): the
    host's bare ``/resume`` applies."""
    reported = notebook_identity.reported()
    here = notebook_identity.notebook_path()
    if not reported and not notebook:
        return None, None
    wanted = notebook_identity.notebook_session_id() if reported else None
    if wanted is None:
        for path in dict.fromkeys(p for p in (here, notebook) if p):
            try:
                wanted = last_session(session.workspace, path)
            except UserError as exc:
                _note(f"{exc} The notebook's last session is not known.")
                break
            if wanted:
                break
    if wanted and wanted != session.id and _saved(session, wanted) and session.store.signed(wanted):
        return wanted, None
    return None, (f"This notebook's session is {session_label(session)}, the one in use; "
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
    # TRUST-5, TRUST-7: the notebook is a workspace file; only a session this Home signed,
    # still as it last saved it, is continued.
    if not session.store.signed(wanted):
        _note(f"This notebook names session {wanted}, which is unverified: not the last save your Crystal "
              "Home signed for this workspace; a new session starts (/resume ID reads it as history).")
        return False
    try:
        session.resume(wanted)
    except UserError as exc:
        _note(f"This notebook's session {wanted} cannot be continued: {exc} A new session starts.")
        return False
    _note(f"Continuing this notebook's session {session_label(session)}: "
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
        topic = row.get("title") or "no topic yet"
        unanswered = "" if row.get("answered", True) else "  (not answered: its last prompt got no reply)"
        unverified = "" if row.get("signed") else UNVERIFIED_MARK  # TRUST-5, TRUST-7
        lines.append(f"{'*' if sid == session.id else ' '} {name} · {topic}  ({sid})  {row.get('updated')}  "
                     f"turns {row.get('turns')}  tokens {row.get('tokens')}{unanswered}{unverified}")
    if not all(row.get("signed") for row in rows):
        lines.append(UNVERIFIED_LEGEND)
    return "\n".join(lines)
