"""Atomic file writes and careful JSON reads: nothing the host writes is ever half
written, and a corrupt file is reported and left as it was."""

from __future__ import annotations

import errno
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.textsafe import clean_value, nesting_depth

# Deepest JSON a host file (config.json, a session document) may nest; deeper is refused
# with one line instead of a RecursionError deep in a parser or serializer.
MAX_FILE_DEPTH = 200


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _relative_parts(root: Path, folder: Path) -> tuple[str, ...]:
    try:
        return Path(folder).relative_to(root).parts
    except ValueError:
        raise OSError(errno.EXDEV, f"{folder} is not inside {root}") from None


def open_folder_inside(root: Path, folder: Path) -> int:
    """An open file descriptor of ``folder`` (a path under ``root``), reached component
    by component from ``root`` with ``O_NOFOLLOW | O_DIRECTORY`` and made where missing
    (``mkdir`` relative to its parent's descriptor). A symbolic link or a non-folder
    anywhere between ``root`` and ``folder`` raises OSError naming it (TRUST-3).

    Race-proof: every step is taken from the descriptor of the folder checked before, so
    a folder swapped for a link at any moment cannot redirect what comes next; writes
    made relative to the returned descriptor land in that folder. The caller closes it."""
    root, folder = Path(root), Path(folder)
    parts = _relative_parts(root, folder)
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:  # the root itself is trusted (a new Home, say): make it
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root, _DIR_FLAGS)
    current = root
    try:
        for part in parts:
            current = current / part
            try:
                os.mkdir(part, 0o777, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                child = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EMLINK) or (
                        exc.errno == errno.ENOTDIR and _is_link(fd, part)):
                    raise OSError(errno.ELOOP, f"{current} is a symbolic link; Crystal does not write through it"
                                  ) from None
                if exc.errno == errno.ENOTDIR:
                    raise NotADirectoryError(errno.ENOTDIR, f"{current} is not a folder") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def ensure_folder_inside(root: Path, folder: Path) -> Path:
    """Make ``folder`` (a path under ``root``) and its parents, refusing a symbolic link
    or a non-folder anywhere between ``root`` and ``folder`` (TRUST-3: a link planted in
    ``.crystal/`` must not make the host write elsewhere). Raises OSError naming it.
    To write race-free, use :func:`open_inside` or ``atomic_write_text(inside=…)``."""
    os.close(open_folder_inside(root, folder))
    return Path(folder)


def open_inside(root: Path, path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of ``path`` (under ``root``) through :func:`open_folder_inside`, with
    ``O_NOFOLLOW``: no symbolic link between ``root`` and the file, nor at its name, can
    redirect it, even one swapped in while this runs."""
    path = Path(path)
    folder = open_folder_inside(root, path.parent)
    try:
        return os.open(path.name, flags | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=folder)
    finally:
        os.close(folder)


def _write_temp(folder: int | None, directory: Path, name: str, text: str, fsync: bool) -> str:
    """Write ``text`` to a new temp file beside ``name``; returns the temp file's name."""
    data = text.encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = (os.open(tmp, flags, 0o600, dir_fd=folder) if folder is not None
                  else os.open(directory / tmp, flags, 0o600))
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(errno.EEXIST, f"Cannot make a temporary file in {directory}")
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
        try:  # keep the mode of the file being replaced; a new file gets the usual one
            old = os.stat(name, dir_fd=folder, follow_symlinks=False) if folder is not None else \
                os.stat(directory / name, follow_symlinks=False)
            wanted = old.st_mode & 0o777 if stat.S_ISREG(old.st_mode) else None
        except FileNotFoundError:
            wanted = None
        if wanted is None:
            umask = os.umask(0)
            os.umask(umask)
            wanted = 0o666 & ~umask
        os.fchmod(fd, wanted)
    except BaseException:
        os.close(fd)
        try:
            if folder is not None:
                os.unlink(tmp, dir_fd=folder)
            else:
                os.unlink(directory / tmp)
        except FileNotFoundError:
            pass
        raise
    os.close(fd)
    return tmp


def atomic_write_text(path: Path, text: str, *, fsync: bool = True, inside: Path | None = None) -> None:
    """Write via a temp file in the same folder, fsync, then rename over the target.

    ``fsync=False`` keeps the rename's atomicity against crashes of this process but not
    against power loss: for small status files rewritten many times a second.
    ``inside``: the folder is reached with :func:`open_folder_inside` and the temp file
    made (``O_EXCL | O_NOFOLLOW``) and renamed relative to that folder's descriptor, so no
    symbolic link between ``inside`` and the file — not even one swapped in meanwhile —
    redirects the write; the rename replaces a link at the file's own name rather than
    writing through it."""
    path = Path(path)
    folder: int | None = None
    if inside is not None:
        folder = open_folder_inside(Path(inside), path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = _write_temp(folder, path.parent, path.name, text, fsync)
        try:
            if folder is not None:
                os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
            else:
                os.replace(path.parent / tmp, path)
        except BaseException:
            try:
                if folder is not None:
                    os.unlink(tmp, dir_fd=folder)
                else:
                    os.unlink(path.parent / tmp)
            except FileNotFoundError:
                pass
            raise
    finally:
        if folder is not None:
            os.close(folder)


def atomic_write_json(path: Path, data: Any, *, fsync: bool = True, compact: bool = False,
                      inside: Path | None = None) -> None:
    """Indented JSON for files people edit; ``compact`` for large machine-written ones
    (json's C encoder only runs without indentation: several times faster)."""
    def dump(value: Any) -> str:
        return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) if compact
                else json.dumps(value, indent=2, ensure_ascii=False))

    text = dump(data)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (a file name that is not UTF-8, say) would fail the write:
        # save it as visible escaped text rather than lose the whole document.
        text = dump(clean_value(data))
    atomic_write_text(path, text + "\n", fsync=fsync, inside=inside)


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """Read a JSON object; raise UserError naming the file when it is not one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"Cannot read {what} {path}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what.capitalize()} {path} is not valid UTF-8 (byte {exc.start}).") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what.capitalize()} {path} is not valid JSON (line {exc.lineno}: {exc.msg}).") from None
    except RecursionError:
        data = None
    if data is None and text.strip() != "null" or nesting_depth(data, MAX_FILE_DEPTH) > MAX_FILE_DEPTH:
        raise UserError(f"{what.capitalize()} {path} nests deeper than {MAX_FILE_DEPTH} levels.")
    if not isinstance(data, dict):
        raise UserError(f"{what.capitalize()} {path} must hold a JSON object.")
    return data
