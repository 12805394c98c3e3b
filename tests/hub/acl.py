"""Let the hub tests' users pass through folders they could not (POSIX access ACLs).

The people's servers run this venv's Python as those people. Here the venv's base
interpreter is pyenv's under /root (mode 0700), so each hub test grants its own users
search permission (``x``, no listing) on such folders for as long as it runs: the entry
``setfacl -m u:UID:x`` would add (acl's tools are not installed here, so the extended
attribute is written directly, in the kernel's binary format). Two hub modules may run
at once on different workers: each adds and removes only its own users' entries under a
lock, and the last one out gives the folder back its plain mode.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ACL = "system.posix_acl_access"
VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
UNDEFINED = 0xFFFFFFFF
LOCK = Path(tempfile.gettempdir()) / "crystal-hub-tests-acl.lock"

Entry = tuple[int, int, int]  # (tag, permissions rwx as 0-7, uid/gid or UNDEFINED)


def closed_folders(path: Path) -> list[Path]:
    """The folders above ``path`` and above the file it links to that other users cannot
    pass through (no o+x): a venv's ``bin/python`` is reached through the venv's folders
    (a checkout under a closed folder, as CI's) and runs the interpreter it links to."""
    above = [*Path(os.path.abspath(path)).parents, *Path(os.path.realpath(path)).parents]
    return [folder for folder in dict.fromkeys(above) if not os.stat(folder).st_mode & 0o001]


def entries_of(folder: Path) -> list[Entry]:
    """The folder's access ACL, or the three entries its mode stands for."""
    try:
        raw = os.getxattr(folder, ACL)
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise
        mode = os.stat(folder).st_mode
        return [(USER_OBJ, (mode >> 6) & 7, UNDEFINED), (GROUP_OBJ, (mode >> 3) & 7, UNDEFINED),
                (OTHER, mode & 7, UNDEFINED)]
    return [struct.unpack_from("<HHI", raw, 4 + 8 * i) for i in range((len(raw) - 4) // 8)]


def write_entries(folder: Path, entries: list[Entry]) -> None:
    """Write ``entries`` (any MASK in them is recomputed); with no named user or group
    left, remove the ACL and set the plain mode it stood for."""
    entries = [e for e in entries if e[0] != MASK]
    named = [e for e in entries if e[0] in (USER, GROUP)]
    perms = {tag: perm for tag, perm, _ in entries if tag in (USER_OBJ, GROUP_OBJ, OTHER)}
    if not named:
        special = os.stat(folder).st_mode & 0o7000
        try:
            os.removexattr(folder, ACL)
        except OSError as exc:
            if exc.errno != errno.ENODATA:
                raise
        os.chmod(folder, special | perms[USER_OBJ] << 6 | perms[GROUP_OBJ] << 3 | perms[OTHER])
        return
    mask = perms[GROUP_OBJ]
    for _, perm, _ in named:
        mask |= perm
    ordered = sorted([*entries, (MASK, mask, UNDEFINED)], key=lambda e: (e[0], e[2]))
    os.setxattr(folder, ACL, struct.pack("<I", VERSION) + b"".join(struct.pack("<HHI", *e) for e in ordered))


@contextmanager
def passable_by(folders: list[Path], uids: list[int]) -> Iterator[None]:
    """``uids`` may pass through ``folders`` while the block runs."""
    added: list[tuple[Path, int]] = []
    try:
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for folder in folders:
                entries = entries_of(folder)
                have = {who for tag, _, who in entries if tag == USER}
                new = [uid for uid in uids if uid not in have]
                write_entries(folder, entries + [(USER, 1, uid) for uid in new])
                added += [(folder, uid) for uid in new]
        yield
    finally:
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for folder in dict.fromkeys(f for f, _ in added):
                mine = {uid for f, uid in added if f == folder}
                write_entries(folder, [e for e in entries_of(folder) if not (e[0] == USER and e[2] in mine)])
