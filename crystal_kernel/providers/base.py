"""The provider protocol every adapter implements.

An adapter turns a :class:`ModelRequest` into one streamed model reply, yielding
:class:`StreamItem` values: text chunks as they arrive, each tool call once it is
complete (argument deltas assembled by the adapter), usage, and a final ``Finished``.
Adapters raise :class:`~crystal_kernel.core.errors.ProviderError` with one English line for
auth, connection, unknown model and exhausted retries; :class:`NotSupported` for MODE-6.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from crystal_kernel.core.messages import Message
from crystal_kernel.core.prefix import PrefixFold
from crystal_kernel.core.tool_types import ToolSpec


@dataclass(frozen=True)
class Capabilities:
    images: bool = True
    context_window: int = 128_000


@dataclass
class ModelRequest:
    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_output_tokens: int | None = None
    # none|low|medium|high, or None for the provider's own default (config reasoningEffort).
    reasoning_effort: str | None = None
    # A short label for logs and cassettes: "turn", "review", "compaction", "topic", "image".
    purpose: str = "turn"


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class ToolCallChunk:
    """A complete tool call. ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ReasoningChunk:
    """A streamed piece of the model's visible reasoning (a summary or thinking text).
    Shown apart from the answer, never mixed into it."""

    text: str


@dataclass(frozen=True)
class ReasoningItem:
    """A finished reasoning block, kept in the transcript and sent back on later requests.

    ``provider`` names the wire protocol that produced it (only that protocol can read it
    back); ``signature`` is Anthropic's thinking signature; ``encrypted`` holds the
    Responses API's ``encrypted_content`` or Anthropic's ``redacted_thinking`` data
    (with ``redacted`` true); ``id`` is the Responses item id. ``text`` may be empty
    when the text was already streamed as :class:`ReasoningChunk` pieces.
    """

    provider: str
    text: str = ""
    signature: str | None = None
    encrypted: str | None = None
    id: str | None = None
    redacted: bool = False


@dataclass(frozen=True)
class UsageChunk:
    input_tokens: int
    output_tokens: int
    # The part of output_tokens spent reasoning, when the server reports it.
    reasoning_tokens: int = 0


@dataclass(frozen=True)
class Finished:
    stop_reason: str = "end_turn"


StreamItem = TextChunk | ReasoningChunk | ReasoningItem | ToolCallChunk | UsageChunk | Finished


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. ``name`` is the config name (openai, anthropic, …)."""

    name: str
    model: str
    capabilities: Capabilities

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one reply. Cancelling the consumer must close the HTTP stream."""
        ...

    async def aclose(self) -> None:
        ...


def refuse_text_tools(request: ModelRequest) -> None:
    """MODE-6: adapters refuse text-input tools and text tool calls in history."""
    from crystal_kernel.core.errors import NotSupported

    for spec in request.tools:
        if spec.input_kind != "json":
            raise NotSupported(f"Tool '{spec.name}' takes text input, which no provider maps.")
    _text_calls_refused(request.messages)


def _refuse_text_calls(_: None, message: Message) -> None:
    from crystal_kernel.core.errors import NotSupported
    from crystal_kernel.core.messages import ToolCallPart

    for part in message.parts:
        if isinstance(part, ToolCallPart) and part.input_kind != "json":
            raise NotSupported(f"The transcript holds a text tool call to '{part.name}', which no provider maps.")


# The messages already checked (a refused one is not kept): each step checks the new ones.
_text_calls_refused = PrefixFold(_refuse_text_calls, None)


class NoModel:
    """The provider of a session that never asks a model (``crystal prompts export``,
    ``crystal tools call``): the prompts and tools read its name, model and capabilities
    (``images`` for tool results); needing no API key, it refuses to stream."""

    def __init__(self, name: str = "none", model: str = "none", *, images: bool = True,
                 why: str = "This session has no model.") -> None:
        self.name, self.model, self.capabilities = name, model, Capabilities(images=images)
        self._why = why

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        from crystal_kernel.core.errors import ProviderError

        raise ProviderError(self._why)
        yield  # an async generator, as the protocol's stream is

    async def aclose(self) -> None:
        """Nothing to close: it holds no connection."""
