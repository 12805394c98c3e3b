"""A session's state: plain data, with no provider, tool, job or file behind it.

:class:`SessionState` is what a session's document holds (host/document.py turns it
into the document and back; host/session_file.py writes it to the journal); the
process flags (:class:`ProcessFlags`) are given by the front and never saved. The
runtime that owns the live parts — provider, reviewer, tool source, MCP servers, jobs —
is :class:`crystal_kernel.host.runtime.SessionRuntime`; :class:`~crystal_kernel.host.session.Session`
puts the three together.

Who writes it: only ``crystal_kernel/host`` (the session's methods, the loop, the
commands, compaction); a front reads it and changes it through a host operation
(tests/host/test_session_writers.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.messages import Message
from crystal_kernel.core.todos import Todo
from crystal_kernel.host.approval import SessionAllowances
from crystal_kernel.host.store import new_session_id, now_iso


@dataclass
class Usage:
    """The session's token counts: totals, per turn, per model and per purpose."""

    input_tokens: int = 0
    output_tokens: int = 0
    turns: list[dict[str, Any]] = field(default_factory=list)
    # The part of output_tokens spent reasoning (when the server reports it).
    reasoning_tokens: int = 0
    # Totals per model and per purpose (turn, review, compaction, topic): cost needs the
    # model, and /usage shows what the side requests cost (host/usage.py).
    by_model: dict[str, dict[str, int]] = field(default_factory=dict)
    by_purpose: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, input_tokens: int, output_tokens: int, *, model: str, purpose: str = "turn",
            reasoning_tokens: int = 0) -> None:
        """Count one reply's tokens in the session totals and the breakdowns."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.reasoning_tokens += reasoning_tokens
        for table, key in ((self.by_model, model), (self.by_purpose, purpose)):
            row = table.setdefault(key, {"inputTokens": 0, "outputTokens": 0})
            row["inputTokens"] += input_tokens
            row["outputTokens"] += output_tokens
            if reasoning_tokens:
                row["reasoningTokens"] = row.get("reasoningTokens", 0) + reasoning_tokens

    def as_dict(self) -> dict[str, Any]:
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "reasoningTokens": self.reasoning_tokens, "turns": self.turns,
                "byModel": self.by_model, "byPurpose": self.by_purpose}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        def table(value: Any) -> dict[str, dict[str, int]]:
            if not isinstance(value, dict):
                return {}
            rows = {}
            for k, v in value.items():
                if isinstance(v, dict):
                    row = {"inputTokens": int(v.get("inputTokens", 0)), "outputTokens": int(v.get("outputTokens", 0))}
                    if v.get("reasoningTokens"):
                        row["reasoningTokens"] = int(v["reasoningTokens"])
                    rows[str(k)] = row
            return rows

        return cls(int(data.get("inputTokens", 0)), int(data.get("outputTokens", 0)), list(data.get("turns", [])),
                   by_model=table(data.get("byModel")), by_purpose=table(data.get("byPurpose")),
                   reasoning_tokens=int(data.get("reasoningTokens", 0)))


@dataclass(eq=False, repr=False)
class LiveState:
    """What a session holds only while this process has it open (never saved)."""

    # Calls the person allowed for the rest of the session (host/approval.py).
    allowances: SessionAllowances = field(default_factory=SessionAllowances)
    # A turn is running: switches (mode, model, /cd) are refused meanwhile.
    busy: bool = False
    # Automatic compaction (host/compaction.py): after a failure, the transcript length
    # at which to try again; and whether "nothing left to summarise" was said already.
    compaction_retry_at: int = 0
    compaction_warned: bool = False
    # TRUST-3: the workspace review texts as the session found them (host/review.py).
    review_baseline: str | None = None
    # The active system message, composed on first use (Session.system_text).
    system: str | None = None
    # English notes for the person, emitted by the loop as Note events.
    notes: list[str] = field(default_factory=list)
    said_once: set[str] = field(default_factory=set)


@dataclass(eq=False, repr=False)
class SessionState:
    """The conversation and its settings: first what its document saves (host/document.py),
    with the unknown keys a loaded document brought (``extra_doc``, written back as they
    were); then what lives only as long as this process has the session open."""

    workspace: Path
    mode: str
    approval: str
    access: AccessRules
    id: str = field(default_factory=new_session_id)
    created: str = field(default_factory=now_iso)
    forked_from: str | None = None
    topic: str | None = None
    turns: int = 0
    transcript: list[Message] = field(default_factory=list)
    # Full history for the record: compaction shortens the transcript, never this.
    history: list[Message] = field(default_factory=list)
    todos: list[Todo] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    audit: list[dict[str, Any]] = field(default_factory=list)
    extra_doc: dict[str, Any] = field(default_factory=dict)

    # Not saved: this process's side of the conversation (the three read most often
    # are properties below).
    live: LiveState = field(default_factory=LiveState)

    @property
    def allowances(self) -> SessionAllowances:
        return self.live.allowances

    @property
    def busy(self) -> bool:
        return self.live.busy

    @busy.setter
    def busy(self, busy: bool) -> None:
        self.live.busy = busy

    @property
    def review_baseline(self) -> str | None:
        return self.live.review_baseline

    @review_baseline.setter
    def review_baseline(self, baseline: str | None) -> None:
        self.live.review_baseline = baseline

    def replace_todos(self, todos: list[Todo]) -> None:
        """todowrite's new list (MODE-5), in place: a front showing the list holds this object."""
        self.todos[:] = todos

    def note(self, text: str, *, once: bool = False) -> None:
        """Queue an English note for the person; the loop emits it as a Note event.
        ``once``: at most once per session (discovery notes repeat on every rebuild)."""
        if once:
            if text in self.live.said_once:
                return
            self.live.said_once.add(text)
        self.live.notes.append(text)

    def drain_notes(self) -> list[str]:
        """The queued notes, oldest first; the queue is left empty."""
        notes, self.live.notes = self.live.notes, []
        return notes
