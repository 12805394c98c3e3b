"""Anthropic Messages (provider ``anthropic``), on the official async SDK, streaming.

Raw stream events are read (not the SDK's accumulating helper) so that text is yielded
as it arrives and a broken stream keeps what came. Tool results carry their images
inside the ``tool_result`` block, and ``is_error`` for failed calls. The system text and
the newest message get a prompt-cache breakpoint, since the prefix repeats every step.

Extended thinking: a reasoning effort turns on ``thinking`` with a token budget. Each
``thinking`` block (streamed as ``thinking_delta`` pieces, closed by a
``signature_delta``) and each ``redacted_thinking`` block is kept in the transcript and
sent back unchanged, signature and data included, first in its assistant message: the
API checks the signatures, and requires them beside the tool use they preceded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from anthropic import AsyncAnthropic

from crystal_kernel.core.messages import ImagePart, Message, ReasoningPart, TextPart, ToolResultPart
from crystal_kernel.providers.base import (
    Finished,
    ModelRequest,
    ReasoningChunk,
    ReasoningItem,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from crystal_kernel.providers.common import omitted_images, paired
from crystal_kernel.providers.sdk import SDKProvider, StreamReader

ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 16_384
_CACHE = {"type": "ephemeral"}
PROVIDER = "anthropic"
# Thinking budget per effort; the API's minimum is 1024 and it must stay below max_tokens.
THINKING_BUDGET = {"low": 2_048, "medium": 8_192, "high": 24_576}
MIN_BUDGET = 1_024


def _image(image: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.mime_type, "data": image.data}}


def anthropic_messages(request: ModelRequest, images: bool) -> list[dict[str, Any]]:
    """Map the transcript to Messages API messages (empty text blocks are not allowed)."""
    out: list[dict[str, Any]] = []
    for message in paired(request.messages):
        blocks = _assistant(message) if message.role == "assistant" else _user(message, images)
        if blocks:
            out.append({"role": message.role, "content": blocks})
    if out:
        last = out[-1]["content"][-1]
        last["cache_control"] = _CACHE
    return out


def _thinking_block(part: ReasoningPart) -> dict[str, Any] | None:
    if part.redacted and part.encrypted:
        return {"type": "redacted_thinking", "data": part.encrypted}
    if part.signature:
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    return None  # no signature: the API would refuse it


def _assistant(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [b for b in map(_thinking_block, message.reasoning(PROVIDER)) if b]
    blocks += [{"type": "text", "text": p.text} for p in message.parts
               if isinstance(p, TextPart) and p.text.strip()]
    for call in message.tool_calls():
        # Arguments that were not valid JSON are kept as text: ``input`` must be an object.
        arguments = call.arguments if call.raw_arguments is None else {"_unparsed": call.raw_arguments}
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return blocks


def thinking_budget(effort: str | None, max_tokens: int) -> int | None:
    """The thinking budget for ``effort`` (None: thinking stays off)."""
    if effort is None or effort == "none":
        return None
    budget = min(THINKING_BUDGET.get(effort, THINKING_BUDGET["medium"]), max_tokens - MIN_BUDGET)
    return budget if budget >= MIN_BUDGET else None


def _unsigned_tool_step(request: ModelRequest) -> bool:
    """Whether the turn continues after an assistant tool call without thinking blocks
    (recorded by another model, or before thinking was on): the API refuses thinking then."""
    for message in reversed(request.messages):
        if message.role == "assistant":
            return bool(message.tool_calls()) and not any(
                _thinking_block(p) for p in message.reasoning(PROVIDER))
    return False


def _user(message: Message, images: bool) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            content: list[dict[str, Any]] = []
            text = part.text or ("(no output)" if part.ok else "The tool call failed.")
            if part.images and not images:
                text += "\n" + omitted_images(len(part.images))
            content.append({"type": "text", "text": text})
            if images:
                content.extend(_image(i) for i in part.images)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id, "content": content}
            if not part.ok:
                block["is_error"] = True
            results.append(block)
        elif isinstance(part, TextPart):
            if part.text.strip():
                rest.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            rest.append(_image(part) if images else {"type": "text", "text": omitted_images(1)})
    # Tool results must come first in the user message.
    return results + rest


class AnthropicProvider(SDKProvider):
    """Messages API adapter."""

    name = "anthropic"
    default_url = ANTHROPIC_URL

    def make_client(self, *, api_key: str, base_url: str, timeout: float) -> AsyncAnthropic:
        return AsyncAnthropic(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        max_tokens = request.max_output_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {"model": request.model or self.model, "max_tokens": max_tokens,
                                "messages": anthropic_messages(request, self.capabilities.images)}
        budget = thinking_budget(request.reasoning_effort, max_tokens)
        if budget is not None and not _unsigned_tool_step(request):
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if request.system:
            body["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
        if request.tools:
            body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                             for t in request.tools]
        return body

    async def open_stream(self, body: dict[str, Any]) -> Any:
        return await self.client.messages.create(**body, stream=True)

    def reader(self, request: ModelRequest) -> AnthropicReader:
        return AnthropicReader()


class AnthropicReader(StreamReader):
    """Raw Messages stream events: text and thinking as they come, a tool call or a
    finished thinking block when its content block stops."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, str]] = {}
        self.thinking: dict[int, dict[str, str]] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop: str | None = None
        self.finished = False

    @property
    def complete(self) -> bool:
        return self.finished

    def feed(self, event: Any) -> Iterator[StreamItem]:
        kind = event.type
        if kind == "message_start":
            usage = event.message.usage
            self.input_tokens = ((usage.input_tokens or 0) + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
                                 + (getattr(usage, "cache_read_input_tokens", 0) or 0))
            self.output_tokens = usage.output_tokens or 0
        elif kind == "content_block_start":
            yield from self._block_start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            yield from self._block_stop(event.index)
        elif kind == "message_delta":
            self.stop = event.delta.stop_reason or self.stop
            if event.usage is not None:
                self.output_tokens = event.usage.output_tokens or self.output_tokens
        elif kind == "message_stop":
            self.finished = True

    def _block_start(self, index: int, block: Any) -> Iterator[StreamItem]:
        if block.type == "tool_use":
            # Input normally streams as JSON deltas; a server may send it whole here.
            start_input = json.dumps(block.input) if block.input else ""
            self.blocks[index] = {"id": block.id, "name": block.name, "json": "", "start": start_input}
        elif block.type == "text" and block.text:
            yield TextChunk(block.text)
        elif block.type == "thinking":
            self.thinking[index] = {"signature": getattr(block, "signature", "") or ""}
            if getattr(block, "thinking", ""):
                yield ReasoningChunk(block.thinking)
        elif block.type == "redacted_thinking":
            self.thinking[index] = {"data": block.data}

    def _delta(self, index: int, delta: Any) -> Iterator[StreamItem]:
        if delta.type == "text_delta":
            if delta.text:
                yield TextChunk(delta.text)
        elif delta.type == "input_json_delta" and index in self.blocks:
            self.blocks[index]["json"] += delta.partial_json
        elif delta.type == "thinking_delta":
            if delta.thinking:
                yield ReasoningChunk(delta.thinking)
        elif delta.type == "signature_delta" and index in self.thinking:
            # The signature arrives whole, once, just before the block stops.
            self.thinking[index]["signature"] = delta.signature

    def _block_stop(self, index: int) -> Iterator[StreamItem]:
        thought = self.thinking.pop(index, None)
        if thought is not None:
            if "data" in thought:
                yield ReasoningItem(provider=PROVIDER, encrypted=thought["data"], redacted=True)
            else:
                yield ReasoningItem(provider=PROVIDER, signature=thought["signature"] or None)
        call = self.blocks.pop(index, None)
        if call is not None:
            yield ToolCallChunk(id=call["id"], name=call["name"], arguments=call["json"] or call["start"] or "{}")
            self.stop = self.stop or "tool_use"

    def end(self) -> Iterator[StreamItem]:
        yield UsageChunk(self.input_tokens, self.output_tokens)
        yield Finished(self.stop or "end_turn")
