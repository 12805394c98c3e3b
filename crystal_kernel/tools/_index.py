"""The full-text index behind the search tool: SQLite FTS5 under
``<workspace>/.crystal/index/``, BM25 ranking with file names and folders weighted above
contents, updated incrementally from modification times.

The index is a cache: a corrupt or foreign database file is replaced by a fresh one.
Indexing is bounded: at most :data:`MAX_BODY_BYTES` of a file's text is indexed, binary
files are indexed by path only, credential files are never read.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.access import is_credential_parts
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.fsutil import ensure_folder_inside, open_inside

# Re-exported: the counter lives apart so that the file tools need not load the index.
from crystal_kernel.tools._changes import generation as generation
from crystal_kernel.tools._changes import note_change as note_change
from crystal_kernel.tools._files import looks_binary
from crystal_kernel.tools._walk import RG_BASE_FLAGS, rg_binary, walk
from crystal_kernel.tools._watch import FolderWatch, folders_of, open_watch

# 2: notebooks are indexed by their cell sources.
SCHEMA_VERSION = "2"
MAX_BODY_BYTES = 256 * 1024
MAX_FILES = 200_000
# Weights of the name, folder and body columns in BM25.
WEIGHTS = (10.0, 4.0, 1.0)
# Changes made outside the agent's own tools show up after at most this long.
REFRESH_SECONDS = 2.0
# Where folder watches tell an unchanged tree (tools/_watch.py), the full check still
# runs at least this often: for what a watch cannot see (a file written in a folder
# that held no indexed file two levels down, an ignore file above the workspace).
FULL_CHECK_SECONDS = 30.0

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"\w+", re.UNICODE)


def split_words(text: str) -> list[str]:
    """Identifier-aware words: ``SessionStore_v2`` -> session, store, v, 2 (lowercase)."""
    out: list[str] = []
    for token in _WORD.findall(text):
        for piece in token.split("_"):
            if not piece:
                continue
            parts = _CAMEL.findall(piece) or [piece]
            out.extend(p.lower() for p in parts)
    return out


def _name_field(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return " ".join([name, *split_words(name)])


def _folder_field(rel: str) -> str:
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return " ".join([folder, *split_words(folder)])


def fts_query(query: str) -> str:
    """A safe FTS5 query: every word of the query, any of them (OR), identifiers split
    the way the index splits them."""
    terms: list[str] = []
    for token in _WORD.findall(query):
        words = split_words(token)
        if not words:
            continue
        phrase = '"' + " ".join(words) + '"'
        whole = '"' + token.lower().replace('"', "") + '"'
        terms.append(phrase if phrase == whole else f"({phrase} OR {whole})")
    return " OR ".join(dict.fromkeys(terms))


@dataclass(frozen=True)
class Hit:
    path: str
    score: float
    snippet: str


def _list_files(root: Path) -> list[str]:
    rg = rg_binary()
    if rg:
        out = subprocess.run([rg, *RG_BASE_FLAGS, "--files", "--null", "--", "."], cwd=root,
                             capture_output=True, timeout=120).stdout
        names = [os.fsdecode(p) for p in out.split(b"\0") if p]
        return [n[2:] if n.startswith("./") else n for n in names]
    return [p.relative_to(root).as_posix() for p, _, _ in walk(root)]


class SearchIndex:
    """One workspace's index; thread-safe (one refresh or query at a time)."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.folder = paths.index_dir(self.workspace)
        self.path = self.folder / "search.sqlite"
        self.lock = threading.Lock()
        self.conn: sqlite3.Connection | None = None
        self.last_refresh = 0.0
        self.generation_seen = -1
        self.watch: FolderWatch | None = None
        self.last_full = 0.0
        self.full_due = True  # the watch does not yet cover every folder listed

    # ----- storage ------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        if self.conn is not None:
            return self.conn
        # TRUST-3: a symbolic link planted at .crystal, .crystal/index, its .gitignore or
        # the database files must not make the host write outside the workspace.
        try:
            ensure_folder_inside(self.workspace, self.folder)
        except OSError as exc:
            raise ToolError(f"The search index cannot be kept: {exc.strerror or exc}.") from None
        ignore = self.folder / ".gitignore"
        if ignore.is_symlink():
            ignore.unlink()
        try:
            fd = open_inside(self.workspace, ignore, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as handle:
                handle.write("*\n")
        except FileExistsError:
            pass
        except OSError as exc:
            raise ToolError(f"The search index cannot be kept: {exc.strerror or exc}.") from None
        for suffix in ("", "-wal", "-shm", "-journal"):
            link = Path(str(self.path) + suffix)
            if link.is_symlink():  # a cache: a planted link is removed, never followed
                link.unlink()
        try:
            self.conn = self._connect()
        except sqlite3.DatabaseError:
            # A cache: replace what cannot be read.
            self._reset()
            self.conn = self._connect()
        return self.conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key='version'").fetchone()
            if row is None or row[0] != SCHEMA_VERSION:
                conn.executescript(
                    "DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS docs;"
                    "CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL,"
                    " mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL);"
                    "CREATE VIRTUAL TABLE docs USING fts5(name, folder, body,"
                    " tokenize = 'unicode61 remove_diacritics 2');"
                )
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (SCHEMA_VERSION,))
                conn.commit()
            conn.execute("SELECT count(*) FROM files").fetchone()
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _reset(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(str(self.path) + suffix)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None
            if self.watch is not None:
                self.watch.close()
                self.watch = None

    # ----- refresh ------------------------------------------------------------------
    def refresh(self, *, force: bool = False, generation: int = 0) -> tuple[int, int]:
        """Bring the index up to date; returns (files updated, files removed). Skipped
        when the last refresh was under REFRESH_SECONDS ago and no tool changed files.
        When folder watches say nothing changed in the tree since the last full check
        (and it is under FULL_CHECK_SECONDS old), nothing is listed or read either."""
        with self.lock:
            now = time.monotonic()
            if (not force and generation == self.generation_seen
                    and now - self.last_refresh < REFRESH_SECONDS):
                return 0, 0
            if self._unchanged(now, generation):
                self.last_refresh = now
                return 0, 0
            # Watch the folders known so far before listing: a change made while the
            # listing runs is then seen by the next check.
            watch = open_watch()
            if watch is not None:
                watch.add(self.watch.folders if self.watch is not None else {str(self.workspace)})
            try:
                result, listed = self._refresh(self._open())
            except sqlite3.DatabaseError:
                # The file went bad under us: start over once from an empty index.
                self._reset()
                result, listed = self._refresh(self._open())
            self._rewatch(watch, listed)
            self.last_refresh = self.last_full = time.monotonic()
            self.generation_seen = generation
            return result

    def _unchanged(self, now: float, generation: int) -> bool:
        """The watches saw nothing since the last full check, which is recent enough."""
        watch = self.watch
        if watch is None or self.full_due or generation != self.generation_seen:
            return False
        return not watch.changed() and now - self.last_full < FULL_CHECK_SECONDS

    def _rewatch(self, watch: FolderWatch | None, listed: list[str]) -> None:
        if self.watch is not None:
            self.watch.close()
        self.watch = watch
        if watch is None:
            self.full_due = True
            return
        index = str(self.folder)
        folders = {f for f in folders_of(listed, str(self.workspace))
                   if f != index and not f.startswith(index + os.sep)}
        # Folders watched only now may have changed during the listing: check once more.
        self.full_due = watch.add(folders) > 0 or watch.broken

    def _refresh(self, conn: sqlite3.Connection) -> tuple[tuple[int, int], list[str]]:
        """Index what changed; returns (updated, removed) and the files listed."""
        current: dict[str, tuple[int, int]] = {}
        base = str(self.workspace)
        listed = _list_files(self.workspace)[:MAX_FILES]
        for rel in listed:
            if is_credential_parts(tuple(rel.split("/"))):
                continue
            try:
                st = os.stat(os.path.join(base, rel))
            except OSError:
                continue
            current[rel] = (st.st_mtime_ns, st.st_size)
        stored = {p: (m, s, i) for i, p, m, s in conn.execute("SELECT id, path, mtime_ns, size FROM files")}
        removed = [stored[p][2] for p in stored.keys() - current.keys()]
        changed = [p for p, ms in current.items() if p not in stored or stored[p][:2] != ms]
        with conn:
            for file_id in removed:
                conn.execute("DELETE FROM files WHERE id=?", (file_id,))
                conn.execute("DELETE FROM docs WHERE rowid=?", (file_id,))
            for rel in changed:
                body = self._body(self.workspace / rel)
                mtime, size = current[rel]
                if rel in stored:
                    file_id = stored[rel][2]
                    conn.execute("UPDATE files SET mtime_ns=?, size=? WHERE id=?", (mtime, size, file_id))
                    conn.execute("DELETE FROM docs WHERE rowid=?", (file_id,))
                else:
                    file_id = conn.execute("INSERT INTO files (path, mtime_ns, size) VALUES (?, ?, ?)",
                                           (rel, mtime, size)).lastrowid
                conn.execute("INSERT INTO docs (rowid, name, folder, body) VALUES (?, ?, ?, ?)",
                             (file_id, _name_field(rel), _folder_field(rel), body))
        return (len(changed), len(removed)), listed

    @staticmethod
    def _body(path: Path) -> str:
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_BODY_BYTES)
        except OSError:
            return ""
        if looks_binary(data[:8192]):
            return ""
        if path.suffix.lower() == ".ipynb":
            from crystal_kernel.tools._notebook_search import notebook_body

            # A notebook past the size bound is cut JSON: index what can be seen of it.
            body = notebook_body(data) if len(data) < MAX_BODY_BYTES else None
            if body is not None:
                return body
        return data.decode("utf-8", errors="replace")

    # ----- query --------------------------------------------------------------------
    def query(self, text: str, limit: int) -> list[Hit]:
        expression = fts_query(text)
        if not expression:
            return []
        with self.lock:
            conn = self._open()
            rows = conn.execute(
                "SELECT files.path, bm25(docs, ?, ?, ?) AS score,"
                " snippet(docs, 2, '»', '«', ' … ', 16)"
                " FROM docs JOIN files ON files.id = docs.rowid"
                " WHERE docs MATCH ? ORDER BY score, files.path LIMIT ?",
                (*WEIGHTS, expression, limit),
            ).fetchall()
        return [Hit(path, score, " ".join(snippet.split())) for path, score, snippet in rows]


# Open indexes, most recently used last; bounded so long-lived processes keep few handles.
_indexes: dict[Path, SearchIndex] = {}
MAX_OPEN_INDEXES = 8
_indexes_lock = threading.Lock()


def index_for(workspace: Path) -> SearchIndex:
    """The process-wide index object of a workspace."""
    key = Path(os.path.realpath(workspace))
    with _indexes_lock:
        index = _indexes.pop(key, None) or SearchIndex(key)
        _indexes[key] = index
        while len(_indexes) > MAX_OPEN_INDEXES:
            oldest = next(iter(_indexes))
            _indexes.pop(oldest).close()
        return index
