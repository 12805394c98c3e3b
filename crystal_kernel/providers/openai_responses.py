"""OpenAI Responses API (provider ``openai-responses``), on the official async SDK, streaming.

The whole transcript is sent every time (``store`` false), as input items: messages,
``function_call`` and ``function_call_output``. A tool result's images travel inside the
``function_call_output`` list form (``input_text`` + ``input_image``), which the API and
the SDK accept.

Reasoning: with an effort set (or a model known to reason) the request asks for a
reasoning summary and ``include: ["reasoning.encrypted_content"]``. Under ``store: false``
the server keeps nothing, so each reasoning item comes back encrypted, is kept in the
transcript (a ``ReasoningPart``) and is sent back as an input item on the following
requests: the model then continues its own reasoning across tool calls, also after the
session was saved and resumed. The item id is not sent: with nothing stored, the server
would look it up and fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from openai._client import AsyncOpenAI
from openai._streaming import AsyncStream
from openai.types.responses import Response, ResponseStreamEvent

from crystal_kernel.core.errors import ProviderError
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
from crystal_kernel.providers.common import omitted_images, paired, result_text
from crystal_kernel.providers.openai_chat import OPENAI_URL, call_arguments, image_url, openai_client, post_stream
from crystal_kernel.providers.sdk import SDKProvider, StreamReader


def response_input(request: ModelRequest, images: bool) -> list[dict[str, Any]]:
    """Map the transcript to Responses input items."""
    items: list[dict[str, Any]] = []
    for message in paired(request.messages):
        if message.role == "assistant":
            items.extend(_assistant(message))
        else:
            items.extend(_user(message, images))
    return items


PROVIDER = "openai-responses"
# Models that reason by default: they get a summary and encrypted items even with no
# reasoningEffort set (others get no reasoning parameter, which they would refuse).
_REASONS = re.compile(r"^(o\d|gpt-5|gpt-oss|codex)|/(o\d|gpt-5|gpt-oss)")


def _reasoning_item(part: ReasoningPart) -> dict[str, Any]:
    summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    return {"type": "reasoning", "summary": summary, "encrypted_content": part.encrypted}


def _assistant(message: Message) -> list[dict[str, Any]]:
    """Reasoning items first (the model produced them before its answer), then the text,
    then the calls. Only encrypted items from this protocol can be read back."""
    items: list[dict[str, Any]] = [_reasoning_item(p) for p in message.reasoning(PROVIDER) if p.encrypted]
    text = message.text()
    if text:
        # "type": "message" is optional for OpenAI but llama.cpp's /v1/responses refuses an
        # assistant item without it ("Cannot determine type of 'item'", HTTP 400).
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in message.tool_calls():
        items.append({"type": "function_call", "call_id": call.id, "name": call.name,
                      "arguments": call_arguments(call)})
    return items


def reasoning_options(model: str, effort: str | None) -> dict[str, Any]:
    """``reasoning`` and ``include`` for the request body (empty: the model's default)."""
    if effort == "none":
        return {"reasoning": {"effort": "none"}}
    if effort is None and not _REASONS.search(model.lower()):
        return {}
    reasoning: dict[str, Any] = {"summary": "auto"}
    if effort is not None:
        reasoning["effort"] = effort
    return {"reasoning": reasoning, "include": ["reasoning.encrypted_content"]}


def _summary_text(item: Any) -> str:
    parts = [getattr(s, "text", "") for s in (getattr(item, "summary", None) or [])]
    if not any(parts):  # servers that stream raw reasoning (gpt-oss) fill content instead
        parts = [getattr(c, "text", "") for c in (getattr(item, "content", None) or [])]
    return "\n\n".join(p for p in parts if p)


def _user(message: Message, images: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            text = result_text(part)
            if part.images and images:
                output: Any = [{"type": "input_text", "text": text}]
                output.extend({"type": "input_image", "image_url": image_url(i)} for i in part.images)
            else:
                output = text + ("\n" + omitted_images(len(part.images)) if part.images else "")
            items.append({"type": "function_call_output", "call_id": part.call_id, "output": output})
        elif isinstance(part, TextPart):
            content.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "input_image", "image_url": image_url(part)} if images
                           else {"type": "input_text", "text": omitted_images(1)})
    if content:
        items.append({"role": "user", "content": content})
    return items


