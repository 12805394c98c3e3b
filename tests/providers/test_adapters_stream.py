"""Every adapter against the loopback server: streaming text, tool calls, images, usage,
and the request bodies the real SDKs put on the wire (MODE-6)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from crystal_kernel.core.errors import NotSupported
from crystal_kernel.core.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.providers.base import Capabilities, Finished, ModelRequest, TextChunk, ToolCallChunk, UsageChunk
from crystal_kernel.testing.llm_server import LLMServer

KINDS = ["chat", "responses", "anthropic"]
MODELS = {"chat": "gpt-4.1", "responses": "gpt-4.1", "anthropic": "claude-sonnet-4-6"}

PNG = ImagePart.from_bytes("image/png", b"\x89PNG\r\n\x1a\nfake-pixels")
WRITE = ToolSpec("write", "Write a file.", {"type": "object", "properties": {"path": {"type": "string"},
                                                                            "content": {"type": "string"}}})
BASH = ToolSpec("bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}})


def request(kind: str, messages: list[Message], tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(model=MODELS[kind], system="You are Crystal. Be brief.", messages=messages,
                        tools=tools or [])


async def collect(provider: Any, req: ModelRequest) -> list[Any]:
    return [item async for item in provider.stream(req)]


@pytest.mark.parametrize("kind", KINDS)
async def test_streams_text_in_pieces_with_usage_and_sends_system_text(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "Hello from the loopback model.", "chunk": 5,
                "usage": {"input_tokens": 123, "output_tokens": 45}})
    items = await collect(adapter(kind), request(kind, [Message.user_text("Say hello")], [WRITE]))
    texts = [i.text for i in items if isinstance(i, TextChunk)]
    assert len(texts) > 3, "text must arrive as it streams, not in one piece"
    assert "".join(texts) == "Hello from the loopback model."
    assert UsageChunk(123, 45) in items
    assert items[-1] == Finished("end_turn")
    (body,) = server.bodies()
    assert body["stream"] is True
    assert body["model"] == MODELS[kind]
    if kind == "chat":
        assert body["messages"][0] == {"role": "system", "content": "You are Crystal. Be brief."}
        assert body["messages"][1] == {"role": "user", "content": "Say hello"}
        assert body["stream_options"] == {"include_usage": True}
        assert body["tools"][0] == {"type": "function", "function": {
            "name": "write", "description": "Write a file.", "parameters": WRITE.input_schema}}
    elif kind == "responses":
        assert body["instructions"] == "You are Crystal. Be brief."
        assert body["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "Say hello"}]}]
        assert body["tools"][0]["name"] == "write" and body["tools"][0]["parameters"] == WRITE.input_schema
        assert body["store"] is False
    else:
        assert body["system"][0]["text"] == "You are Crystal. Be brief."
        assert body["messages"][0]["role"] == "user"
        assert body["messages"][0]["content"][0]["text"] == "Say hello"
        assert body["tools"] == [{"name": "write", "description": "Write a file.", "input_schema": WRITE.input_schema}]
        assert body["max_tokens"] > 0


@pytest.mark.parametrize("kind", KINDS)
async def test_several_tool_calls_in_one_reply_are_assembled(kind: str, server: LLMServer, adapter) -> None:
    long_content = "line one\nline \"two\" with quotes\n" * 5
    server.add({"text": "I will write and run it.", "interleave": True, "arg_chunk": 3, "tool_calls": [
        {"id": "call_a", "name": "write", "arguments": {"path": "hello.py", "content": long_content}},
        {"id": "call_b", "name": "bash", "arguments": {"command": "python hello.py"}},
        {"id": "call_c", "name": "bash", "arguments": {"command": "ls -la"}},
    ]})
    items = await collect(adapter(kind), request(kind, [Message.user_text("go")], [WRITE, BASH]))
    calls = [i for i in items if isinstance(i, ToolCallChunk)]
    assert [(c.id, c.name) for c in calls] == [("call_a", "write"), ("call_b", "bash"), ("call_c", "bash")]
    assert json.loads(calls[0].arguments) == {"path": "hello.py", "content": long_content}
    assert json.loads(calls[1].arguments) == {"command": "python hello.py"}
    assert json.loads(calls[2].arguments) == {"command": "ls -la"}
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "I will write and run it."
    assert items[-1] == Finished("tool_use")
    body = server.bodies()[0]
    offered = ([t["function"]["name"] for t in body["tools"]] if kind == "chat"
               else [t["name"] for t in body["tools"]])
    assert offered == ["write", "bash"]


def tool_transcript() -> list[Message]:
    return [
        Message.user_text("Take a screenshot and list files"),
        Message(role="assistant", parts=[TextPart(text="On it."),
                                         ToolCallPart(id="c1", name="screenshot", arguments={"page": 1}),
                                         ToolCallPart(id="c2", name="bash", arguments={"command": "ls /nope"})]),
        Message(role="user", parts=[
            ToolResultPart(call_id="c1", name="screenshot", ok=True, text="Screenshot taken.", images=[PNG]),
            ToolResultPart(call_id="c2", name="bash", ok=False, text="ls: cannot access '/nope'"),
        ]),
    ]


@pytest.mark.parametrize("kind", KINDS)
async def test_tool_results_with_images_reach_the_model(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "I see a picture."})
    items = await collect(adapter(kind), request(kind, tool_transcript(), [BASH]))
    assert items[-1] == Finished("end_turn")
    body = server.bodies()[0]
    data_url = f"data:image/png;base64,{PNG.data}"
    if kind == "chat":
        msgs = body["messages"]
        assert msgs[2]["role"] == "assistant" and msgs[2]["content"] == "On it."
        assert [c["function"]["name"] for c in msgs[2]["tool_calls"]] == ["screenshot", "bash"]
        assert json.loads(msgs[2]["tool_calls"][0]["function"]["arguments"]) == {"page": 1}
        assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "Screenshot taken."}
        assert msgs[4] == {"role": "tool", "tool_call_id": "c2", "content": "Error: ls: cannot access '/nope'"}
        # Tool messages hold text only: the image follows in a user message.
        assert msgs[5]["role"] == "user"
        assert {"type": "image_url", "image_url": {"url": data_url}} in msgs[5]["content"]
        assert "screenshot" in msgs[5]["content"][0]["text"]
    elif kind == "responses":
        items_in = body["input"]
        calls = [i for i in items_in if i.get("type") == "function_call"]
        assert [(c["call_id"], c["name"]) for c in calls] == [("c1", "screenshot"), ("c2", "bash")]
        outputs = {i["call_id"]: i["output"] for i in items_in if i.get("type") == "function_call_output"}
        assert outputs["c1"] == [{"type": "input_text", "text": "Screenshot taken."},
                                 {"type": "input_image", "image_url": data_url}]
        assert outputs["c2"] == "Error: ls: cannot access '/nope'"
    else:
        msgs = body["messages"]
        assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use", "tool_use"]
        assert msgs[1]["content"][1]["input"] == {"page": 1}
        results = msgs[2]["content"]
        assert results[0]["type"] == "tool_result" and results[0]["tool_use_id"] == "c1"
        assert results[0]["content"][1] == {"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": PNG.data}}
        assert "is_error" not in results[0]
        assert results[1]["is_error"] is True
        assert results[1]["content"][0]["text"] == "ls: cannot access '/nope'"
    assert base64.b64decode(PNG.data).startswith(b"\x89PNG")


@pytest.mark.parametrize("kind", KINDS)
async def test_text_only_model_gets_a_note_instead_of_images(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "ok"})
    provider = adapter(kind, capabilities=Capabilities(images=False, context_window=8000))
    await collect(provider, request(kind, tool_transcript()))
    raw = json.dumps(server.bodies()[0])
    assert PNG.data not in raw
    assert "1 image(s) omitted" in raw


@pytest.mark.parametrize("kind", KINDS)
async def test_unanswered_tool_call_gets_a_failed_result(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "ok"})
    transcript = [Message.user_text("go"),
                  Message(role="assistant", interrupted=True,
                          parts=[ToolCallPart(id="c9", name="bash", arguments={"command": "sleep 100"})]),
                  Message.user_text("never mind, say hi")]
    await collect(adapter(kind), request(kind, transcript))
    raw = json.dumps(server.bodies()[0])
    assert "c9" in raw and "interrupted before its result arrived" in raw


@pytest.mark.parametrize("kind", KINDS)
async def test_mode6_text_tools_are_refused_before_any_request(kind: str, server: LLMServer, adapter) -> None:
    provider = adapter(kind)
    with pytest.raises(NotSupported, match="takes text input"):
        await collect(provider, request(kind, [Message.user_text("x")],
                                        [ToolSpec("patch", "d", {}, input_kind="text")]))
    history = [Message(role="assistant", parts=[ToolCallPart(id="t", name="patch", input_kind="text")])]
    with pytest.raises(NotSupported, match="text tool call"):
        await collect(provider, request(kind, history))
    assert server.requests == []


@pytest.mark.parametrize("kind", KINDS)
async def test_user_images_are_sent_as_image_parts(kind: str, server: LLMServer, adapter) -> None:
    server.add({"text": "A cat."})
    msg = Message(role="user", parts=[TextPart(text="What is this?"), PNG])
    await collect(adapter(kind), request(kind, [msg]))
    raw = json.dumps(server.bodies()[0])
    assert PNG.data in raw and "What is this?" in raw


async def test_chat_calls_sent_whole_at_one_index_stay_separate(server: LLMServer, adapter) -> None:
    """Ollama sends each tool call complete, all with index 0: a new id is a new call."""
    server.add({"whole_calls": True, "tool_calls": [
        {"id": "a", "name": "bash", "arguments": {"command": "pwd"}},
        {"id": "b", "name": "bash", "arguments": {"command": "ls"}}]})
    items = await collect(adapter("chat", model="llama3.1"), request("chat", [Message.user_text("go")], [BASH]))
    calls = [i for i in items if isinstance(i, ToolCallChunk)]
    assert [(c.id, json.loads(c.arguments)) for c in calls] == [("a", {"command": "pwd"}), ("b", {"command": "ls"})]
