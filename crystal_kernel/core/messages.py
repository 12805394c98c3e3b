"""Transcript messages and their parts, with a JSON round-trip.

A transcript is a list of :class:`Message`. The system text is *not* stored in the
transcript: the session composes it per request (MODE-4 replaces it on a mode switch).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")


class TextPart(_Part):
    kind: Literal["text"] = "text"
    text: str


class ImagePart(_Part):
    """An image, base64 encoded (no whitespace)."""

    kind: Literal["image"] = "image"
    mime_type: str
    data: str

    @classmethod
    def from_bytes(cls, mime_type: str, raw: bytes) -> ImagePart:
        return cls(mime_type=mime_type, data=base64.b64encode(raw).decode("ascii"))

    def raw(self) -> bytes:
        return base64.b64decode(self.data)


class ToolCallPart(_Part):
    """A call the model made. ``input_kind`` is kept for MODE-6 (only json is mapped)."""

    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    input_kind: Literal["json", "text"] = "json"
    # The raw argument text when it was not valid JSON (sent back so the model sees it).
    raw_arguments: str | None = None


class ToolResultPart(_Part):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    ok: bool
    text: str = ""
    images: list[ImagePart] = Field(default_factory=list)


class ReasoningPart(_Part):
    """The model's reasoning before the answer that follows it in the same message.

    Never part of :meth:`Message.text`. ``provider`` is the wire protocol that produced
    it: only that protocol gets it back (``signature`` for Anthropic thinking,
    ``encrypted`` for Responses ``encrypted_content`` or Anthropic redacted thinking,
    ``item_id`` for the Responses reasoning item).
    """

    kind: Literal["reasoning"] = "reasoning"
    text: str = ""
    provider: str | None = None
    signature: str | None = None
    encrypted: str | None = None
    item_id: str | None = None
    redacted: bool = False


Part = Annotated[TextPart | ImagePart | ToolCallPart | ToolResultPart | ReasoningPart, Field(discriminator="kind")]


class Message(BaseModel):
    """One transcript entry.

    ``role`` is ``user`` (person text, or tool results), ``assistant`` (text and tool
    calls). ``interrupted`` marks an answer whose stream broke or was cancelled: what
    arrived is kept.
    """

    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant"]
    parts: list[Part] = Field(default_factory=list)
    interrupted: bool = False
    # Summary messages written by compaction carry kind="summary".
    meta: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls(role="user", parts=[TextPart(text=text)])

    def text(self) -> str:
        """All text parts joined (what a person would read)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    def reasoning(self, provider: str) -> list[ReasoningPart]:
        """The reasoning parts ``provider`` produced (the only ones it can read back)."""
        return [p for p in self.parts if isinstance(p, ReasoningPart) and p.provider == provider]


def dump_transcript(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


def load_transcript(data: list[dict[str, Any]]) -> list[Message]:
    return [Message.model_validate(m) for m in data]


class _MessageLine(BaseModel):
    """A journal's message line (host/journal.py), parsed and validated in one pass."""

    model_config = ConfigDict(extra="allow")

    to: Literal["both", "history", "transcript"] = "both"
    m: Message


# The validator itself: ``model_validate_json``'s Python wrapper added a third to each
# line's parse (~2 us of ~7; 58 ms of resuming a 50 MiB journal, docs/benchmarks.md).
_validate_line = _MessageLine.__pydantic_validator__.validate_json


def parse_message_line(raw: bytes) -> tuple[str, Message]:
    """``(to, message)`` of one journal message line; ValueError when it is not one."""
    line = _validate_line(raw)
    return line.to, line.m