def at_limit(final: Any, limit: int | None) -> bool:
    """A "completed" answer that used the whole output limit was cut off there: llama.cpp's
    /v1/responses never reports ``incomplete``, so a truncated answer would pass as whole."""
    usage = getattr(final, "usage", None)
    return bool(limit) and usage is not None and (usage.output_tokens or 0) >= (limit or 0)


class OpenAIResponsesProvider(SDKProvider):
    """Responses API adapter."""

    name = "openai-responses"
    default_url = OPENAI_URL

    def make_client(self, *, api_key: str, base_url: str, timeout: float) -> AsyncOpenAI:
        return openai_client(api_key=api_key, base_url=base_url, timeout=timeout)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model or self.model,
                                "input": response_input(request, self.capabilities.images),
                                # The host keeps the transcript; nothing needs storing server-side.
                                "store": False}
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": t.input_schema, "strict": False} for t in request.tools]
        if request.max_output_tokens:
            body["max_output_tokens"] = request.max_output_tokens
        body.update(reasoning_options(body["model"], request.reasoning_effort))
        return body

    async def open_stream(self, body: dict[str, Any]) -> Any:
        # Posted as built, without the SDK's per-request body transform (post_stream).
        return await post_stream(self.client, "/responses", {**body, "stream": True}, Response,
                                 AsyncStream[ResponseStreamEvent])

    def reader(self, request: ModelRequest) -> ResponsesReader:
        return ResponsesReader(request.max_output_tokens)


class ResponsesReader(StreamReader):
    """Responses API events: text and reasoning deltas as they come, reasoning items and
    function calls when their item is done; the final response gives usage and status."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.calls: dict[str, dict[str, str]] = {}
        self.done: list[ToolCallChunk] = []
        self.final: Any = None
        # (item id, summary index) of the last reasoning text streamed: a new summary
        # part of the same item starts a new paragraph.
        self.last_summary: tuple[str, int] | None = None

    @property
    def complete(self) -> bool:
        return self.final is not None

    def feed(self, event: Any) -> Iterator[StreamItem]:
        kind = event.type
        if kind == "response.output_text.delta":
            if event.delta:
                yield TextChunk(event.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.delta:
                where = (event.item_id, getattr(event, "summary_index", getattr(event, "content_index", 0)))
                if self.last_summary is not None and self.last_summary[0] == where[0] and self.last_summary != where:
                    yield ReasoningChunk("\n\n")
                self.last_summary = where
                yield ReasoningChunk(event.delta)
        elif kind == "response.output_item.done" and event.item.type == "reasoning":
            item = event.item
            yield ReasoningItem(provider=PROVIDER, text=_summary_text(item), id=item.id,
                                encrypted=getattr(item, "encrypted_content", None))
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            self.calls[event.item.id or event.item.call_id] = {
                "call_id": event.item.call_id, "name": event.item.name, "arguments": ""}
        elif kind == "response.function_call_arguments.delta":
            if event.item_id in self.calls:
                self.calls[event.item_id]["arguments"] += event.delta
        elif kind == "response.output_item.done" and event.item.type == "function_call":
            item = event.item
            known = self.calls.get(item.id or item.call_id, {})
            self.done.append(ToolCallChunk(id=item.call_id, name=item.name,
                                           arguments=item.arguments or known.get("arguments") or "{}"))
        elif kind in ("response.completed", "response.incomplete"):
            self.final = event.response
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            message = getattr(error, "message", None) or "the response failed"
            raise ProviderError(f"The model server reported a failed answer: {message}")
        elif kind == "error":
            raise ProviderError(f"The model server reported an error mid-answer: {event.message}")

    def end(self) -> Iterator[StreamItem]:
        final = self.final
        yield from self.done
        if final.usage is not None:
            details = getattr(final.usage, "output_tokens_details", None)
            yield UsageChunk(final.usage.input_tokens or 0, final.usage.output_tokens or 0,
                             getattr(details, "reasoning_tokens", 0) or 0)
        if self.done:
            yield Finished("tool_use")
        elif final.status == "incomplete":
            reason = getattr(final.incomplete_details, "reason", None) or "incomplete"
            yield Finished("max_tokens" if reason == "max_output_tokens" else reason)
        elif at_limit(final, self.limit):
            yield Finished("max_tokens")
        else:
            yield Finished("end_turn")
