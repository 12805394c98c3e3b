"""What a trust hash covers (TRUST-2, TRUST-5): the exact content the person trusted.

An exec tool set is its whole closure: every file reachable from the set folder, in
every sub-folder (caches, ``.venv``, ``node_modules``, ``.git`` and ``*.pyc`` included:
a set may run any of them). Symbolic links are followed and resolved:

- a link to a file inside the set folder is hashed by the resolved file's content and
  by where it leads, so writing the target or re-pointing the link changes the hash;
- a link to a folder inside the set folder is recorded by where it leads (the folder
  itself is hashed where it is);
- a link leading outside the set folder is refused: the set cannot be trusted until
  the link is replaced by the file itself (a hash of a file elsewhere would trust
  whatever else can write there);
- the set folder and its ``tools.json`` must not be links themselves (a link there
  would let the set be re-pointed at another folder after trust).

Hashing is bounded (:data:`MAX_HASHED_FILES`, :data:`MAX_HASHED_BYTES`): a bigger set
is refused with one line saying so, never trusted by names or sizes alone. A file's
SHA-256 is kept in memory by (device, inode, size, mtime, ctime), so a catalog rebuilt
every request does not re-read an unchanged ``.venv``; the ctime changes on any write
and cannot be set back by a program.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

# A set bigger than this cannot be trusted (one line says so); never hashed by name only.
MAX_HASHED_FILES = 20_000
MAX_HASHED_BYTES = 512 * 1024 * 1024
_CHUNK = 1 << 20
_cache: dict[str, tuple[tuple[int, int, int, int, int], bytes]] = {}
_cache_lock = threading.Lock()
_CACHE_LIMIT = 200_000


@dataclass(frozen=True)
class Digest:
    """A content hash, or why there is none (``problem``: one English sentence)."""

    sha256: str
    problem: str | None = None


def file_sha256(path: str) -> bytes:
    """SHA-256 of one regular file, read in chunks; cached by its stat identity."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _cache_lock:
        hit = _cache.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    value = digest.digest()
    with _cache_lock:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[path] = (key, value)
    return value


def bytes_digest(path: Path) -> Digest:
    """The hash of one file's content (mcp.json, a review prompt, a cassette). The file
    must not be a symbolic link: the trusted path would then name other content."""
    if os.path.islink(path):
        return Digest("", f"{path} is a symbolic link; only a file itself can be trusted")
    try:
        return Digest(file_sha256(str(path)).hex())
    except OSError as exc:
        return Digest("", f"{path} cannot be read ({exc.strerror or exc})")


# Files an mcp.json names that are hashed with it (more: it cannot be trusted).
MAX_NAMED_FILES = 64


def mcp_digest(path: Path) -> Digest:
    """The hash of a workspace ``mcp.json`` and of every workspace file its servers'
    ``command`` and ``args`` name (TRUST-2: trust content, not paths).

    A server started as ``python tools/server.py`` runs the workspace's
    ``tools/server.py``: a ``git pull`` that changes that script must make the file
    untrusted again, as a changed exec set does. Each word of ``command`` and ``args``
    (read as data: a ``${VAR}`` word is skipped) that names an existing regular file
    inside the workspace, relative to it (the servers' working folder) or absolute, is
    hashed with its path and executable bit. An mcp.json that names none has the hash of
    its bytes alone. What a program imports or reads at run time is not covered."""
    base = bytes_digest(path)
    if not base.sha256:
        return base
    workspace = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    try:
        named = _named_files(Path(path), workspace)
    except ValueError as exc:
        return Digest("", str(exc))
    if not named:
        return base
    digest = hashlib.sha256(b"crystal-mcp-1\0" + base.sha256.encode())
    total = 0
    for real in named:
        try:
            st = os.stat(real)
            total += st.st_size
            if total > MAX_HASHED_BYTES:
                return Digest("", f"the files its servers name are larger than {MAX_HASHED_BYTES >> 20} MiB")
            executable = b"x" if st.st_mode & 0o111 else b"-"
            digest.update(os.path.relpath(real, workspace).encode("utf-8", "surrogateescape") + b"\0"
                          + executable + file_sha256(real))
        except OSError as exc:
            return Digest("", f"{real} (named by a server) cannot be read ({exc.strerror or exc})")
    return Digest(digest.hexdigest())


