"""The typed event stream every front renders (SPEC §11).

The turn loop yields these; the kernel and the magics (jupyter/render.py), ACP
(acp/updates.py) and ``crystal run`` (cli/__init__.py, text and jsonl) only render
them. Each front's ``render`` matches :data:`Event` exhaustively and ends in
``assert_never``, so an event added here fails type checking in every front until the
front handles it (docs/architecture.md lists every event, who emits it and what each
front does with it). ``to_json()`` gives exactly the §11 wire shape (camelCase keys, a
``type`` field); fields and events beyond §11 are added only where noted.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator
from pydantic.alias_generators import to_camel

from crystal_kernel.core.messages import ImagePart
from crystal_kernel.core.todos import Todo
from crystal_kernel.core.tool_types import FileChange


class _Event(BaseModel):
    # The wire's names are the fields' in camelCase (§11: sessionId, stopReason,
    # inputTokens, ...); a field named otherwise says so with its own alias. Generated,
    # not written per field, so type checkers see the constructors' real parameters.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class TurnStarted(_Event):
    """Always the first event of a turn: the session it runs in and the model it asks.
    Not a §11 event; ``crystal run --format jsonl`` prints it as ``turn_start``."""

    type: Literal["turn_start"] = "turn_start"
    session_id: str
    provider: str
    model: str


class TextDelta(_Event):
    """A piece of the assistant's answer, in stream order."""

    type: Literal["text"] = "text"
    text: str


class ReasoningDelta(_Event):
    """A piece of the model's reasoning (a summary or thinking text), streamed before the
    answer text it precedes (SPEC §12). Shown apart from the answer, never in it."""

    type: Literal["reasoning"] = "reasoning"
    text: str


class ToolCallStarted(_Event):
    """The model called a tool; it is about to be approved and run."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any]


class ToolProgress(_Event):
    """A running call reported progress (MCP ``notifications/progress``): shown on its
    card. Not a §11 jsonl event (``crystal run`` leaves it out)."""

    type: Literal["tool_progress"] = "tool_progress"
    id: str
    name: str
    progress: float
    total: float | None = None
    message: str | None = None

    def line(self) -> str:
        """``3/10: copying files`` or ``42%`` or ``3``, with the message when there is one."""
        if self.total:
            amount = f"{self.progress:g}/{self.total:g}"
        else:
            amount = f"{self.progress:g}"
        return f"{amount}: {self.message}" if self.message else amount


ToolStatus = Literal["ok", "failed", "cancelled", "denied"]
#: How a turn ended (``turn_end.stopReason``): answered, out of steps, cut at the output
#: limit, refused by the model, stopped by the person, or failed.
StopReason = Literal["end_turn", "max_steps", "max_tokens", "refusal", "cancelled", "error"]
Outcome = Literal["allow", "deny", "ask"]
# Who decided an approval (ApprovalEvent.by).
Decider = Literal["host", "reviewer", "person", "policy"]


class ReviewVerdict(BaseModel):
    """A reviewing model's verdict on one call (REV-1) and the outcome the host derived
    from it: the reviewer's levels, the level after the host floor (``effective_risk``,
    REV-2) and the host's own (``host_risk``). ``error`` says why no verdict could be had
    (the outcome is then ask). The reviewer returns it, the approval flow decides with
    it, and events and approval requests carry it to the fronts."""

    model_config = ConfigDict(frozen=True)

    outcome: Outcome = "ask"
    risk_level: str | None = None
    user_authorization: str | None = None
    harm_unrequested: bool | None = None
    rationale: str = ""
    effective_risk: str | None = None
    host_risk: str | None = None
    error: str | None = None

    @model_serializer(mode="wrap")
    def _with_summary(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Serialized (events, the audit log) with its :meth:`summary` line."""
        data: dict[str, Any] = handler(self)
        data["summary"] = self.summary()
        return data

    def summary(self) -> str:
        """One line a person reads beside the approval prompt."""
        if self.error:
            return f"Reviewer gave no verdict ({self.error}); asking."
        return (f"Reviewer: risk {self.effective_risk or self.risk_level}, authorization "
                f"{self.user_authorization}{', harm not requested' if self.harm_unrequested else ''}"
                f" -> {self.outcome}. {self.rationale}").strip()

    def line(self, *, suggests: bool = False) -> str:
        """``Reviewer: risk high, authorization low`` (with ``suggests`` the outcome too)
        and the rationale, for a card or a form."""
        text = f"Reviewer: risk {self.risk_level}, authorization {self.user_authorization}"
        if suggests:
            text += f", suggests {self.outcome}"
        return text + (f" — {self.rationale}" if self.rationale else "")


