"""Session journals: ``<workspace>/.crystal/sessions/<id>.jsonl``.

A session is stored as an append-only journal, one JSON object per line, so that a turn
costs what it adds, not what the session already holds:

- ``{"t": "snapshot", "v": 2, "doc": {...}}`` — always the first line: the session
  document without its message lists, audit log and per-turn usage (those follow as
  lines of their own). Written by an atomic rewrite (temp file + rename) when the session
  is new, forked, compacted or converted from the old single-document format.
- ``{"t": "msg", "to": "both" | "history" | "transcript", "m": {...}}`` — one message
  appended to the transcript and/or the full history.
- ``{"t": "add", "k": "audit" | "usage.turns", "items": [...], "len": N}`` — entries
  appended to a list; ``len`` is the list's length afterwards (older entries beyond it
  are dropped, as the audit log is bounded).
- ``{"t": "set", "k": {...}}`` — top-level document keys that changed. Every save ends
  with one, holding at least ``updated``, ``turns``, ``topic``, ``promptTopic`` and ``usage``, so that a
  listing reads only the first and the last line of a journal.
- ``{"t": "sig", "v": 2, "c": ..., "s": ...}`` — after that set line, the Home key's
  signature of everything the file holds, bound to the workspace and the session id
  (TRUST-5, TRUST-7, host/journal_sign.py). After each signed save the Home records the
  journal's size and chain (host/journal_index.py): a journal that is not that save is
  read as unverified.

Each save appends its lines with one ``write`` and fsyncs, so a crash loses at most the
line being written. A last line without its newline is such a torn write: it is skipped
when read and cut off before the next append. A broken line anywhere else is reported
(one line) and the file is left as it is. Lines of a type this version does not know
are kept and written again in the next snapshot; unknown keys inside lines survive.
"""

from __future__ import annotations

import errno
import json
import operator
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.fsutil import MAX_FILE_DEPTH, atomic_write_text
from crystal_kernel.core.message_log import MessageLog, RawMessage
from crystal_kernel.core.secrets import redact, secret_values
from crystal_kernel.core.textsafe import clean_value, nesting_depth
from crystal_kernel.host import journal_index
from crystal_kernel.host.journal_sign import Signer, older_format, sign_save, signer_for, tail_signed, verify_chain

JOURNAL_VERSION = 2
# Document keys a journal carries as lines of their own rather than in the snapshot.
LIST_KEYS = ("transcript", "history", "audit")
# Unknown line types are kept under this document key and written back by the next snapshot.
UNKNOWN_LINES_KEY = "journalUnknownLines"
# How every message line this module writes starts (compact JSON, "t" first).
_MSG_PREFIX = b'{"t":"msg",'
# A history-only message line: one the next request does not send (see read_journal).
_HISTORY_PREFIX = b'{"t":"msg","to":"history","m":'
# A listing reads at most this much from either end of a journal.
_TAIL_CHUNK = 1 << 16
_LIST_SCAN_LIMIT = 8 << 20


def dumps_line(value: Any, secrets: list[tuple[str, str]] | None = None) -> str:
    """One compact JSON line (no newline). Known key values never reach the file
    (TRUST-4, whatever a tool printed); lone surrogates become visible escapes rather
    than failing the save. ``secrets``: what ``secret_values()`` gives, looked up once
    for all of a save's lines."""
    value = redact(value, secrets)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(clean_value(value), ensure_ascii=False, separators=(",", ":"))
    return text


@dataclass
class JournalState:
    """What a journal holds on disk, so the next save can append only what changed."""

    size: int = 0                       # bytes of complete lines
    mtime_ns: int = 0
    inode: int = 0
    torn_bytes: int = 0                 # a torn last line (a crash mid-write) follows ``size``
    # The signature chain after the last line (TRUST-5); None: not signed by this Home,
    # or not its last save of the session (TRUST-7).
    chain: bytes | None = None
    # Why a journal read is not the host's, when the reason is not simply "unsigned or
    # changed" (cut back, older copy, copied from elsewhere, older format): one clause.
    unverified: str | None = None