def _named_files(path: Path, workspace: str) -> list[str]:
    """The real paths of the workspace files the servers' command and args name."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return []  # an unreadable file is refused by the loader with its own note
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    found: set[str] = set()
    for entry in (servers.values() if isinstance(servers, dict) else ()):
        if not isinstance(entry, dict):
            continue
        args = entry.get("args")
        words = [entry.get("command"), *(args if isinstance(args, list) else [])]
        for word in words:
            if not isinstance(word, str) or not word or "${" in word or "\0" in word:
                continue
            candidate = os.path.realpath(os.path.join(workspace, os.path.expanduser(word)))
            if _inside(candidate, workspace) and candidate != workspace and os.path.isfile(candidate):
                found.add(candidate)
                if len(found) > MAX_NAMED_FILES:
                    raise ValueError(f"its servers name more than {MAX_NAMED_FILES} workspace files")
    return sorted(found)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def set_digest(manifest: Path) -> Digest:
    """The closure hash of the exec set whose ``tools.json`` is ``manifest``."""
    folder = os.path.dirname(os.path.abspath(manifest))
    for what in (folder, str(manifest)):
        if os.path.islink(what):
            return Digest("", f"{what} is a symbolic link; an exec set folder and its tools.json "
                              "must be the files themselves to be trusted")
    return _closure(folder)


def _closure(folder: str) -> Digest:
    real_root = os.path.realpath(folder)
    digest = hashlib.sha256()
    count, total = 0, 0
    problem: str | None = None

    def refuse(text: str) -> None:
        nonlocal problem
        problem = problem or text

    def on_error(exc: OSError) -> None:
        refuse(f"{exc.filename} cannot be read ({exc.strerror or exc})")

    for root, dirs, files in os.walk(folder, followlinks=False, onerror=on_error):
        dirs.sort()
        entries = sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in entries:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, folder)
            digest.update(b"entry\0" + os.fsencode(rel) + b"\0")
            count += 1
            if count > MAX_HASHED_FILES:
                return Digest("", f"the exec set {folder} holds more than {MAX_HASHED_FILES} files; "
                                  "a set that big cannot be trusted (move what it does not run out of it)")
            try:
                st = os.lstat(full)
                if stat.S_ISLNK(st.st_mode):
                    target = os.path.realpath(full)
                    if not _inside(target, real_root):
                        refuse(f"{full} is a symbolic link leading outside its exec set folder "
                               f"(to {target}); replace it with the file itself to trust the set")
                        continue
                    digest.update(b"link\0" + os.fsencode(os.path.relpath(target, real_root)) + b"\0")
                    st = os.stat(target)
                    if not stat.S_ISREG(st.st_mode):
                        continue  # a folder inside: hashed where it is
                    full = target
                if stat.S_ISREG(st.st_mode):
                    total += st.st_size
                    if total > MAX_HASHED_BYTES:
                        return Digest("", f"the exec set {folder} holds more than "
                                          f"{MAX_HASHED_BYTES // (1024 * 1024)} MiB; a set that big cannot be "
                                          "trusted (move what it does not run out of it)")
                    digest.update(b"file\0" + file_sha256(full))
                    digest.update(b"x" if st.st_mode & 0o111 else b"-")
                else:
                    digest.update(b"special\0" + str(stat.S_IFMT(st.st_mode)).encode())
            except OSError as exc:
                refuse(f"{full} cannot be read ({exc.strerror or exc})")
    if problem is not None:
        return Digest("", problem)
    return Digest(digest.hexdigest())
