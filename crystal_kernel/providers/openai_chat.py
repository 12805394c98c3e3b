"""OpenAI Chat Completions (provider ``openai``), on the official async SDK, streaming.

Also speaks to Ollama, vLLM, llama.cpp and LM Studio through ``baseUrl``: they implement
the same wire protocol. Tool-call deltas arrive split across chunks, keyed by ``index``
(several calls may interleave); they are assembled here and yielded once complete.

Reasoning: ``reasoning_effort`` is sent when set; the reasoning that vLLM, DeepSeek,
Ollama and llama.cpp stream beside the answer (``reasoning_content`` or ``reasoning`` in
the delta) is yielded as reasoning, never as answer text. It is not sent back: these
servers neither need nor all accept it.

What local servers accept: an assistant message with tool calls carries ``"content":
""`` (llama-cpp-python's server fails every later request on ``null``); a server that
repeats ``function.name`` in every fragment of a call gets one name, not the repeats.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# The client and the stream from their own modules: these need nothing else of
# ``openai`` and ``openai.types.chat``, whose package inits (the whole API's types and
# helpers) crystal run defers (deferred_init.py). No response model either: a streamed
# reply is read as JSON (_CHUNKS), so the POST's non-streamed type is ``object``.
from openai._base_client import DefaultAsyncHttpxClient
from openai._client import AsyncOpenAI
from openai._streaming import AsyncStream

from crystal_kernel.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.prefix import common_prefix
from crystal_kernel.providers.base import (
    Finished,
    ModelRequest,
    ReasoningChunk,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
)
from crystal_kernel.providers.common import omitted_images, paired, result_text
from crystal_kernel.providers.sdk import SDKProvider, StreamReader, no_trust_store
from crystal_kernel.providers.wire_cache import Body, JsonArray, PairedWire, encode_body, to_json

OPENAI_URL = "https://api.openai.com/v1"
# What the SDK's own create() passes for these endpoints: the API key as a bearer token.
SDK_OPTIONS: Any = {"security": {"bearer_auth": True}}
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


def call_arguments(part: ToolCallPart) -> str:
    """The argument text to send back: the model's own text when it was not valid JSON."""
    return part.raw_arguments if part.raw_arguments is not None else json.dumps(part.arguments)