def split_document(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The snapshot lines of a whole document: its head and one line per message/list."""
    head = {k: v for k, v in doc.items() if k not in LIST_KEYS and k != UNKNOWN_LINES_KEY}
    usage = head.get("usage")
    turns: list[Any] = []
    if isinstance(usage, dict) and isinstance(usage.get("turns"), list):
        turns = usage["turns"]
        head["usage"] = {k: v for k, v in usage.items() if k != "turns"}
    lines = [dumps_line({"t": "snapshot", "v": JOURNAL_VERSION, "doc": head})]
    transcript = doc.get("transcript") or []
    history = doc.get("history")
    if history is None:
        history = transcript
    lines += message_lines(history, transcript, [], [])
    if turns:
        lines.append(dumps_line({"t": "add", "k": "usage.turns", "items": turns, "len": len(turns)}))
    audit = doc.get("audit") or []
    if audit:
        lines.append(dumps_line({"t": "add", "k": "audit", "items": audit, "len": len(audit)}))
    for extra in doc.get(UNKNOWN_LINES_KEY) or []:
        lines.append(dumps_line(extra))
    return head, lines


def message_lines(history: list[Any], transcript: list[Any], old_history: list[Any],
                  old_transcript: list[Any], secrets: list[tuple[str, str]] | None = None) -> list[str]:
    """Lines for messages appended since ``old_*`` (both lists must extend their old
    selves). A message in both lists (the same object) is written once."""
    new_history = history[len(old_history):]
    new_transcript = transcript[len(old_transcript):]
    position = {id(m): i for i, m in enumerate(new_history)}
    lines: list[str] = []

    def emit(message: Any, to: str) -> None:
        lines.append(dumps_line({"t": "msg", "to": to, "m": _dump(message)}, secrets))

    # Both lists keep their order on replay: history-only messages are written just before
    # the next shared one (a compaction summary is transcript-only and comes first).
    done = 0
    for message in new_transcript:
        at = position.get(id(message))
        if at is None or at < done:
            emit(message, "transcript")
            continue
        for earlier in new_history[done:at]:
            emit(earlier, "history")
        emit(message, "both")
        done = at + 1
    for later in new_history[done:]:
        emit(later, "history")
    return lines


def _dump(message: Any) -> Any:
    dump = getattr(message, "model_dump", None)
    return dump(mode="json") if dump is not None else message


def write_snapshot(path: Path, lines: list[str], *, fsync: bool = True, inside: Path | None = None) -> JournalState:
    """Replace the journal atomically with ``lines`` (temp file, fsync, rename); with
    ``inside``, no symbolic link between that folder and the journal (TRUST-3)."""
    atomic_write_text(path, "\n".join(lines) + "\n", fsync=fsync, inside=inside)
    st = os.stat(path)
    return JournalState(size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino)


def unchanged_since(path: Path, state: JournalState) -> bool:
    """True when the file is still what this process last wrote or read (nobody else
    appended or replaced it): only then may the next save append to it."""
    try:
        st = os.stat(path, follow_symlinks=False)  # a link planted there is a change
    except OSError:
        return False
    return (st.st_ino, st.st_mtime_ns, st.st_size) == (state.inode, state.mtime_ns, state.size + state.torn_bytes)


def append_lines(path: Path, state: JournalState, lines: list[str]) -> JournalState:
    """Append ``lines`` with one write and fsync. A torn last line left by a crash is cut
    off first. On failure (disk full, read-only) the file is cut back to what it held
    and the error is raised: a save never leaves half a line behind."""
    data = ("\n".join(lines) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        # The file opened must be the one checked: a folder swapped for a link between
        # the check and the open would lead to another file (TRUST-3).
        if os.fstat(fd).st_ino != state.inode:
            raise OSError(errno.ESTALE, f"{path} changed while it was being saved")
        if state.torn_bytes:
            os.ftruncate(fd, state.size)
        os.lseek(fd, state.size, os.SEEK_SET)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            try:
                os.ftruncate(fd, state.size)
            except OSError:
                pass
            raise
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return JournalState(size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino)


def read_journal(path: Path, parse_message: Callable[[bytes], Any] | None = None, *,
                 signer: Signer | None = None) -> tuple[dict[str, Any], JournalState]:
    """The whole session document a journal describes, and the journal's state.

    ``parse_message``: builds a message object straight from a ``msg`` line's bytes (one
    pass of pydantic's JSON parser instead of ``json.loads`` and then validation); the
    document's lists then hold those objects. History-only lines (what compaction took
    out of the transcript: no request sends them again) are then not parsed at all: the
    history is a :class:`MessageLog` holding their bytes, parsed when first read. A 50 MB
    session is mostly such lines, and parsing them cost as much as ``json.loads`` of the
    whole file. A corrupt one is reported (the same one line) when it is read.

    ``signer``: the Home key and the workspace; the state's ``chain`` says whether the
    file is signed with it (host/journal_sign.py) and is the last save the Home recorded
    (host/journal_index.py, TRUST-7; ``unverified`` says why not when it is not). An
    unverified journal's messages are marked so, those read here by host/store.py, the
    unread ones when they are parsed."""
    st, data = _read_bytes(path)
    end = data.rfind(b"\n") + 1
    body = data  # read up to ``end`` only; no copy of the whole file, nor of lines left unread
    if not body[:min(end, 4096)].strip() and not body[:end].strip():  # (the full strip copies: only when needed)
        raise UserError(f"Session journal {path} is empty.")
    chain, unverified = _verified(signer, path.stem, data, end)
    lazy_parse = _lazy_parser(path, parse_message, unverified=chain is None) if parse_message is not None else None
    reading = _Reading(path, parse_message, lazy_parse)
    reading.read(body, end)
    doc = reading.document()
    return doc, JournalState(size=end, mtime_ns=st.st_mtime_ns, inode=st.st_ino, torn_bytes=len(data) - end,
                             chain=chain, unverified=unverified)


def _read_bytes(path: Path) -> tuple[os.stat_result, bytes]:
    """The journal's stat and bytes, read through one open file; unreadable: one line."""
    try:
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            data = handle.read()
    except OSError as exc:
        raise UserError(f"Cannot read session journal {path}: {exc.strerror or exc}.") from None
    return st, data


