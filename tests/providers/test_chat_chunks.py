"""Chat Completions chunks are read as the JSON the server sent (docs/benchmarks.md: no SDK model
is built per chunk), and that JSON is untrusted: a field of the wrong type is read as
absent, never a crash. A real loopback HTTP server sends the raw SSE bytes; the real
adapter and SDK read them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from crystal_kernel.providers.base import Finished, ModelRequest, TextChunk, ToolCallChunk, UsageChunk
from crystal_kernel.providers.openai_chat import OpenAIChatProvider


def _chunk(choices: Any, **extra: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices, **extra}


# Every field a reader looks at, once with the wrong type, between well-formed chunks.
CHUNKS: list[Any] = [
    _chunk([{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]),
    _chunk([{"index": 0, "delta": {"content": 5, "reasoning_content": ["x"]}, "finish_reason": None}]),
    _chunk("not a list"),
    _chunk(["not an object", {"index": 0, "delta": "not an object", "finish_reason": None}]),
    ["not", "an", "object"],
    _chunk([{"index": 0, "delta": {"content": "lo"}, "finish_reason": 7}]),
    _chunk([{"index": 0, "delta": {"tool_calls": [
        "not an object",
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"pa"}},
    ]}, "finish_reason": None}]),
    _chunk([{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"name": None, "arguments": 12}},
        {"index": 0, "function": "not an object"},
        {"index": 0, "function": {"arguments": "th\": \"a.txt\"}"}},
    ]}, "finish_reason": None}]),
    _chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    _chunk([], usage={"prompt_tokens": "many", "completion_tokens": 3,
                      "completion_tokens_details": {"reasoning_tokens": True}}),
]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        pass


BODY = "".join(f"data: {json.dumps(c)}\n\n" for c in CHUNKS).encode() + b"data: [DONE]\n\n"


@pytest.fixture
def raw_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def test_chunk_fields_of_the_wrong_type_are_read_as_absent(raw_server: str) -> None:
    provider = OpenAIChatProvider("m", api_key="k", base_url=raw_server)
    try:
        items = [item async for item in provider.stream(ModelRequest(model="m", system="", messages=[], tools=[]))]
    finally:
        await provider.aclose()
    assert [i.text for i in items if isinstance(i, TextChunk)] == ["Hel", "lo"]
    calls = [i for i in items if isinstance(i, ToolCallChunk)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [("call_1", "read", "{\"path\": \"a.txt\"}")]
    usage = next(i for i in items if isinstance(i, UsageChunk))
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (0, 3, 0)
    assert items[-1] == Finished("tool_use")
