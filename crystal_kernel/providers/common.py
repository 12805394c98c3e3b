"""Pieces every SDK adapter shares: the capability table, bounded retries with backoff,
the idle bound on a stream, and transcript clean-up before mapping. SDK errors are
mapped in errors.py; the adapters' base class is in sdk.py.

The adapters create their SDK clients with ``max_retries=0`` and retry here instead, so
that the number of attempts and the longest wait are ours (bounded) and honour
``retry-after`` / ``retry-after-ms``.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from crystal_kernel.core.deadline import within
from crystal_kernel.core.errors import ProviderError
from crystal_kernel.core.messages import Message, ToolResultPart
from crystal_kernel.providers.base import Capabilities
from crystal_kernel.providers.errors import Endpoint, map_error, retry_after_seconds

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
            # core.deadline.within, not asyncio.wait_for: before Python 3.12 wait_for
            # swallows a stop that arrives as the awaited step finishes (ROBUST-3).
            return await within(open_stream(), left) if left is not None else await open_stream()
        except asyncio.CancelledError:
            raise
        except (asyncio.TimeoutError, TimeoutError):  # distinct types on Python 3.10
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
                # Not asyncio.wait_for: before Python 3.12 it returns the chunk and drops
                # the stop when the person's Stop lands as a chunk arrives (the loop busy
                # rendering the previous one), and the turn then waits out a hung stream.
                item = await within(iterator.__anext__(), limit)
        except StopAsyncIteration:
            return
        except (asyncio.TimeoutError, TimeoutError):  # distinct types on Python 3.10
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
            message = orphan_results_dropped(message, out[-1] if out else None)
            if message.parts:
                out.append(message)
            continue
        out.append(message)
        following = pending[index + 1] if index + 1 < len(pending) else None
        if following is not None and following.role != "user":
            following = None
        missing = missing_results(message, following)
        if not missing:
            continue
        if following is not None:
            pending[index + 1] = following.model_copy(update={"parts": [*missing, *following.parts]})
        else:
            out.append(Message(role="user", parts=list(missing)))
    return out


def orphan_results_dropped(message: Message, previous: Message | None) -> Message:
    """A user message without the results that answer no call of ``previous`` (the
    message before it as sent): itself when there are none, else a copy."""
    asked = {c.id for c in previous.tool_calls()} if previous and previous.role == "assistant" else set()
    keep = [p for p in message.parts if not isinstance(p, ToolResultPart) or p.call_id in asked]
    return message if len(keep) == len(message.parts) else message.model_copy(update={"parts": keep})


def missing_results(message: Message, following: Message | None) -> list[ToolResultPart]:
    """Failed results for the calls of ``message`` that ``following`` (the user message
    after it, or None) does not answer."""
    calls = message.tool_calls()
    if not calls:
        return []
    answered = {r.call_id for r in following.tool_results()} if following is not None else set()
    return [ToolResultPart(call_id=c.id, name=c.name, ok=False, text=INTERRUPTED_CALL)
            for c in calls if c.id not in answered]


def result_text(part: ToolResultPart) -> str:
    """Tool result text for protocols with no error flag: failures say so."""
    text = part.text or ("(no output)" if part.ok else "The tool call failed.")
    if not part.ok and not text.lower().startswith("error"):
        text = "Error: " + text
    return text


def omitted_images(count: int) -> str:
    """The note sent instead of images to a model without image input."""
    return f"[{count} image(s) omitted: this model does not take image input]"
