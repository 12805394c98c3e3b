"""Knowing cheaply that a tree has not changed: inotify watches on its folders (Linux).

The search index's up-to-date check lists the tree with ``rg --files`` and stats every
file: ~0.2 s and more on 50,000 files, even when nothing changed. With a
:class:`FolderWatch` on the folders that hold indexed files, an unchanged tree is known
from one non-blocking ``read`` of the inotify descriptor: any event in a watched folder
(a file created, written, deleted, renamed, its attributes changed), a lost event
(queue overflow) or a watch that could not be added means "changed", and the caller
does its full check. Nothing else is trusted: where inotify is missing (not Linux, no
libc symbol, the per-user watch limit reached), :func:`open_watch` returns None and the
caller always does the full check.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterable

# <sys/inotify.h>
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)
#: At most this many folders are watched per tree (Linux's default per-user limit is
#: 8,192 on older kernels); a bigger tree is checked the full way.
MAX_WATCHES = 4096

_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            libc.inotify_init1.argtypes = [ctypes.c_int]
            libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            _libc = libc
        except (OSError, AttributeError):
            return None
    return _libc


class FolderWatch:
    """inotify watches on a set of folders; :meth:`changed` drains what happened."""

    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd = fd
        self._libc = libc
        self.folders: set[str] = set()
        self.broken = False  # a watch could not be added: every check says "changed"

    def add(self, folders: Iterable[str]) -> int:
        """Watch these folders too; returns how many were new. A folder that is gone is
        skipped (its parent's watch saw it go); any other failure breaks the watch."""
        added = 0
        for folder in folders:
            if folder in self.folders or self.broken:
                continue
            if len(self.folders) >= MAX_WATCHES:
                self.broken = True
                break
            if self._libc.inotify_add_watch(self.fd, os.fsencode(folder), MASK) < 0:
                if ctypes.get_errno() not in (2, 20):  # ENOENT, ENOTDIR
                    self.broken = True
                continue
            self.folders.add(folder)
            added += 1
        return added

    def changed(self) -> bool:
        """Whether anything happened in a watched folder since the last call (or the
        watch is broken). Drains the event queue."""
        seen = False
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except OSError:
                self.broken = True
                break
            if not data:
                break
            seen = True
        return seen or self.broken

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:  # an index dropped without close() keeps no descriptor
        try:
            self.close()
        except OSError:
            pass


def open_watch() -> FolderWatch | None:
    """A new, empty watch; None where inotify is not available."""
    libc = _load_libc()
    if libc is None:
        return None
    fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None
    return FolderWatch(fd, libc)


def folders_of(files: Iterable[str], root: str) -> set[str]:
    """Every folder holding one of ``files`` (paths relative to ``root``, '/'-separated),
    their parents up to ``root``, and the visible subfolders of those (so that a file
    created in a folder that holds no indexed file yet is seen too)."""
    folders = {root}
    for rel in files:
        cut = rel.rfind("/")
        while cut > 0:
            folder = rel[:cut]
            full = root + "/" + folder
            if full in folders:
                break
            folders.add(full)
            cut = folder.rfind("/")
    for folder in list(folders):
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                        folders.add(entry.path)
        except OSError:
            continue
    return folders
