"""Pieces every SDK adapter shares: the capability table, SDK error -> one English line,
bounded retries with backoff, transcript clean-up before mapping, and the adapters' base
class (:class:`SDKProvider`).

The adapters create their SDK clients with ``max_retries=0`` and retry here instead, so
that the number of attempts and the longest wait are ours (bounded) and honour
``retry-after`` / ``retry-after-ms``.
"""

from __future__ import annotations

import asyncio
import random
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from crystal_kernel.errors import ProviderError
from crystal_kernel.host.messages import Message, ToolResultPart
from crystal_kernel.providers.base import Capabilities, ModelRequest, StreamItem

T = TypeVar("T")

# (pattern on the lower-cased model name, image input, context window). First match wins.
_TABLE: list[tuple[str, bool, int]] = [
    (r"claude-(opus|sonnet|haiku)-4|claude-(sonnet|opus)-4|claude-4", True, 200_000),
    (r"claude-3", True, 200_000),
    (r"claude", True, 200_000),
    (r"gpt-4\.1", True, 1_047_576),
    (r"gpt-5", True, 400_000),
    (r"gpt-4o|chatgpt-4o", True, 128_000),
    (r"gpt-4-turbo|gpt-4-vision", True, 128_000),
    (r"gpt-3\.5", False, 16_385),
    (r"gpt-4", False, 8_192),
    (r"^o[134]", True, 200_000),
    (r"gpt-oss", False, 131_072),
    # Local models served by Ollama, vLLM, llama.cpp or LM Studio: vision ones by name.
    (r"vision|llava|-vl\b|vl[:-]|qwen2\.5vl|gemma3|pixtral|minicpm-v|moondream", True, 32_768),
]
_DEFAULT = (False, 32_768)


def capabilities_for(model: str, context_window: int | None = None, images: bool | None = None) -> Capabilities:
    """Capabilities from the table by model name; config values override.

    Unknown models are assumed text-only: sending an image to a model that cannot take
    one fails the whole request, while a missing image only loses that image.
    """
    name = model.lower()
    found = next(((img, ctx) for pattern, img, ctx in _TABLE if re.search(pattern, name)), _DEFAULT)
    return Capabilities(images=found[0] if images is None else images,
                        context_window=context_window or found[1])


@dataclass(frozen=True)
class Endpoint:
    """What an error message needs to name: the server, the model, the key variable, and
    the provider (a 404 on its path means the server does not speak its protocol)."""

    url: str
    model: str
    key_env: str | None = None
    provider: str | None = None


# What a server says when a request is longer than its context window: OpenAI
# (context_length_exceeded), Anthropic ("prompt is too long"), vLLM ("maximum context
# length"), llama.cpp ("exceeds the available context size"), llama-cpp-python
# ("exceed context window"), Ollama and LM Studio (context length / n_ctx).
_OVERFLOW = re.compile(r"context[ _-]?length|context window|context size|maximum context|n_ctx|"
                       r"prompt is too long|input is too long|too many (input )?tokens|reduce the length",
                       re.IGNORECASE)


def context_overflow(error: BaseException) -> bool:
    """Whether a refused request was refused for being too long for the model."""
    status = getattr(error, "status", None)
    return status is not None and 400 <= status < 600 and bool(_OVERFLOW.search(str(error)))


# For a 404 on a protocol's path: which provider the server probably speaks instead.
_INSTEAD = {"openai-responses": "openai (Chat Completions)", "anthropic": "openai (Chat Completions)",
            "openai": "a baseUrl ending in /v1"}
_PATHS = {"openai": "/chat/completions", "openai-responses": "/responses", "anthropic": "/v1/messages"}


def _unknown_model(detail: str, where: Endpoint, exc: BaseException) -> bool:
    """A 404 about the model (not about the path): the SDKs' servers say so in words."""
    body = getattr(exc, "body", None)
    code = body.get("error", body).get("code") if isinstance(body, dict) and isinstance(
        body.get("error", body), dict) else None
    text = detail.lower()
    return code == "model_not_found" or (bool(where.model) and where.model.lower() in text) or "model" in text