def image_url(image: ImagePart) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def chat_messages(request: ModelRequest, images: bool) -> list[dict[str, Any]]:
    """Map the transcript to Chat Completions messages."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in paired(request.messages):
        out.extend(chat_entries(message, images))
    return out


def chat_entries(message: Message, images: bool) -> list[dict[str, Any]]:
    """One (paired) transcript message as Chat Completions messages."""
    return [_assistant(message)] if message.role == "assistant" else _user(message, images)


def _assistant(message: Message) -> dict[str, Any]:
    # Never null: llama-cpp-python's server answers HTTP 500 to every later request that
    # holds a null content beside tool calls; "" is accepted by every server we know.
    entry: dict[str, Any] = {"role": "assistant", "content": message.text()}
    calls = message.tool_calls()
    if calls:
        entry["tool_calls"] = [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": call_arguments(c)}} for c in calls]
    return entry


def merge_name(current: str, fragment: str) -> str:
    """A call's name from its streamed fragments. OpenAI sends the name once; some servers
    repeat the whole name in every fragment, or send it growing: neither may repeat."""
    if not fragment or fragment == current:
        return current
    if current and fragment.startswith(current):
        return fragment
    return current + fragment


def reasoning_delta(delta: dict[str, Any]) -> str:
    """``reasoning_content`` (DeepSeek, vLLM, llama.cpp) or ``reasoning`` (Ollama, vLLM)."""
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


# The streamed chunks as the parsed JSON objects they are (``AsyncStream[object]``: the
# SDK hands each event's data over as it decoded it). Building the SDK's pydantic chunk
# model instead cost ~0.1 ms a chunk, and its first use built the schemas of the chunk's
# models (openai defers them: ~6 ms of CPU while the first reply was read, docs/benchmarks.md).
_CHUNKS: Any = AsyncStream[object]


def _mapping(value: object) -> dict[str, Any]:
    """``value`` when the server sent an object there, else an empty one (the reply is
    untrusted: a field of the wrong type is read as absent)."""
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _user(message: Message, images: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    followup: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            text = result_text(part)
            if part.images and images:
                # A tool message can only carry text, so the result's images follow in a
                # user message (after all tool messages: they must directly follow the
                # assistant's tool calls), introduced by a line naming the call.
                followup.append({"type": "text", "text": f"Images from the {part.name} call {part.call_id}:"})
                followup.extend({"type": "image_url", "image_url": {"url": image_url(i)}} for i in part.images)
            elif part.images:
                text += "\n" + omitted_images(len(part.images))
            out.append({"role": "tool", "tool_call_id": part.call_id, "content": text})
        elif isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            if images:
                content.append({"type": "image_url", "image_url": {"url": image_url(part)}})
            else:
                content.append({"type": "text", "text": omitted_images(1)})
    content = followup + content
    if content:
        if all(c["type"] == "text" for c in content):
            out.append({"role": "user", "content": "\n".join(c["text"] for c in content)})
        else:
            out.append({"role": "user", "content": content})
    return out


def chat_tools(request: ModelRequest) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.input_schema}} for t in request.tools]


def openai_client(*, api_key: str, base_url: str, timeout: float) -> AsyncOpenAI:
    """The SDK's async client, without retries (ours are bounded and honour retry-after).
    A plain-http server gets the SDK's own HTTP client with a TLS context that reads no
    trust store (:func:`~crystal_kernel.providers.sdk.no_trust_store`)."""
    tls = no_trust_store(base_url)
    http_client = DefaultAsyncHttpxClient(verify=tls) if tls is not None else None
    return AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client)


async def post_stream(client: AsyncOpenAI, path: str, body: dict[str, Any] | bytes | Body, cast_to: type,
                      stream_cls: type) -> Any:
    """POST ``body`` as it is (a dict, or its JSON text: bytes or a :class:`Body`) and
    return the SDK's event stream.

    ``create()`` first re-walks the whole body against the SDK's TypedDict parameter
    types (``openai/_utils/_transform.py``) on every request: with the full transcript
    sent each time, that made a turn 5x slower by turn 300. Our bodies are plain JSON
    built here, so they skip that step; everything after it is the same as in
    ``create()``: the client's HTTP connection pool, auth headers, error types and SSE
    parsing into the SDK's event models. JSON text goes as the request's content, with
    the same ``Content-Type: application/json`` header; a :class:`Body` in its pieces,
    with its ``Content-Length`` (not chunked), so the server reads the same request.
    """
    if isinstance(body, Body):
        options: Any = {**SDK_OPTIONS, "headers": {"Content-Length": str(len(body))}}
        return await client.post(path, content=body, cast_to=cast_to, options=options, stream=True,
                                 stream_cls=stream_cls)
    if isinstance(body, bytes):
        return await client.post(path, content=body, cast_to=cast_to, options=SDK_OPTIONS, stream=True,
                                 stream_cls=stream_cls)
    return await client.post(path, body=body, cast_to=cast_to, options=SDK_OPTIONS, stream=True,
                             stream_cls=stream_cls)


class OpenAIChatProvider(SDKProvider):
    """Chat Completions adapter. ``base_url`` None means api.openai.com."""

    name = "openai"
    default_url = OPENAI_URL

    def make_client(self, *, api_key: str, base_url: str, timeout: float) -> AsyncOpenAI:
        return openai_client(api_key=api_key, base_url=base_url, timeout=timeout)

    # The transcript's wire form, kept between requests (providers/wire_cache.py).
    _wire: PairedWire | None = None
    _wire_images: bool | None = None
    # The last body's messages list and its JSON text, for open_stream.
    _encoded: JsonArray | None = None
    # The last catalog's specs, and its tools list with its JSON text (a session keeps
    # its specs per catalog: the same objects every step until the catalog changes).
    _tools: tuple[list[Any], JsonArray] | None = None

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (without ``stream``); the same as ``chat_messages`` gives,
        with the transcript's part converted once per message (wire_cache.py)."""
        images = self.capabilities.images
        if self._wire is None or self._wire_images != images:
            self._wire, self._wire_images = PairedWire(lambda m: chat_entries(m, images)), images
        messages, chunks = self._wire(request.messages)
        if request.system:
            system = {"role": "system", "content": request.system}
            messages = [system, *messages]
            chunks = [("," + to_json(system)).encode(), *chunks]
        self._encoded = JsonArray(messages, chunks)
        body: dict[str, Any] = {"model": request.model or self.model, "messages": messages}
        if request.tools:
            body["tools"] = self._tools_for(request)
        if request.max_output_tokens:
            # api.openai.com wants max_completion_tokens; local servers know max_tokens.
            key = "max_completion_tokens" if self.base_url is None else "max_tokens"
            body[key] = request.max_output_tokens
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        return body

    def _tools_for(self, request: ModelRequest) -> list[dict[str, Any]]:
        kept = self._tools
        if kept is None or len(kept[0]) != len(request.tools) or common_prefix(kept[0], request.tools) < len(kept[0]):
            tools = chat_tools(request)
            kept = self._tools = (list(request.tools), JsonArray(tools, [("," + to_json(t)).encode() for t in tools]))
        return kept[1].value

    def payload(self, body: dict[str, Any]) -> Body:
        """The streamed body's JSON, as the SDK would encode it, with the kept text of
        the transcript (and of the tools) when ``body`` is the last one :meth:`body` made."""
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        known = {"messages": self._encoded} if self._encoded is not None else {}
        if self._tools is not None:
            known["tools"] = self._tools[1]
        return encode_body(streamed, known)

    async def open_stream(self, body: dict[str, Any] | bytes | Body) -> Any:
        payload = body if isinstance(body, (bytes, Body)) else self.payload(body)
        # cast_to is read only for a reply that is not a stream; the SDK's chat completion
        # model would cost crystal run's start ~8 ms of imports for nothing (docs/benchmarks.md).
        return await post_stream(self.client, "/chat/completions", payload, object, _CHUNKS)

    def reader(self, request: ModelRequest) -> ChatReader:
        return ChatReader()


