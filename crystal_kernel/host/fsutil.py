"""Atomic file writes and careful JSON reads: nothing the host writes is ever half
written, and a corrupt file is reported and left as it was."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from crystal_kernel.errors import UserError
from crystal_kernel.host.textsafe import clean_value, nesting_depth

# Deepest JSON a host file (config.json, a session document) may nest; deeper is refused
# with one line instead of a RecursionError deep in a parser or serializer.
MAX_FILE_DEPTH = 200


def ensure_folder_inside(root: Path, folder: Path) -> Path:
    """Make ``folder`` (a path under ``root``) and its parents, refusing a symbolic link
    or a non-folder anywhere between ``root`` and ``folder`` (TRUST-3: a link planted in
    ``.crystal/`` must not make the host write elsewhere). Raises OSError naming it."""
    root, folder = Path(root), Path(folder)
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        raise OSError(errno.EXDEV, f"{folder} is not inside {root}") from None
    current = root
    for part in parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            try:
                os.mkdir(current)
            except FileExistsError:
                pass
            st = os.lstat(current)
        if stat.S_ISLNK(st.st_mode):
            raise OSError(errno.ELOOP, f"{current} is a symbolic link; Crystal does not write through it")
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, f"{current} is not a folder")
    return folder


def atomic_write_text(path: Path, text: str, *, fsync: bool = True, inside: Path | None = None) -> None:
    """Write via a temp file in the same folder, fsync, then rename over the target.

    ``fsync=False`` keeps the rename's atomicity against crashes of this process but not
    against power loss: for small status files rewritten many times a second.
    ``inside``: the folder is made with :func:`ensure_folder_inside` (no symbolic link
    between ``inside`` and the file); the rename replaces a link at the file's own name
    rather than writing through it."""
    path = Path(path)
    if inside is not None:
        ensure_folder_inside(Path(inside), path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        if path.exists() and not path.is_symlink():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:  # mkstemp makes 0600; a new file gets the usual permissions
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


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