class ToolResultEvent(_Event):
    """A tool call finished. ``images`` carries the image parts for fronts that show
    them; on the wire (§11) only their mime types are listed. ``status`` (SPEC §12) says
    how it ended: ok, failed, cancelled (the turn was stopped) or denied (approval said no
    or policy forbade it). Every call the model made ends in one of these."""

    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str
    ok: bool
    text: str
    status: ToolStatus = "ok"
    images: list[ImagePart] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _failed_unless_said(cls, data: Any) -> Any:
        """A result that is not ok and names no status failed (never "ok")."""
        if isinstance(data, dict) and "status" not in data and data.get("ok") is False:
            return {**data, "status": "failed"}
        return data

    # How the front should show the text: "diff", "terminal" or "text" (not on the wire).
    display: str = "text"
    # edit/write/notebook_edit: the whole texts before and after (not on the wire; ACP
    # clients draw their own diffs from it).
    file_change: FileChange | None = Field(default=None, alias="file_change")

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "id": self.id,
            "name": self.name,
            "ok": self.ok,
            "status": self.status,
            "text": self.text,
            "images": [{"mimeType": i.mime_type} for i in self.images],
        }


class ApprovalEvent(_Event):
    """Who decided a tool call, and what. ``by`` is host, reviewer, person or policy.

    ``verdict`` (reviewer's classification and rationale) is an addition to §11 so a
    person can see why.
    """

    type: Literal["approval"] = "approval"
    id: str
    name: str
    outcome: Outcome
    by: Decider
    reason: str | None = None
    verdict: ReviewVerdict | None = None


class Note(_Event):
    """Something the person should know (a skipped manifest, a retry, a conflict)."""

    type: Literal["note"] = "note"
    text: str


class TodosUpdated(_Event):
    """The session's todo list changed during the turn (a tool call wrote it): the
    whole new list. Not a §11 event; jsonl prints it as ``todos``. ACP sends it as the
    session's plan."""

    type: Literal["todos"] = "todos"
    todos: list[Todo]


class Compacted(_Event):
    """The host summarised older messages to fit the context window (before a request
    near the window, or after a server refused one as too long): how many messages
    became the summary, how many were kept, and the estimated tokens before and after.
    Not a §11 event; jsonl prints it as ``compacted``."""

    type: Literal["compacted"] = "compacted"
    summarised: int
    kept: int
    before_tokens: int
    after_tokens: int

    def line(self) -> str:
        """The sentence a person reads."""
        return (f"Compacted the conversation: {self.summarised} older messages became a summary, "
                f"{self.kept} recent messages kept; about {self.before_tokens} -> {self.after_tokens} tokens.")


class UsageEvent(_Event):
    """One reply's tokens. ``reasoningTokens`` (the part of outputTokens the model spent
    reasoning) is an addition to §11, present when the server reports it."""

    type: Literal["usage"] = "usage"
    input_tokens: int
    output_tokens: int
    reasoning_tokens: int | None = None


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    message: str


class TurnEnd(_Event):
    """Always the last event of a turn (see :data:`StopReason`)."""

    type: Literal["turn_end"] = "turn_end"
    session_id: str
    stop_reason: StopReason


#: Every event a turn yields. Adding a member fails ``mypy`` in every front's ``render``
#: until it handles the new event (tests/host/test_events_exhaustive.py proves it).
Event = (TurnStarted | TextDelta | ReasoningDelta | ToolCallStarted | ToolProgress | ToolResultEvent
         | ApprovalEvent | TodosUpdated | Compacted | Note | UsageEvent | ErrorEvent | TurnEnd)
