"""The OpenAI adapters post their bodies without the SDK's per-request transform
(openai_chat.post_stream). What reaches the server must be exactly what the SDK's own
``create()`` sends for the same body: same path, same JSON, same auth header."""

from __future__ import annotations

from typing import Any

import pytest

from crystal_kernel.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.providers.base import ModelRequest
from crystal_kernel.testing.llm_server import LLMServer

PNG = ImagePart.from_bytes("image/png", b"\x89PNG\r\n\x1a\nfake-pixels")
BASH = ToolSpec("bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}},
                                           "required": ["command"]})


def transcript() -> list[Message]:
    return [
        Message(role="user", parts=[TextPart(text="Look at this and list files"), PNG]),
        Message(role="assistant", parts=[TextPart(text="On it."),
                                         ToolCallPart(id="c1", name="bash", arguments={"command": "ls"}),
                                         ToolCallPart(id="c2", name="shot", arguments={"page": 1})]),
        Message(role="user", parts=[
            ToolResultPart(call_id="c1", name="bash", ok=False, text="ls: no such file\nüñí ✓"),
            ToolResultPart(call_id="c2", name="shot", ok=True, text="Taken.", images=[PNG]),
        ]),
        Message(role="assistant", parts=[TextPart(text="Done.")]),
        Message.user_text("Again, with a \"quote\" and a tab\t."),
    ]


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_body_on_the_wire_equals_the_sdk_create_body(kind: str, server: LLMServer, adapter) -> None:
    provider = adapter(kind)
    req = ModelRequest(model="gpt-4.1", system="You are Crystal.", messages=transcript(), tools=[BASH],
                       max_output_tokens=500)
    server.add({"text": "Ours."}, {"text": "The SDK's."})
    items = [item async for item in provider.stream(req)]
    assert items  # the stream was read through the SDK's own event models
    body = provider.body(req)
    if kind == "chat":
        sdk_stream = await provider.client.chat.completions.create(
            **body, stream=True, stream_options={"include_usage": True})
    else:
        sdk_stream = await provider.client.responses.create(**body, stream=True)
    await _drain(sdk_stream)
    ours, theirs = server.requests[-2:]
    assert ours["path"] == theirs["path"]
    assert ours["body"] == theirs["body"]
    assert ours["headers"]["authorization"] == theirs["headers"]["authorization"] == "Bearer test-key"
    assert ours["headers"]["content-type"] == theirs["headers"]["content-type"]
    # The chat body goes in pieces (wire_cache.Body), with its length: not chunked.
    assert ours["headers"]["content-length"] == theirs["headers"]["content-length"]
    assert "transfer-encoding" not in ours["headers"]
