"""Session documents on disk: ``<workspace>/.crystal/sessions/<id>.json``.

One document per session, rewritten atomically after every turn. Unknown fields in a
document survive a rewrite. A corrupt document is reported and left as it is.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crystal_kernel.errors import UserError
from crystal_kernel.host.fsutil import atomic_write_json, read_json_object

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


class SessionStore:
    """The sessions folder of one workspace."""

    def __init__(self, workspace: Path):
        self.workspace = Path(workspace)
        self.folder = self.workspace / ".crystal" / "sessions"

    def path_for(self, session_id: str) -> Path:
        if not _ID.match(session_id or ""):
            raise UserError(f"'{session_id}' is not a valid session id.")
        return self.folder / f"{session_id}.json"

    def exists(self, session_id: str) -> bool:
        return self.path_for(session_id).exists()

    def load(self, session_id: str) -> dict[str, Any]:
        path = self.path_for(session_id)
        if not path.exists():
            raise UserError(f"No session '{session_id}' in {self.folder}.")
        data = read_json_object(path, "session document")
        if not isinstance(data.get("transcript", []), list):
            raise UserError(f"Session document {path} is corrupt: 'transcript' is not a list.")
        return data

    def save(self, document: dict[str, Any]) -> Path:
        from crystal_kernel.host.secrets import redact

        path = self.path_for(document["id"])
        # Session documents grow with every turn: compact JSON keeps saving fast. Known
        # key values never reach the file (TRUST-4), whatever a tool printed.
        # No symbolic link in .crystal/sessions may lead the write elsewhere (TRUST-3).
        atomic_write_json(path, redact(document), compact=True, inside=self.workspace)
        return path

    def list(self) -> list[SessionSummary]:
        """Every readable session, newest first; unreadable documents are skipped."""
        out: list[SessionSummary] = []
        if not self.folder.is_dir():
            return out
        for path in self.folder.glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                usage = data.get("usage") or {}
                out.append(
                    SessionSummary(
                        id=data.get("id", path.stem),
                        topic=data.get("topic"),
                        created=data.get("created", ""),
                        updated=data.get("updated", ""),
                        turns=int(data.get("turns", 0)),
                        tokens=int(usage.get("inputTokens", 0)) + int(usage.get("outputTokens", 0)),
                    )
                )
            except (OSError, ValueError, TypeError, AttributeError):
                continue
        out.sort(key=lambda s: s.updated, reverse=True)
        return out

    def latest(self) -> str | None:
        sessions = self.list()
        return sessions[0].id if sessions else None