def one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _server_message(exc: Any) -> str:
    """The server's own error text from an SDK status error, if any."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return one_line(error["message"], 160)
        if isinstance(body.get("message"), str):
            return one_line(body["message"], 160)
    return ""


def _in_chain(exc: BaseException, found: Callable[[BaseException], bool]) -> bool:
    """Whether ``exc`` or any exception it was raised from or during matches ``found``
    (SDKs wrap the socket error in one or two layers)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if found(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _refused(exc: BaseException) -> bool:
    return _in_chain(exc, lambda e: isinstance(e, ConnectionRefusedError) or "refused" in str(e).lower()
                     or "errno 111" in str(e).lower())


def _unresolved(exc: BaseException) -> bool:
    return _in_chain(exc, lambda e: isinstance(e, socket.gaierror) or "name or service not known" in str(e).lower()
                     or "nodename nor servname" in str(e).lower())


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_timeout(exc: BaseException) -> bool:
    return type(exc).__name__ in ("APITimeoutError", "ReadTimeout", "ConnectTimeout", "TimeoutException")


def _is_connection(exc: BaseException) -> bool:
    return type(exc).__name__ in ("APIConnectionError", "APITimeoutError") or isinstance(exc, OSError)


RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504, 529}


def map_error(exc: BaseException, where: Endpoint, *, attempts: int = 1) -> ProviderError:
    """One English line for an SDK exception raised before the answer started."""
    status = _status(exc)
    detail = _server_message(exc)
    suffix = f": {detail}" if detail else "."
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    if status is None:
        if _is_timeout(exc):
            return ProviderError(f"The model server at {where.url} did not answer in time{tries}.", retryable=True)
        if _refused(exc):
            return ProviderError(f"Cannot reach the model server at {where.url}: connection refused.")
        if _unresolved(exc):
            return ProviderError(f"Cannot reach the model server at {where.url}: its host name does not resolve.")
        if _is_connection(exc):
            cause = exc.__cause__ or exc.__context__
            reason = one_line(str(cause), 120) if cause and str(cause) else "connection failed"
            return ProviderError(f"Cannot reach the model server at {where.url}: {reason}{tries}.", retryable=True)
        return ProviderError(f"The model request failed: {one_line(str(exc) or type(exc).__name__)}.")
    if status == 401:
        key = f" in {where.key_env}" if where.key_env else ""
        return ProviderError(f"The model server refused the API key (401); check the key{key} "
                             f"(or name another variable with apiKeyEnv){suffix}", status=status)
    if status == 403:
        return ProviderError(f"The model server denied access to model '{where.model}' (403){suffix}", status=status)
    if status == 404 and where.provider in _PATHS and not _unknown_model(detail, where, exc):
        # A chat-only server (llama.cpp, Ollama, vLLM builds without it) has no /responses.
        return ProviderError(f"The model server at {where.url} has no {_PATHS[where.provider]} endpoint (404): "
                             f"it does not speak the {where.provider} protocol; try provider "
                             f"{_INSTEAD[where.provider]}{suffix}", status=status)
    if status == 404:
        return ProviderError(f"The model server at {where.url} does not know model '{where.model}' (404); "
                             f"check the model name and baseUrl{suffix}", status=status)
    if status == 429:
        return ProviderError(f"The model server is rate limiting requests (429){tries}{suffix}",
                             retryable=True, status=status)
    if status in RETRY_STATUSES or status >= 500:
        return ProviderError(f"The model server failed (HTTP {status}){tries}{suffix}", retryable=True, status=status)
    return ProviderError(f"The model server rejected the request (HTTP {status}){suffix}", status=status)