class _Reading:
    """The document a journal's lines build up, one line at a time (see read_journal)."""

    def __init__(self, path: Path, parse_message: Callable[[bytes], Any] | None,
                 lazy_parse: Callable[[bytes, int], Any] | None) -> None:
        self.path = path
        self.parse_message = parse_message
        self.lazy_parse = lazy_parse
        self.doc: dict[str, Any] | None = None
        self.transcript: list[Any] = []
        self.history: list[Any] = []
        self.lists: dict[str, list[Any]] = {"audit": [], "usage.turns": []}
        self.extra_lines: list[Any] = []
        self.lazy = False

    def read(self, body: bytes, end: int) -> None:
        """Take in the lines of ``body[:end]``. The loop is the hot path of a resume: a
        history-only line is kept unparsed right here, without a call per line."""
        history, lazy_parse = self.history, self.lazy_parse
        start = 0
        number = 0
        lazy = False
        while start < end:
            stop = body.index(b"\n", start, end)
            number += 1
            if lazy_parse is not None and number > 1 and body.startswith(_HISTORY_PREFIX, start, stop):
                history.append(RawMessage(body, start, stop, number, lazy_parse))
                lazy = True
            else:
                self.line(body[start:stop], number)
            start = stop + 1
        self.lazy = lazy

    def line(self, raw: bytes, number: int) -> None:
        """Take in line ``number``, ``raw``."""
        if self._parsed_message(raw, number):
            return
        line = _decode_line(self.path, raw, number)
        if number == 1:
            if line.get("t") != "snapshot" or not isinstance(line.get("doc"), dict):
                raise UserError(f"Session journal {self.path} does not start with a snapshot line; "
                                "it was left as it is.")
            self.doc = dict(line["doc"])
            return
        self._apply(line)

    def _parsed_message(self, raw: bytes, number: int) -> bool:
        """True when ``parse_message`` read a message line in one pass (then it is kept)."""
        if self.parse_message is None or number == 1 or not raw.startswith(_MSG_PREFIX):
            return False
        try:
            to, message = self.parse_message(raw)
        except (ValueError, RecursionError):
            return False  # read it the slow way, for the precise report
        self._message(message, to)
        return True

    def _message(self, message: Any, to: Any) -> None:
        if to in ("both", "history"):
            self.history.append(message)
        if to in ("both", "transcript"):
            self.transcript.append(message)

    def _apply(self, line: dict[str, Any]) -> None:
        """One line after the snapshot; a type this version does not know is kept."""
        kind = line.get("t")
        if kind == "msg" and isinstance(line.get("m"), dict):
            self._message(line["m"], line.get("to", "both"))
        elif kind == "set" and isinstance(line.get("k"), dict) and self.doc is not None:  # doc: from line 1
            self.doc.update(line["k"])
        elif kind == "sig":
            return  # checked by _verified
        elif kind == "add" and line.get("k") in self.lists and isinstance(line.get("items"), list):
            target = self.lists[line["k"]]
            target.extend(line["items"])
            keep = line.get("len")
            if isinstance(keep, int) and 0 <= keep < len(target):
                del target[: len(target) - keep]
        else:
            self.extra_lines.append(line)

    def document(self) -> dict[str, Any]:
        """The whole document the lines described."""
        doc = self.doc
        assert doc is not None
        doc["transcript"] = self.transcript
        doc["history"] = MessageLog(self.history) if self.lazy else self.history
        doc["audit"] = self.lists["audit"]
        usage = doc.get("usage")
        if isinstance(usage, dict):
            doc["usage"] = dict(usage, turns=self.lists["usage.turns"])
        if self.extra_lines:
            doc[UNKNOWN_LINES_KEY] = self.extra_lines
        return doc


