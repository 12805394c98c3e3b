"""What a slash command answers, for every front (SPEC §11): one class per kind of answer.

Every answer has ``text`` (what a plain front shows); the kinds a rich front draws
otherwise carry their fields typed (a job table's rows, a log's offset to follow from).
The union of them all is ``host.command_results.CommandResult`` (it adds the fork,
which carries a live session); each front matches it and ends in ``assert_never``.
``kind`` names the answer and ``data`` gives its fields by their wire names (camelCase),
for JSON; fronts read the fields, never ``data``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class _Answer:
    text: str
    kind: ClassVar[str] = "text"

    @property
    def data(self) -> dict[str, Any]:
        """The answer's fields beyond ``text``, by their wire names."""
        return {}


@dataclass(frozen=True)
class TextResult(_Answer):
    """An answer that is its text alone (a setting changed, a listing, a job stopped)."""


@dataclass(frozen=True)
class HelpResult(_Answer):
    """``/help``: the text, and the rows (usages, what they do) for fronts that lay them out."""

    rows: tuple[tuple[tuple[str, ...], str], ...]
    kind: ClassVar[str] = "help"

    @property
    def data(self) -> dict[str, Any]:
        return {"rows": [(list(usages), what) for usages, what in self.rows]}


@dataclass(frozen=True)
class JobsResult(_Answer):
    """``/jobs``: the table as text, and one row per job (the status-file keys plus ``result``)."""

    jobs: tuple[dict[str, Any], ...]
    kind: ClassVar[str] = "jobs"

    @property
    def data(self) -> dict[str, Any]:
        return {"jobs": list(self.jobs)}


@dataclass(frozen=True)
class LogsResult(_Answer):
    """``/logs JOB [--follow]``: the newest output; ``follow`` when the person asked to and
    the job still runs (a live front follows from ``next_offset``)."""

    job_id: str
    follow: bool
    next_offset: int
    state: str
    log_file: str | None
    kind: ClassVar[str] = "logs"

    @property
    def data(self) -> dict[str, Any]:
        return {"jobId": self.job_id, "follow": self.follow, "nextOffset": self.next_offset, "state": self.state,
                "logFile": self.log_file}


@dataclass(frozen=True)
class SessionsResult(_Answer):
    """``/sessions``: the listing, and one row per saved session (the store's fields)."""

    sessions: tuple[dict[str, Any], ...]
    kind: ClassVar[str] = "sessions"

    @property
    def data(self) -> dict[str, Any]:
        return {"sessions": list(self.sessions)}


@dataclass(frozen=True)
class UsageResult(_Answer):
    """``/usage``: the report as text, and its numbers (tokens, turns, cost)."""

    usage: dict[str, Any]
    kind: ClassVar[str] = "usage"

    @property
    def data(self) -> dict[str, Any]:
        return {"usage": self.usage}


@dataclass(frozen=True)
class Resumed(_Answer):
    """``/resume``: the session now holds the saved session ``session_id``."""

    session_id: str
    kind: ClassVar[str] = "resume"

    @property
    def data(self) -> dict[str, Any]:
        return {"sessionId": self.session_id}