def map_stream_error(exc: BaseException, where: Endpoint) -> ProviderError:
    """One line for a stream that broke after the answer started (kept text is interrupted)."""
    if isinstance(exc, ProviderError):
        return exc
    status = _status(exc)
    detail = _server_message(exc) or one_line(str(exc) or type(exc).__name__, 160)
    if status is not None:
        return ProviderError(f"The model server reported an error mid-answer (HTTP {status}): {detail}",
                             status=status)
    if _is_timeout(exc):
        return ProviderError(f"The model server at {where.url} stopped sending mid-answer (timed out).")
    if _is_connection(exc) or "peer closed" in detail or "incomplete" in detail:
        detail = "the connection closed before the answer was complete."
    return ProviderError(f"The stream from the model server at {where.url} broke mid-answer: {detail}")


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date), if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            import time
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``retries`` extra attempts; exponential backoff from ``backoff`` seconds;
    a server's retry-after is honoured up to ``max_wait`` seconds per wait."""

    retries: int = 3
    backoff: float = 0.5
    max_wait: float = 20.0


async def with_retries(open_stream: Callable[[], Awaitable[T]], where: Endpoint, policy: RetryPolicy,
                       total: float | None = None) -> T:
    """Call ``open_stream`` until it succeeds; map failures to ProviderError.

    Only failures before the answer starts are retried: 429, 5xx, timeouts and dropped
    connections. A refused connection or an unknown host name is not retried (no server
    is there), nor are 401/404/400 (retrying cannot fix them). ``total`` bounds the whole
    wait, every attempt and backoff included (``requestTimeoutSeconds`` is the longest a
    person waits, not a per-attempt limit).
    """
    loop = asyncio.get_running_loop()
    deadline = None if total is None else loop.time() + total
    attempt = 0
    while True:
        left = None if deadline is None else deadline - loop.time()
        try:
            if left is not None and left <= 0:
                raise asyncio.TimeoutError()
            return await asyncio.wait_for(open_stream(), left) if left is not None else await open_stream()
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            tries = f" (after {attempt + 1} attempts)" if attempt else ""
            raise ProviderError(f"The model server at {where.url} did not answer within {total:g} s{tries} "
                                "(requestTimeoutSeconds).", retryable=True) from None
        except Exception as exc:
            error = map_error(exc, where, attempts=attempt + 1)
            if not error.retryable or attempt >= policy.retries:
                raise error from None
            wait = retry_after_seconds(exc)
            if wait is None:
                wait = policy.backoff * (2 ** attempt) * (0.75 + random.random() / 2)
            wait = max(0.0, min(wait, policy.max_wait))
            if deadline is not None and loop.time() + wait >= deadline:
                raise error from None  # no time left for another attempt
            await asyncio.sleep(wait)
            attempt += 1


async def idle_bounded(stream: Any, seconds: float | None, where: Endpoint) -> AsyncIterator[Any]:
    """The SDK's stream, failing when no event arrives for ``seconds``. SSE keep-alive
    comments (``: ping``) are not events, so a server that only keeps the connection
    alive times out instead of holding the turn forever."""
    iterator = stream.__aiter__()
    # A little longer than the HTTP client's own read timeout (the same seconds), so a
    # server that sends no bytes at all still gets that error ("stopped sending").
    limit = None if seconds is None else seconds + min(1.0, seconds / 2)
    while True:
        try:
            if limit is None:
                item = await iterator.__anext__()
            else:
                item = await asyncio.wait_for(iterator.__anext__(), limit)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise ProviderError(f"The model server at {where.url} sent nothing but keep-alives for {seconds:g} s; "
                                "the answer was stopped (requestTimeoutSeconds).") from None
        yield item


INTERRUPTED_CALL = "The call did not run: the answer was interrupted before its result arrived."