def _decode_line(path: Path, raw: bytes, number: int) -> dict[str, Any]:
    """Line ``number`` as a JSON object; anything else is one line saying where the
    journal is broken (the file is left as it is)."""
    try:
        line = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise UserError(f"Session journal {path} is not valid UTF-8 at line {number} (byte {exc.start}); "
                        "it was left as it is.") from None
    except (ValueError, RecursionError) as exc:
        what = exc.msg if isinstance(exc, json.JSONDecodeError) else "it cannot be read"
        raise UserError(f"Session journal {path} is corrupt at line {number} ({what}); "
                        "it was left as it is.") from None
    # Counting brackets is cheap; only a line that could nest too deep is walked.
    if raw.count(b"[") + raw.count(b"{") > MAX_FILE_DEPTH and nesting_depth(line, MAX_FILE_DEPTH) > MAX_FILE_DEPTH:
        raise UserError(f"Session journal {path} nests deeper than {MAX_FILE_DEPTH} levels at line {number}; "
                        "it was left as it is.")
    if not isinstance(line, dict):
        raise UserError(f"Session journal {path} is corrupt at line {number} (not a JSON object); "
                        "it was left as it is.")
    return line


def _verified(signer: Signer | None, session_id: str, data: bytes, end: int) -> tuple[bytes | None, str | None]:
    """(the chain, None) when the journal is signed and is the Home's last save of the
    session; else (None, why not, or None for plainly unsigned or changed)."""
    chain = verify_chain(signer, session_id, data, end)
    if chain is None:
        last = data[data.rfind(b"\n", 0, max(end - 1, 0)) + 1:end].rstrip(b"\n")
        if older_format(last):
            return None, ("it was signed by an earlier version of Crystal, before signatures named the "
                          "workspace and the Home recorded each session's last save")
        return None, None
    assert signer is not None
    return (chain, None) if (problem := journal_index.check(signer, session_id, end, chain)) is None else (None, problem)


def _lazy_parser(path: Path, parse_message: Callable[[bytes], Any], *,
                 unverified: bool = False) -> Callable[[bytes, int], Any]:
    """Parses a line of ``path`` when its message is first read; a corrupt line is the
    same one-line UserError resume gives for any other line. ``unverified``: the
    journal is not signed by this Home, and its messages are marked so (TRUST-5)."""

    def parse(raw: bytes, number: int) -> Any:
        try:
            to, message = parse_message(raw)
        except (ValueError, RecursionError):
            what = "it cannot be read"
            try:
                json.loads(raw)
            except UnicodeDecodeError as exc:
                what = f"not valid UTF-8 at byte {exc.start}"
            except json.JSONDecodeError as exc:
                what = exc.msg
            except (ValueError, RecursionError):
                pass
            raise UserError(f"Session journal {path} is corrupt at line {number} ({what}); "
                            "it was left as it is.") from None
        if unverified and isinstance(getattr(message, "meta", None), dict):
            message.meta["unverified"] = True
        return message

    return parse


