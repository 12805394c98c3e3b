"""Faults through the real SDKs: 429 with retry-after, 500, 401, unknown model, connection
refused, a stream cut halfway (what arrived is kept), a hang cancelled by the consumer."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from crystal_kernel.core.errors import ProviderError
from crystal_kernel.core.messages import Message
from crystal_kernel.providers.base import Finished, ModelRequest, TextChunk
from crystal_kernel.testing.llm_server import PATHS, LLMServer

KINDS = ["chat", "responses", "anthropic"]


def request() -> ModelRequest:
    return ModelRequest(model="", system="sys", messages=[Message.user_text("hello")])


async def collect(provider: Any) -> list[Any]:
    return [item async for item in provider.stream(request())]


async def collect_until_error(provider: Any) -> tuple[list[Any], ProviderError]:
    got: list[Any] = []
    with pytest.raises(ProviderError) as info:
        async for item in provider.stream(request()):
            got.append(item)
    return got, info.value


@pytest.mark.parametrize("kind", KINDS)
async def test_429_with_retry_after_is_retried_then_succeeds(kind: str, server: LLMServer, adapter) -> None:
    server.add({"status": 429, "message": "Slow down", "headers": {"retry-after": "0.2"}}, {"text": "finally"})
    items = await collect(adapter(kind))
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "finally"
    assert len(server.bodies()) == 2
    # The wait the retry made, as the server saw it: from the 429's last byte to the next
    # request (the SDK's first use, timed around the whole call, took over 3 s on a busy machine).
    refused, retried = [r for r in server.requests if r["path"] in PATHS]
    waited = retried["time"] - refused["sent"]
    assert 0.2 <= waited < 3, "the server's retry-after is honoured, and no more"


@pytest.mark.parametrize("kind", KINDS)
async def test_500_is_retried_a_bounded_number_of_times(kind: str, server: LLMServer, adapter) -> None:
    server.add(*[{"status": 500, "message": "boom"}] * 5)
    got, error = await collect_until_error(adapter(kind))
    assert got == []
    assert str(error) == f"The model server at {error_url(server, kind)} failed (HTTP 500) after 3 attempts: boom"
    assert len(server.bodies()) == 3  # one try + two retries (RetryPolicy(retries=2))


@pytest.mark.parametrize("kind", KINDS)
async def test_401_says_the_key_was_refused_and_is_not_retried(kind: str, server: LLMServer, adapter) -> None:
    server.add({"status": 401, "message": "Invalid API key"}, {"text": "unused"})
    _, error = await collect_until_error(adapter(kind))
    text = str(error)
    assert text.startswith("The model server refused the API key (401)")
    assert ("OPENAI_API_KEY" if kind != "anthropic" else "ANTHROPIC_API_KEY") in text
    assert "\n" not in text
    assert len(server.bodies()) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_unknown_model_is_one_clear_line(kind: str, server: LLMServer, adapter) -> None:
    server.add({"status": 404, "message": "The model `nope-1` does not exist"})
    _, error = await collect_until_error(adapter(kind, model="nope-1"))
    assert str(error).startswith(f"The model server at {server.url}")
    assert "does not know model 'nope-1' (404)" in str(error)
    assert error.status == 404
    assert len(server.bodies()) == 1


def error_url(server: LLMServer, kind: str) -> str:
    return server.url + ("/v1" if kind != "anthropic" else "")


def _closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.mark.parametrize("kind", KINDS)
async def test_connection_refused_is_one_clear_line(kind: str, adapter) -> None:
    root = f"http://127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    _, error = await collect_until_error(adapter(kind, root=root))
    url = root + ("/v1" if kind != "anthropic" else "")
    assert str(error) == f"Cannot reach the model server at {url}: connection refused."
    assert time.monotonic() - start < 2, "nobody listens: no point retrying"


@pytest.mark.parametrize("kind", KINDS)
async def test_stream_cut_halfway_keeps_what_arrived(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "The first part arrives, the rest never does.", "chunk": 4, "cut_after": 8})
    got, error = await collect_until_error(adapter(kind))
    text = "".join(i.text for i in got if isinstance(i, TextChunk))
    assert text and "The first part arrives, the rest never does.".startswith(text)
    assert len(text) < len("The first part arrives, the rest never does.")
    assert not any(isinstance(i, Finished) for i in got)
    assert str(error) == (f"The stream from the model server at {error_url(server, kind)} broke mid-answer: "
                          "the connection closed before the answer was complete.")
    assert server.url in str(error)
    assert "\n" not in str(error)


@pytest.mark.parametrize("kind", KINDS)
async def test_stream_closed_cleanly_before_the_end_is_an_error(kind: str, server: LLMServer, adapter) -> None:
    """A body that ends politely but early (no finish, no [DONE]) is not a whole answer."""
    events = {"chat": 3, "responses": 6, "anthropic": 5}[kind]
    server.add({"text": "Partial answer here", "chunk": 4, "end_after": events})
    got, error = await collect_until_error(adapter(kind))
    assert any(isinstance(i, TextChunk) for i in got)
    assert str(error).endswith("ended before the answer was complete.")


@pytest.mark.parametrize("kind", KINDS)
async def test_hang_then_cancel_closes_the_stream_promptly(kind: str, server: LLMServer, adapter) -> None:
    # Enough events for some text to arrive first (the protocols open differently).
    after = {"chat": 3, "responses": 6, "anthropic": 5}[kind]
    server.add({"text": "Thinking hard", "chunk": 3, "hang": 20, "hang_after": after})
    provider = adapter(kind)
    first_text = asyncio.Event()
    got: list[Any] = []

    async def consume() -> None:
        async for item in provider.stream(request()):
            got.append(item)
            if isinstance(item, TextChunk):
                first_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_text.wait(), 5)
    await asyncio.sleep(0.1)
    assert not task.done(), "the server hangs, so the stream is still open"
    start = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - start < 1
    assert server.wait_for_disconnect(1, timeout=3), "cancelling the consumer closes the HTTP stream"
    assert got and isinstance(got[0], TextChunk)


@pytest.mark.parametrize("kind", KINDS)
async def test_hang_before_headers_finish_is_cancellable(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "never", "hang": 20, "hang_after": 0})
    task = asyncio.create_task(collect(adapter(kind)))
    await asyncio.sleep(0.3)
    start = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - start < 1
    assert server.wait_for_disconnect(1, timeout=3)


@pytest.mark.parametrize("kind", KINDS)
async def test_empty_script_is_a_clear_server_error(kind: str, server: LLMServer, adapter) -> None:
    _, error = await collect_until_error(adapter(kind))
    assert "no scripted reply left" in str(error)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_silent_server_is_bounded_by_the_read_timeout(kind: str, server: LLMServer, adapter) -> None:
    after = {"chat": 2, "responses": 6, "anthropic": 5}[kind]
    server.add({"text": "Some words then silence", "chunk": 5, "hang": 10, "hang_after": after})
    start = time.monotonic()
    got, error = await collect_until_error(adapter(kind, timeout=0.5))
    assert time.monotonic() - start < 3
    assert any(isinstance(i, TextChunk) for i in got)
    assert str(error) == f"The model server at {error_url(server, kind)} stopped sending mid-answer (timed out)."
