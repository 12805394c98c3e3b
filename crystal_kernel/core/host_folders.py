"""Host-only folders (SANDBOX-2): where the host keeps state it later runs, trusts or
keeps secret, such as ``crystal space``'s kernelspec (whose ``argv`` the space's next
kernel runs, with the model key) and its Jupyter runtime files (the server's token, the
kernels' connection keys).

They live in the Crystal Home's ``run`` folder (:func:`paths.run_dir`), mode 0700:
outside temp and the workspace, where tool processes write, and inside the Home, which
the sandbox keeps from them. A process takes a folder of its own there
(:func:`process_folder`), removed when it ends; folders of processes that died without
removing theirs are removed by the next one (a bounded number at each start).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UserError

# Stale folders removed at one start, and entries of the run folder looked at to find them.
STALE_REMOVED = 16
STALE_LOOKED_AT = 256
_PROCESS_NAME = re.compile(r"^([a-z]+)-([0-9]{1,10})$")


def private_folder(folder: Path) -> Path:
    """Make ``folder`` (mode 0700; missing parents made as usual) or check the one there:
    a real folder, not a symbolic link, owned by this user. A wider mode is narrowed to
    0700 (the folder is ours). UserError with one line otherwise: the host would keep its
    state where someone else decides what it holds."""
    folder = Path(folder)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        info = os.lstat(folder)
    except OSError as exc:
        raise UserError(f"Cannot make Crystal's host-only folder {folder}: {exc.strerror or exc}.") from None
    if stat.S_ISLNK(info.st_mode):
        raise UserError(f"Crystal's host-only folder {folder} is a symbolic link; remove it (Crystal makes the "
                        "folder itself).")
    if not stat.S_ISDIR(info.st_mode):
        raise UserError(f"Crystal's host-only folder {folder} is not a folder; remove it.")
    if info.st_uid != os.getuid():
        raise UserError(f"Crystal's host-only folder {folder} belongs to another user (uid {info.st_uid}); "
                        "remove it.")
    if info.st_mode & 0o077:
        try:
            os.chmod(folder, 0o700, follow_symlinks=False)
        except OSError as exc:
            raise UserError(f"Cannot make Crystal's host-only folder {folder} private (mode 0700): "
                            f"{exc.strerror or exc}.") from None
    return folder


def process_folder(home: Path, kind: str) -> Path:
    """A fresh host-only folder of this process, ``{home}/run/<kind>-<pid>`` (0700),
    after removing stale folders of processes that are gone. The caller removes it
    (:func:`remove_folder`) when done. UserError (one line) when it cannot be made safely."""
    run = private_folder(paths.run_dir(home))
    remove_stale(run)
    folder = paths.process_dir(home, kind, os.getpid())
    if folder.is_symlink() or folder.exists():  # left by an earlier process with this pid
        remove_folder(folder)
    return private_folder(folder)


def remove_folder(folder: Path) -> None:
    """Remove a host-only folder and what it holds; a link is removed, never followed."""
    try:
        if Path(folder).is_symlink():
            os.unlink(folder)
        else:
            shutil.rmtree(folder)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # what cannot be removed now is removed as stale by a later start


def remove_stale(run: Path) -> int:
    """Remove the folders ``<kind>-<pid>`` in ``run`` whose process is gone (at most
    :data:`STALE_REMOVED`, looking at :data:`STALE_LOOKED_AT` entries); returns how many."""
    removed = 0
    try:
        entries = os.scandir(run)
    except OSError:
        return 0
    with entries:
        for looked, entry in enumerate(entries):
            if looked >= STALE_LOOKED_AT or removed >= STALE_REMOVED:
                break
            match = _PROCESS_NAME.match(entry.name)
            if match is None or int(match.group(2)) == os.getpid() or _alive(int(match.group(2))):
                continue
            remove_folder(Path(entry.path))
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OverflowError:  # no process has such a number
        return False
    except OSError as exc:
        return exc.errno == errno.EPERM  # someone else's process: not ours to judge
    return True
