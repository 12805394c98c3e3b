"""One front per session document at a time (ROBUST-2).

Two fronts that resume the same session (a kernel and ``crystal run --resume``, two
notebooks) would each rewrite the whole document after their turn, and the later save
silently drops the other's turn. A front therefore holds an exclusive ``fcntl.flock`` on
``<id>.json.lock`` next to the document for as long as it has the session open; a second
front is refused with one line naming the holder's process. The operating system drops
the lock when the process dies, so a crash never leaves a session locked.

Within one process the lock is shared (counted): a front that opens the same session
twice (a test, an ACP client loading a session again) is not refused; the lock protects
against other processes. Kept apart from the store so that a different store layout (a
journal, say) reuses it.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError

# This process's locks: lock file path -> [fd, number of holders].
_HELD: dict[str, list[int]] = {}
_GUARD = threading.RLock()


class SessionLock:
    """An exclusive lock on one session document, held until :meth:`release`."""

    def __init__(self, document: Path, problem: str | None = None) -> None:
        self.document = document
        self.path = lock_path(document)
        self._held = True
        # Why no lock could be taken (a read-only or full folder): the session goes on
        # unlocked rather than refusing to answer; the front says so once.
        self.problem = problem

    @property
    def held(self) -> bool:
        return self._held

    def release(self) -> None:
        """Drop this hold (idempotent). The last hold in the process removes the lock
        file while still locked, so a front racing for the old file notices (see
        :func:`acquire`), then unlocks."""
        if not self._held:
            return
        self._held = False
        if self.problem is not None:
            return
        key = str(self.path)
        with _GUARD:
            entry = _HELD.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del _HELD[key]
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(entry[0])


def lock_path(document: Path) -> Path:
    return document.with_name(document.name + ".lock")


def acquire(document: Path, session_id: str) -> SessionLock:
    """Lock ``document`` for this process, or raise :class:`UserError` with one line
    when another front holds it (or the lock file cannot be made)."""
    path = lock_path(document)
    with _GUARD:
        entry = _HELD.get(str(path))
        if entry is not None:
            entry[1] += 1
            return SessionLock(document)
        try:
            fd = _lock_file(path, session_id)
        except OSError as exc:
            return SessionLock(document, problem=f"{exc.strerror or exc}")
        _HELD[str(path)] = [fd, 1]
        return SessionLock(document)


def _lock_file(path: Path, session_id: str) -> int:
    """The locked file's descriptor; UserError when another process holds it, OSError
    when the lock file cannot be made at all."""
    folder = path.parent
    root: Path | None = None
    if folder.name == "sessions" and folder.parent.name == paths.HOST_DIR:
        # TRUST-3: never through a symbolic link planted at .crystal or .crystal/sessions,
        # not even one swapped in while the file is opened (fsutil.open_inside).
        root = folder.parent.parent
    else:
        folder.mkdir(parents=True, exist_ok=True)
    from crystal_kernel.core.fsutil import open_inside

    for _ in range(20):
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        fd = open_inside(root, path, flags, 0o600) if root is not None else os.open(path, flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            who = f" (process {holder})" if holder else ""
            raise UserError(f"Session {session_id} is open in another Crystal front{who}; close it there, "
                            f"or /fork it there to continue separately.") from None
        except OSError:
            os.close(fd)
            raise
        # The holder may have released and removed the file between our open and flock:
        # then we locked an orphan inode; open the current file again.
        try:
            same = os.fstat(fd).st_ino == os.stat(path, follow_symlinks=False).st_ino
        except OSError:
            same = False
        if not same:
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the lock holds; only the holder's name for the message is missing
        return fd
    raise UserError(f"Cannot lock session {session_id}: its lock file keeps changing.")


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""
