"""Where one session is written: its workspace's sessions folder (host/store.py), the
journal writer that appends each save's changes (host/journal.py), and the lock that
keeps a second front out while this one has it open (ROBUST-2, host/session_lock.py).
What is written is the document of host/document.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.gc_pause import paused_gc
from crystal_kernel.host.document import journal_lists, whole_document
from crystal_kernel.host.journal import LIST_KEYS, JournalWriter
from crystal_kernel.host.session_lock import SessionLock
from crystal_kernel.host.session_lock import acquire as acquire_lock
from crystal_kernel.host.state import SessionState
from crystal_kernel.host.store import SessionStore

Note = Callable[[str], None]


def _without_grants(doc: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """An unverified session's document without its folders (TRUST-3, TRUST-7): their
    signature may be genuine yet from a save the person later undid (an older copy put
    back), so only the person adds them again."""
    listed = doc.get("directories")
    if not listed:
        return doc
    rows = listed if isinstance(listed, list) else [listed]
    shown = ", ".join(str(d.get("path") if isinstance(d, dict) else d) for d in rows[:5])
    notes.append(f"The folders it lists were not granted again: {shown}. Add them with /access add DIR "
                 "if you want them.")
    return {**doc, "directories": [], "directoriesSignature": None}


def _lock_note(session_id: str, lock: SessionLock, note: Note) -> None:
    if lock.problem is not None:
        note(f"Session {session_id} could not be locked ({lock.problem}); another front that "
             "resumes it at the same time could overwrite its turns.")


class SessionFile:
    """The journal and lock of one session, in one workspace's sessions folder."""

    def __init__(self, workspace: Path, home: Path) -> None:
        self.home = home  # whose key signs the journal (TRUST-5)
        self.store = SessionStore(workspace, home=home)
        self._writer: JournalWriter | None = None
        self._lock: SessionLock | None = None

    def move_to(self, workspace: Path) -> None:
        """/cd: the next save writes a snapshot in ``workspace``'s sessions folder."""
        self.store = SessionStore(workspace, home=self.home)
        self._writer = None

    def _holds(self, path: Path) -> bool:
        return self._lock is not None and self._lock.held and self._lock.document == path

    def claim(self, session_id: str, note: Note) -> None:
        """Hold the lock on the session's document: UserError when another front has it
        open; a lock that could not be made safely becomes a note."""
        path = self.store.journal_path(session_id)
        if self._holds(path):
            return
        lock = acquire_lock(path, session_id)
        self.release()
        self._lock = lock
        _lock_note(session_id, lock, note)

    def release(self) -> None:
        """Let another front open the session (close, fork, and resuming another)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def save(self, state: SessionState, meta: dict[str, Any], note: Note) -> Path:
        """Append this save's changes to the journal (a snapshot when they cannot be
        appended); UserError naming the file on failure. A session with no prompt yet
        and no file is not written (SPEC §13 "Session files": slash commands alone
        write none)."""
        path = self.store.journal_path(state.id)
        if not state.history and not self.store.exists(state.id):
            return path
        self.claim(state.id, note)
        try:
            if self._writer is None or self._writer.path != path:
                self._writer = JournalWriter(path, inside=state.workspace, home=self.home)
            snapshot = self._writer.state is None
            self._writer.save(meta, state.history, state.transcript, journal_lists(state),
                              lambda: whole_document(state, meta))
            if snapshot:
                self.store.drop_old_document(state.id)
            if self._writer.problem is not None:  # the Home's record of the save (TRUST-7)
                note(self._writer.problem)
            return path
        except OSError as exc:
            self._writer = None  # state unknown: the next save writes a snapshot
            raise UserError(f"Could not save the session document {path}: {exc.strerror or exc}.") from None

    def resume(self, state: SessionState, session_id: str, load: Callable[[dict[str, Any]], None], note: Note) -> None:
        """Lock the saved session ``session_id`` (refused when another front has it open),
        read it and hand its document to ``load``, which fills ``state``. The id is the
        file's name, so resuming a copied session continues the copy."""
        with paused_gc():  # every message built here stays alive (core/gc_pause.py)
            self._resume(state, session_id, load, note)

    def _resume(self, state: SessionState, session_id: str, load: Callable[[dict[str, Any]], None], note: Note) -> None:
        # The lock sits beside the journal whatever format the session is in now, so the
        # conversion from an old document keeps one lock.
        path = self.store.journal_path(session_id)
        lock = None if self._holds(path) else acquire_lock(path, session_id)
        try:
            foreign: list[str] = []  # TRUST-5, TRUST-7: a session this Home did not sign last
            doc, journal = self.store.load_with_state(session_id, messages=True, notes=foreign)
            if foreign:
                doc = _without_grants(doc, foreign)
            # What the journal holds, before any change below: the next save appends the
            # differences from it.
            disk_meta = {k: v for k, v in doc.items() if k not in LIST_KEYS}
            if isinstance(disk_meta.get("usage"), dict):
                disk_meta["usage"] = {k: v for k, v in disk_meta["usage"].items() if k != "turns"}
            if doc.get("id") != session_id:
                note(f"The session document {self.store.path_for(session_id).name} says it is session "
                     f"{doc.get('id')!r}; it continues as {session_id}, a separate session.")
                doc = {**doc, "id": session_id}
            load(doc)
            for text in foreign:
                note(text)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        if journal is not None:
            self._writer = JournalWriter(path, inside=state.workspace, home=self.home)
            self._writer.loaded(journal, disk_meta, state.history, state.transcript, journal_lists(state))
        else:
            self._writer = None
        if lock is not None:
            self.release()
            self._lock = lock
            _lock_note(session_id, lock, note)
