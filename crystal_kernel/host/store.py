"""Sessions on disk: ``<workspace>/.crystal/sessions/<id>.jsonl``.

Each session is an append-only journal (host/journal.py): a turn appends what it added
and fsyncs, a compaction or fork writes a snapshot. The older format — one whole
document per session, ``<id>.json``, rewritten after every turn — is still read; the
first save of such a session writes its journal and removes the old document. Unknown
fields survive. A corrupt file is reported (one line) and left as it is.

TRUST-5, TRUST-7: journals are signed with the Home key, bound to the workspace and
the session id (host/journal_sign.py), and the Home records each session's last signed
save (host/journal_index.py). A bare ``/resume`` (:meth:`SessionStore.latest`) picks
only sessions this Home signed that are still that last save; a foreign one (planted,
edited, cut back, an older copy, copied from another workspace or renamed, old format,
another Home) opened by id is read as history: its messages are marked ``unverified``
and never reach the reviewer as the person's words (host/sidecall.py), and the folders
it lists are not granted again (host/session_file.py).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crystal_kernel.core import paths
from crystal_kernel.core.errors import UnknownSession, UserError
from crystal_kernel.core.fsutil import read_json_object
from crystal_kernel.host import journal_index
from crystal_kernel.host.journal import (
    JournalState,
    read_journal,
    read_summary,
    split_document,
    summary_signed,
    write_snapshot,
)
from crystal_kernel.host.journal_sign import Signer, sign_save, signer_for
from crystal_kernel.host.prompt_topic import prompt_topic

DOCUMENT_VERSION = 1
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def new_session_id() -> str:
    """Time-sortable and unique: 20261130-051307-a1b2c3."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class SessionSummary:
    id: str
    topic: str | None
    created: str
    updated: str
    turns: int
    tokens: int
    # Written by this Home for this workspace and id, and still its last save (TRUST-5,
    # TRUST-7): only such a session is picked by a bare /resume; listings mark the others.
    signed: bool = False
    # False when the session's last prompt got no answer (its request failed, or it was
    # cancelled first): it can be resumed, and listings say so.
    answered: bool = True
    # The first prompt, shortened and made safe (host/topic.py): names the session in
    # listings while it has no topic.
    prompt_topic: str | None = None

    @property
    def title(self) -> str | None:
        """What names the session in a listing: its topic, else its first prompt quoted."""
        if self.topic:
            return self.topic
        return f"“{self.prompt_topic}”" if self.prompt_topic else None