def read_summary(path: Path) -> dict[str, Any]:
    """The snapshot head merged with the last ``set`` line: what a listing needs, read
    from the two ends of the file only. Raises ValueError/OSError when unreadable."""
    with open(path, "rb") as handle:
        first = handle.readline(_LIST_SCAN_LIMIT)
        head = json.loads(first)
        if not isinstance(head, dict) or head.get("t") != "snapshot" or not isinstance(head.get("doc"), dict):
            raise ValueError("no snapshot line")
        doc = dict(head["doc"])
        size = os.fstat(handle.fileno()).st_size
        position, carry, scanned = size, b"", 0
        while position > len(first) and scanned < _LIST_SCAN_LIMIT:
            step = min(_TAIL_CHUNK, position - len(first))
            position -= step
            scanned += step
            handle.seek(position)
            block = handle.read(step) + carry
            lines = block.split(b"\n")
            carry = lines[0]
            if position <= len(first):
                lines.insert(0, b"")  # the carry is a whole line: look at it too
            for raw in reversed(lines[1:]):
                if _merge_set(doc, raw):
                    return doc
    return doc


def summary_signed(path: Path, signer: Signer | None) -> bool:
    """True when the journal's last complete line is this Home's signature of the line
    a listing reads ``updated`` from (the set line before it, or, a snapshot alone, the
    first line) for this workspace and session, and the journal's size and chain are the
    last save the Home recorded (TRUST-7). Reads the first line and at most the file's
    last 1 MiB."""
    if signer is None:
        return False
    with open(path, "rb") as handle:
        first = handle.readline(_LIST_SCAN_LIMIT).rstrip(b"\n")
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - (1 << 20))
        handle.seek(start)
        block = handle.read()
    complete = block.rfind(b"\n")
    lines = block[:complete].split(b"\n")
    if len(lines) < 2 or (start > 0 and len(lines) < 3):
        return False  # the first line of the block may be a partial one
    anchor = lines[-2] if lines[-2].startswith(b'{"t":"set"') else first
    chain = tail_signed(signer, path.stem, anchor, lines[-1])
    return chain is not None and journal_index.check(signer, path.stem, start + complete + 1, chain) is None


def _merge_set(doc: dict[str, Any], raw: bytes) -> bool:
    if b'"t":"set"' not in raw:
        return False
    try:
        line = json.loads(raw)
    except ValueError:
        return False  # a torn last line
    if isinstance(line, dict) and line.get("t") == "set" and isinstance(line.get("k"), dict):
        doc.update(line["k"])
        return True
    return False


# Keys every save's closing ``set`` line carries, changed or not (see read_summary).
ALWAYS_SET = ("updated", "turns", "topic", "promptTopic", "usage", "answered")