class ChatReader(StreamReader):
    """Chat Completions chunks: text and reasoning deltas as they come; tool-call deltas
    assembled by ``index`` (a new id at a reused index starts a new call)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []
        self.by_index: dict[int, dict[str, str]] = {}
        self.finish: str | None = None
        self.usage: UsageChunk | None = None

    @property
    def complete(self) -> bool:
        return self.finish is not None

    def feed(self, event: object) -> Iterator[StreamItem]:
        """One chunk, as parsed from the stream's JSON (a dict; anything else is skipped)."""
        chunk = _mapping(event)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = _mapping(usage.get("completion_tokens_details"))
            self.usage = UsageChunk(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")),
                                    _count(details.get("reasoning_tokens")))
        choices = chunk.get("choices")
        for item in choices if isinstance(choices, list) else []:
            choice = _mapping(item)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                thought = reasoning_delta(delta)
                if thought:
                    yield ReasoningChunk(thought)
                content = _text(delta.get("content"))
                if content:
                    yield TextChunk(content)
                calls = delta.get("tool_calls")
                for tc in calls if isinstance(calls, list) else []:
                    if isinstance(tc, dict):
                        self._add_call_delta(tc)
            finish = _text(choice.get("finish_reason"))
            if finish:
                self.finish = finish

    def _add_call_delta(self, tc: dict[str, Any]) -> None:
        index = tc.get("index")
        key = index if isinstance(index, int) else -1  # no index: one call of its own
        call_id = _text(tc.get("id"))
        current = self.by_index.get(key)
        # Some servers reuse index 0 for every call; a new id starts a new call.
        if current is None or (call_id and current["id"] and call_id != current["id"]):
            current = {"id": call_id, "name": "", "arguments": ""}
            self.by_index[key] = current
            self.calls.append(current)
        if call_id:
            current["id"] = call_id
        function = tc.get("function")
        if isinstance(function, dict):
            current["name"] = merge_name(current["name"], _text(function.get("name")))
            current["arguments"] += _text(function.get("arguments"))

    def end(self) -> Iterator[StreamItem]:
        for n, call in enumerate(self.calls):
            yield ToolCallChunk(id=call["id"] or f"call_{n}", name=call["name"], arguments=call["arguments"] or "{}")
        if self.usage is not None:
            yield self.usage
        finish = self.finish or "stop"
        yield Finished("tool_use" if self.calls else _STOP.get(finish, finish))
