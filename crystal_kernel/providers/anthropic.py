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
from collections.abc import AsyncIterator
from typing import Any

from anthropic import AsyncAnthropic

from crystal_kernel.host.messages import ImagePart, Message, ReasoningPart, TextPart, ToolResultPart
from crystal_kernel.providers.base import (
    Finished,
    ModelRequest,
    ReasoningChunk,
    ReasoningItem,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
    refuse_text_tools,
)
from crystal_kernel.providers.common import (
    SDKProvider,
    idle_bounded,
    map_stream_error,
    omitted_images,
    paired,
    with_retries,
)

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

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        refuse_text_tools(request)
        body = self.body(request)

        async def start() -> Any:
            return await self.client.messages.create(**body, stream=True)

        stream = await with_retries(start, self.endpoint, self.retry, self.timeout)
        blocks: dict[int, dict[str, str]] = {}
        thinking: dict[int, dict[str, str]] = {}
        input_tokens = output_tokens = 0
        stop: str | None = None
        finished = False
        try:
            async for event in idle_bounded(stream, self.timeout, self.endpoint):
                kind = event.type
                if kind == "message_start":
                    usage = event.message.usage
                    input_tokens = (usage.input_tokens or 0) + (getattr(usage, "cache_creation_input_tokens", 0)
                                                                or 0) + (getattr(usage, "cache_read_input_tokens", 0)
                                                                         or 0)
                    output_tokens = usage.output_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        # Input normally streams as JSON deltas; a server may send it whole here.
                        start_input = json.dumps(block.input) if block.input else ""
                        blocks[event.index] = {"id": block.id, "name": block.name, "json": "", "start": start_input}
                    elif block.type == "text" and block.text:
                        yield TextChunk(block.text)
                    elif block.type == "thinking":
                        thinking[event.index] = {"signature": getattr(block, "signature", "") or ""}
                        if getattr(block, "thinking", ""):
                            yield ReasoningChunk(block.thinking)
                    elif block.type == "redacted_thinking":
                        thinking[event.index] = {"data": block.data}
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta":
                        if delta.text:
                            yield TextChunk(delta.text)
                    elif delta.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index]["json"] += delta.partial_json
                    elif delta.type == "thinking_delta":
                        if delta.thinking:
                            yield ReasoningChunk(delta.thinking)
                    elif delta.type == "signature_delta" and event.index in thinking:
                        # The signature arrives whole, once, just before the block stops.
                        thinking[event.index]["signature"] = delta.signature
                elif kind == "content_block_stop":
                    thought = thinking.pop(event.index, None)
                    if thought is not None:
                        if "data" in thought:
                            yield ReasoningItem(provider=PROVIDER, encrypted=thought["data"], redacted=True)
                        else:
                            yield ReasoningItem(provider=PROVIDER, signature=thought["signature"] or None)
                    call = blocks.pop(event.index, None)
                    if call is not None:
                        yield ToolCallChunk(id=call["id"], name=call["name"],
                                            arguments=call["json"] or call["start"] or "{}")
                        stop = stop or "tool_use"
                elif kind == "message_delta":
                    stop = event.delta.stop_reason or stop
                    if event.usage is not None:
                        output_tokens = event.usage.output_tokens or output_tokens
                elif kind == "message_stop":
                    finished = True
        except Exception as exc:
            raise map_stream_error(exc, self.endpoint) from None
        finally:
            await stream.close()
        if not finished:
            raise self.ended_early()
        yield UsageChunk(input_tokens, output_tokens)
        yield Finished(stop or "end_turn")