def paired(messages: list[Message]) -> list[Message]:
    """The transcript with every assistant tool call answered in the next user message.

    All three APIs refuse a tool call without a result (or a result without its call);
    an interrupted turn can leave either. Missing results become failed results saying
    so; results without a call are dropped. The input list is not changed.
    """
    pending = list(messages)
    out: list[Message] = []
    for index, message in enumerate(pending):
        if message.role == "user":
            previous = out[-1] if out else None
            asked = {c.id for c in previous.tool_calls()} if previous and previous.role == "assistant" else set()
            keep = [p for p in message.parts if not isinstance(p, ToolResultPart) or p.call_id in asked]
            if len(keep) != len(message.parts):
                message = message.model_copy(update={"parts": keep})
            if message.parts:
                out.append(message)
            continue
        out.append(message)
        calls = message.tool_calls()
        if not calls:
            continue
        following = pending[index + 1] if index + 1 < len(pending) else None
        if following is not None and following.role != "user":
            following = None
        answered = {r.call_id for r in following.tool_results()} if following is not None else set()
        missing: list[ToolResultPart] = [
            ToolResultPart(call_id=c.id, name=c.name, ok=False, text=INTERRUPTED_CALL)
            for c in calls if c.id not in answered
        ]
        if not missing:
            continue
        if following is not None:
            pending[index + 1] = following.model_copy(update={"parts": [*missing, *following.parts]})
        else:
            out.append(Message(role="user", parts=list(missing)))
    return out


def result_text(part: ToolResultPart) -> str:
    """Tool result text for protocols with no error flag: failures say so."""
    text = part.text or ("(no output)" if part.ok else "The tool call failed.")
    if not part.ok and not text.lower().startswith("error"):
        text = "Error: " + text
    return text


def omitted_images(count: int) -> str:
    """The note sent instead of images to a model without image input."""
    return f"[{count} image(s) omitted: this model does not take image input]"


class SDKProvider:
    """What the three SDK adapters share: construction, ``stream``/``aclose`` and the
    error for a stream that ended early. Subclasses set ``name`` and ``default_url`` and
    implement :meth:`make_client`, :meth:`body` and :meth:`_stream`.
    """

    name: str
    default_url: str

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float = 600.0,
        key_env: str | None = None,
    ) -> None:
        self.model = model
        self.capabilities = capabilities or capabilities_for(model)
        self.retry = retry
        # The longest a person waits: for the answer to start (retries included), and
        # between two events of the answer (keep-alives do not count).
        self.timeout = timeout
        self.base_url = base_url
        url = base_url or self.default_url
        # Retries are ours (with_retries): bounded, and they honour retry-after.
        self.client = self.make_client(api_key=api_key or "none", base_url=url, timeout=timeout)
        self.endpoint = Endpoint(url=url, model=model, key_env=key_env, provider=self.name)

    #: Ask the server for its context window before the first request (set by the
    #: registry for a ``baseUrl`` server when config has no ``contextWindow``).
    probe_context: bool = False

    async def discover_context(self) -> str | None:
        """Ask the server once for its context window (server_info.py); adopt it and
        return a line saying so, or None when it was not asked or did not say."""
        if not self.probe_context:
            return None
        self.probe_context = False
        from dataclasses import replace

        from crystal_kernel.providers.server_info import context_window

        key = getattr(self.client, "api_key", None)
        found = await context_window(self.endpoint.url, self.model, None if key in (None, "none") else key)
        if found is None:
            return None
        tokens, how = found
        self.capabilities = replace(self.capabilities, context_window=tokens)
        return f"Context window of {self.model}: {tokens:,} tokens ({how}, asked of {self.endpoint.url})."

    def make_client(self, *, api_key: str, base_url: str, timeout: float) -> Any:
        """The SDK's async client, created with ``max_retries=0``."""
        raise NotImplementedError

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request body (without ``stream``)."""
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        return self._stream(request)

    def _stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        raise NotImplementedError

    def ended_early(self) -> ProviderError:
        """The error for a stream that closed cleanly before its final event."""
        return ProviderError(f"The stream from the model server at {self.endpoint.url} ended before the "
                             "answer was complete.")

    async def aclose(self) -> None:
        await self.client.close()