class SessionStore:
    """The sessions folder of one workspace."""

    def __init__(self, workspace: Path, home: Path | None = None):
        self.workspace = Path(workspace)
        self.folder = paths.sessions_dir(self.workspace)
        self.home = home  # whose key signs and checks journals (TRUST-5)

    def signer(self, *, create: bool = False) -> Signer | None:
        """The Home key and this workspace: what signs and checks its journals."""
        return signer_for(self.home, self.workspace, create=create)

    def journal_path(self, session_id: str) -> Path:
        """Where the session's journal is (or will be) written."""
        if not _ID.match(session_id or ""):
            raise UserError(f"'{session_id}' is not a valid session id.")
        return self.folder / f"{session_id}.jsonl"

    def document_path(self, session_id: str) -> Path:
        """The older single-document format of the same session."""
        return self.journal_path(session_id).with_suffix(".json")

    def path_for(self, session_id: str) -> Path:
        """The session's file: its journal, or an old-format document when only that exists."""
        journal = self.journal_path(session_id)
        if journal.exists() or journal.is_symlink():
            return journal
        document = self.document_path(session_id)
        return document if document.exists() or document.is_symlink() else journal

    def exists(self, session_id: str) -> bool:
        return self.path_for(session_id).exists()

    def load(self, session_id: str) -> dict[str, Any]:
        """The whole session document (from the journal, or the old format)."""
        return self.load_with_state(session_id)[0]

    def load_with_state(self, session_id: str, *, messages: bool = False, notes: list[str] | None = None
                        ) -> tuple[dict[str, Any], JournalState | None]:
        """The document and, for a journal, its state (so the next save appends).
        ``messages``: a journal's message lists hold Message objects rather than dicts
        (faster: what resume uses). A session this Home did not sign has its messages
        marked unverified, and ``notes`` gets one line saying so and why when it is known
        (TRUST-5, TRUST-7): the caller then grants none of its folders."""
        path = self.path_for(session_id)
        if not path.exists():
            raise UnknownSession(f"No session '{session_id}' in {self.folder}.")
        if path.suffix == ".jsonl":
            from crystal_kernel.core.messages import parse_message_line

            data, state = read_journal(path, parse_message_line if messages else None,
                                       signer=self.signer())
            signed, why = state.chain is not None, state.unverified
        else:
            data, state, signed, why = read_json_object(path, "session document"), None, False, None
        if not isinstance(data.get("transcript", []), list):
            raise UserError(f"Session document {path} is corrupt: 'transcript' is not a list.")
        if not signed:
            mark_unverified(data)
            if notes is not None:
                notes.append(unverified_note(session_id, why))
        return data, state

    def save(self, document: dict[str, Any]) -> Path:
        """Write a whole document as a fresh journal (a snapshot). Known key values never
        reach the file (TRUST-4, host/journal.py redacts every line); no symbolic link in
        .crystal/sessions may lead the write elsewhere (TRUST-3)."""
        path = self.journal_path(document["id"])
        _, lines = split_document(document)
        signer = self.signer(create=True)
        chain = None
        if signer is not None:
            line, chain = sign_save(signer, path.stem, None, lines)
            lines.append(line)
        state = write_snapshot(path, lines, inside=self.workspace)
        if signer is not None and chain is not None:
            journal_index.record(signer, path.stem, state.size, chain)
        self.drop_old_document(document["id"])
        return path

    def drop_old_document(self, session_id: str) -> None:
        """Remove the old-format document once the journal holds the session."""
        try:
            self.document_path(session_id).unlink()
        except FileNotFoundError:
            pass

    def list(self) -> list[SessionSummary]:
        """Every readable session, newest first; unreadable files are skipped. A journal
        is read at its two ends only (its snapshot head and its last ``set`` line)."""
        out: list[SessionSummary] = []
        if not self.folder.is_dir():
            return out
        signer = self.signer()
        journals = {p.stem for p in self.folder.glob("*.jsonl")}
        files = [*self.folder.glob("*.jsonl"), *(p for p in self.folder.glob("*.json") if p.stem not in journals)]
        for path in files:
            try:
                if path.suffix == ".jsonl":
                    data = read_summary(path)
                else:
                    data = json.loads(path.read_text(encoding="utf-8"))
                usage = data.get("usage") or {}
                out.append(
                    SessionSummary(
                        id=path.stem if path.suffix == ".jsonl" else data.get("id", path.stem),
                        topic=data.get("topic"),
                        created=data.get("created", ""),
                        updated=data.get("updated", ""),
                        turns=int(data.get("turns", 0)),
                        tokens=int(usage.get("inputTokens", 0)) + int(usage.get("outputTokens", 0)),
                        signed=path.suffix == ".jsonl" and summary_signed(path, signer),
                        answered=data.get("answered") is not False,
                        prompt_topic=_prompt_topic(data.get("promptTopic")),
                    )
                )
            except (OSError, ValueError, TypeError, AttributeError):
                continue
        out.sort(key=lambda s: s.updated, reverse=True)
        return out

    def latest(self) -> str | None:
        """The newest session this Home signed (a bare /resume); None when there is none."""
        return next((s.id for s in self.list() if s.signed), None)

    def signed(self, session_id: str) -> bool:
        """True when the session's journal ends with this Home's signature and is the last
        save the Home recorded (a cheap check of its two ends; resume checks every line)."""
        try:
            path = self.journal_path(session_id)
            return path.is_file() and summary_signed(path, self.signer())
        except (OSError, UserError):
            return False


# How listings (/sessions in every front) mark a session that is not signed, and what
# the mark means (said once under the list).
UNVERIFIED_MARK = "  (unverified)"
UNVERIFIED_LEGEND = ("(unverified): not the last save this Crystal Home signed for this workspace and session "
                     "(planted, edited, cut back, an older copy, copied or renamed from elsewhere, or saved "
                     "before this version); /resume ID reads it as history, a bare /resume never picks it.")


def unverified_note(session_id: str, why: str | None = None) -> str:
    """What the person is told about a session read as unverified history."""
    because = f" ({why})" if why else ""
    return (f"Session {session_id} is unverified: it was not written by this Crystal Home for this workspace "
            f"and session id, or was changed since{because}. It is read as history: its messages are not taken "
            "as your words, the folders it lists are not granted again, and a bare /resume does not pick it.")


def _prompt_topic(value: Any) -> str | None:
    # A session file is a workspace file (untrusted): the label is cleaned once more.
    return prompt_topic(value) if isinstance(value, str) else None


def mark_unverified(document: dict[str, Any]) -> int:
    """Mark every message of a foreign session ``unverified`` (in its meta); the count."""
    seen: set[int] = set()
    for key in ("transcript", "history"):
        for message in list.__iter__(document.get(key) or []):
            if id(message) in seen:
                continue
            seen.add(id(message))
            meta = message.get("meta") if isinstance(message, dict) else getattr(message, "meta", None)
            if meta is None and isinstance(message, dict):
                meta = message["meta"] = {}
            if isinstance(meta, dict):
                meta["unverified"] = True
    return len(seen)