class JournalWriter:
    """Saves one session to its journal: appends what changed since the last save, or
    writes a snapshot when appending cannot describe the change (a new session, a
    compacted transcript, a journal another process wrote meanwhile)."""

    def __init__(self, path: Path, inside: Path | None = None, home: Path | None = None,
                 workspace: Path | None = None):
        self.path = path
        self.inside = inside  # snapshots: no symbolic link below this folder (TRUST-3)
        self.home = home  # whose key signs every save (TRUST-5); None: unsigned
        # The workspace the signature binds (TRUST-7): given, else ``inside``, else the
        # one whose .crystal/sessions holds the journal.
        self.workspace = workspace or inside or path.parent.parent.parent
        # Set when a save could not be recorded in the Home's index (one line to show).
        self.problem: str | None = None
        self.state: JournalState | None = None
        self._history: list[Any] = []
        self._transcript: list[Any] = []
        self._meta: dict[str, str] = {}
        self._lists: dict[str, tuple[int, Any]] = {}

    def loaded(self, state: JournalState, meta: dict[str, Any], history: list[Any], transcript: list[Any],
               lists: dict[str, list[Any]]) -> None:
        """The session was just filled from this journal: the next save appends."""
        self.state = state
        self._remember(meta, history, transcript, lists)

    def _remember(self, meta: dict[str, Any], history: list[Any], transcript: list[Any],
                  lists: dict[str, list[Any]], dumped: dict[str, str] | None = None) -> None:
        # list.copy: a MessageLog's stored entries, without parsing its unread lines.
        self._history, self._transcript = list.copy(history), list.copy(transcript)
        if dumped is None:
            secrets = secret_values()  # once, not once per key (each reads the environment)
            dumped = {k: dumps_line(v, secrets) for k, v in meta.items()}
        self._meta = dumped
        self._lists = {k: (len(v), v[-1] if v else None) for k, v in lists.items()}

    def save(self, meta: dict[str, Any], history: list[Any], transcript: list[Any],
             lists: dict[str, list[Any]], document: Any) -> None:
        """``meta``: the document's other keys (``usage`` without its turns); ``lists``:
        the append-only lists (audit, usage.turns); ``document()``: the whole document,
        called only when a snapshot is written."""
        signer = signer_for(self.home, self.workspace, create=True)
        lines = self._append_lines(meta, history, transcript, lists, signed=signer is not None)
        if lines is None:
            _, snapshot = split_document(document())
            chain = self._sign(signer, None, snapshot)
            self.state = write_snapshot(self.path, snapshot, inside=self.inside)
            self._signed(signer, chain)
            self._remember(meta, history, transcript, lists)
            return
        assert self.state is not None
        chain = self._sign(signer, self.state.chain, lines[0])
        self.state = append_lines(self.path, self.state, lines[0])
        self._signed(signer, chain)
        self._remember(meta, history, transcript, lists, lines[1])

    def _sign(self, signer: Signer | None, previous: bytes | None, lines: list[str]) -> bytes | None:
        """Close ``lines`` with the signature line (added to them); the new chain."""
        if signer is None:
            return None
        line, chain = sign_save(signer, self.path.stem, previous, lines)
        lines.append(line)
        return chain

    def _signed(self, signer: Signer | None, chain: bytes | None) -> None:
        """The save is on disk: keep its chain, and record it in the Home (TRUST-7)."""
        assert self.state is not None
        self.state.chain = chain
        if signer is not None and chain is not None:
            self.problem = journal_index.record(signer, self.path.stem, self.state.size, chain)

    def _append_lines(self, meta: dict[str, Any], history: list[Any], transcript: list[Any],
                      lists: dict[str, list[Any]], signed: bool = False) -> tuple[list[str], dict[str, str]] | None:
        if self.state is None or not unchanged_since(self.path, self.state):
            return None
        if signed and self.state.chain is None:
            return None  # not signed by this Home yet: a signed snapshot starts the chain
        if not (_extends(history, self._history) and _extends(transcript, self._transcript)):
            return None  # compaction replaced the transcript's head: a snapshot
        if set(meta) - {UNKNOWN_LINES_KEY} != set(self._meta) - {UNKNOWN_LINES_KEY}:
            return None
        secrets = secret_values()  # once per save, not once per line (the environment is read)
        lines = message_lines(history, transcript, self._history, self._transcript, secrets)
        for key, items in lists.items():
            count, last = self._lists.get(key, (0, None))
            start = 0
            if count:
                start = next((i + 1 for i in range(len(items) - 1, -1, -1) if items[i] is last), -1)
                if start < 0:
                    return None
            if start < len(items):
                lines.append(dumps_line({"t": "add", "k": key, "items": items[start:], "len": len(items)}, secrets))
        dumped: dict[str, str] = {}
        changed: dict[str, Any] = {}
        for key, value in meta.items():
            if key == UNKNOWN_LINES_KEY:
                dumped[key] = self._meta.get(key, "")
                continue
            text = dumped[key] = dumps_line(value, secrets)
            if key in ALWAYS_SET or text != self._meta.get(key):
                changed[key] = value
        lines.append(dumps_line({"t": "set", "k": changed}, secrets))
        return lines, dumped


def _extends(current: list[Any], saved: list[Any]) -> bool:
    """``current`` starts with exactly the objects of ``saved`` (identity, not equality:
    cheap, and a message replaced in place is a change)."""
    if len(current) < len(saved):
        return False
    # The stored entries (a MessageLog's unread lines stay unread; their placeholders
    # keep their identity once read).
    return not any(map(operator.is_not, list.__iter__(current), list.__iter__(saved)))
