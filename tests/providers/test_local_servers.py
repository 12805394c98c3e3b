"""What local model servers need: the context window asked of the server and
shown, a request refused for its length compacted and sent once more, a missing
endpoint told apart from an unknown model, repeated function names merged, and an
output limit on every request. Real adapters and SDKs against the loopback server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import Compacted, ErrorEvent, Note, TextDelta, TurnEnd
from crystal_kernel.core.messages import Message, TextPart
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.providers.base import ModelRequest, TextChunk, ToolCallChunk
from crystal_kernel.providers.openai_chat import merge_name
from crystal_kernel.providers.registry import make_provider
from crystal_kernel.testing.llm_server import LLMServer


async def collect(turn) -> list[Any]:
    return [e async for e in turn]


def local_session(workspace, server: LLMServer, **overrides: Any) -> Session:
    config = load_config(overrides={"provider": "openai", "baseUrl": server.base_url, "model": "local-model",
                                    "approval": "full", **overrides})
    provider = make_provider(config, workspace=workspace)
    return Session(workspace=workspace, config=config, provider=provider, person_present=False)


@pytest.mark.parametrize("info, tokens, how", [
    ({"models": [{"id": "local-model", "object": "model", "max_model_len": 8192}]}, 8192, "vLLM max_model_len"),
    ({"models": [{"id": "local-model", "meta": {"n_ctx_train": 131072}}],
      "props": {"default_generation_settings": {"n_ctx": 4096}}}, 4096, "llama.cpp n_ctx"),
    ({"show": {"parameters": "stop \"<|im_end|>\"\nnum_ctx 6144", "model_info": {"qwen2.context_length": 32768}}},
     6144, "Ollama /api/show"),
])
async def test_the_context_window_is_asked_of_the_server_and_shown(workspace, info, tokens, how):
    with LLMServer([{"text": "hi"}, {"text": "again"}], info=info) as server:
        session = local_session(workspace, server)
        assert session.capabilities.context_window == 32_768  # the table's guess, until asked
        first = await collect(run_turn(session, "hello"))
        second = await collect(run_turn(session, "hello again"))
        await session.close()
    notes = [e.text for e in first if isinstance(e, Note)]
    assert f"Context window of local-model: {tokens:,} tokens ({how}, asked of {server.base_url})." in notes
    assert session.capabilities.context_window == tokens
    assert not any("Context window" in e.text for e in second if isinstance(e, Note))  # asked once


OLLAMA_SHOW = {"show": {"parameters": "num_ctx 6144", "model_info": {"qwen2.context_length": 32768}}}


async def test_a_new_conversations_first_request_does_not_wait_for_the_window(workspace):
    """Start to first request (docs/benchmarks.md): in a new conversation the first request goes out
    before the server is asked for its window (compaction has nothing older to summarise,
    so the answer cannot change that request); the window is learned, shown and used
    before the next step is built."""
    replies = [{"tool_calls": [{"name": "todoread", "arguments": {}}]}, {"text": "done"}]
    with LLMServer(replies, info=OLLAMA_SHOW) as server:
        session = local_session(workspace, server)
        events = await collect(run_turn(session, "hello"))
        await session.close()
        paths = [r["path"] for r in server.requests]
    # The first chat request does not wait for the probe: the two go out together, so the
    # server may log either first (seen both ways, also on a quiet machine); the window is
    # known before the second step's request.
    assert sorted(paths[:2]) == ["/api/show", "/v1/chat/completions"] and paths[2:] == ["/v1/chat/completions"], paths
    assert "Context window of local-model: 6,144 tokens (Ollama /api/show, asked of " \
        f"{server.base_url})." in [e.text for e in events if isinstance(e, Note)]
    assert session.capabilities.context_window == 6144
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "end_turn"


async def test_a_resumed_conversation_asks_for_the_window_before_its_first_request(workspace):
    """With earlier messages the window decides whether they are summarised first, so the
    server is asked before the first request, as before."""
    with LLMServer([{"text": "again"}], info=OLLAMA_SHOW) as server:
        session = local_session(workspace, server)
        session.transcript.extend([Message.user_text("earlier"), Message(role="assistant", parts=[TextPart(text="ok")])])
        await collect(run_turn(session, "hello again"))
        await session.close()
        paths = [r["path"] for r in server.requests]
    assert paths == ["/api/show", "/v1/chat/completions"], paths


async def test_a_configured_context_window_is_not_asked(workspace):
    with LLMServer([{"text": "hi"}], info={"models": [{"id": "local-model", "max_model_len": 8192}]}) as server:
        session = local_session(workspace, server, contextWindow=20000)
        events = await collect(run_turn(session, "hello"))
        await session.close()
        paths = [r["path"] for r in server.requests]
    assert session.capabilities.context_window == 20000
    assert "/v1/models" not in paths and not any(isinstance(e, Note) and "Context window" in e.text for e in events)


async def test_a_request_refused_for_its_length_is_compacted_and_sent_once_more(workspace):
    overflow = {"status": 400, "message": "This model's maximum context length is 2048 tokens. However, you "
                                          "requested 2300 tokens. Please reduce the length of the messages."}
    replies = [overflow, {"text": "## Goal\nSummary of the early talk."}, {"text": "The answer."}]
    with LLMServer(replies) as server:
        session = local_session(workspace, server, contextWindow=30000)
        for n in range(6):  # an earlier conversation our estimate thinks still fits
            session.transcript += [Message.user_text(f"question {n} " + "words " * 60),
                                   Message(role="assistant", parts=[TextPart(text=f"answer {n} " + "more " * 60)])]
        events = await collect(run_turn(session, "and the last question?"))
        await session.close()
        bodies = server.bodies("chat")
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "end_turn"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The answer."
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "refused the request as too long for its context window" in notes
    assert not any(isinstance(e, ErrorEvent) for e in events)
    assert "now taken as 2,048 tokens" in notes and session.capabilities.context_window == 2048
    assert [e.kept for e in events if isinstance(e, Compacted)]  # the typed event says it was compacted
    refused, summary_request, retried = bodies
    assert len(retried["messages"]) < len(refused["messages"])
    assert "Summary of the early talk." in json.dumps(retried["messages"])
    assert retried["messages"][-1]["content"] == "and the last question?"


async def test_a_second_refusal_ends_the_turn_with_the_servers_words(workspace):
    overflow = {"status": 400, "message": "the request exceeds the available context size, try increasing it"}
    with LLMServer([overflow, {"text": "Summary."}, overflow]) as server:
        session = local_session(workspace, server, contextWindow=30000)
        for n in range(4):
            session.transcript += [Message.user_text(f"q{n} " + "x " * 200),
                                   Message(role="assistant", parts=[TextPart(text=f"a{n} " + "y " * 200)])]
        events = await collect(run_turn(session, "go"))
        await session.close()
        assert len(server.bodies("chat")) == 3  # refused, the summary, refused again: no loop
    assert events[-1].stop_reason == "error"
    error = next(e for e in events if isinstance(e, ErrorEvent)).message
    assert "exceeds the available context size" in error


@pytest.mark.parametrize("kind, path, instead", [
    ("responses", "/responses", "openai (Chat Completions)"),
    ("anthropic", "/v1/messages", "openai (Chat Completions)"),
])
async def test_a_missing_endpoint_is_not_an_unknown_model(kind, path, instead, server: LLMServer, adapter):
    server.add({"status": 404, "message": "File Not Found"})  # llama.cpp's words for an unknown path
    provider = adapter(kind, model="smollm2")
    with pytest.raises(Exception) as caught:
        async for _ in provider.stream(ModelRequest(model="smollm2", system="", messages=[Message.user_text("hi")])):
            pass
    text = str(caught.value)
    assert f"has no {path} endpoint (404)" in text and f"try provider {instead}" in text
    assert "does not know model" not in text and "\n" not in text


def test_merge_name_never_repeats_a_name():
    name = ""
    for fragment in ["list", "list", "list"]:  # a server repeating the whole name
        name = merge_name(name, fragment)
    assert name == "list"
    name = ""
    for fragment in ["li", "st"]:  # real fragments
        name = merge_name(name, fragment)
    assert name == "list"
    name = ""
    for fragment in ["gr", "gre", "grep"]:  # a growing name
        name = merge_name(name, fragment)
    assert name == "grep"


async def test_a_server_repeating_the_function_name_yields_one_name(server: LLMServer, adapter, workspace):
    """As some servers stream: the whole name again in every argument fragment."""
    server.add({"tool_calls": [{"id": "c1", "name": "list", "arguments": {"path": "."}}], "arg_chunk": 3,
                "repeat_name": True})
    items = [i async for i in adapter("chat").stream(
        ModelRequest(model="m", system="", messages=[Message.user_text("hi")]))]
    calls = [i for i in items if isinstance(i, ToolCallChunk)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("list", {"path": "."})]


async def test_tool_call_message_content_is_an_empty_string_not_null(server: LLMServer, adapter):
    server.add({"text": "ok"})
    provider = adapter("chat")
    from crystal_kernel.core.messages import ToolCallPart, ToolResultPart

    messages = [Message.user_text("hi"), Message(role="assistant", parts=[ToolCallPart(id="c1", name="list")]),
                Message(role="user", parts=[ToolResultPart(call_id="c1", name="list", ok=True, text="a")])]
    items = [i async for i in provider.stream(ModelRequest(model="m", system="", messages=messages))]
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "ok"
    sent = server.bodies("chat")[0]["messages"]
    assert sent[1] == {"role": "assistant", "content": "",
                       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "list", "arguments": "{}"}}]}


async def test_responses_assistant_text_is_sent_as_a_typed_message_item(server: LLMServer, adapter):
    """Found by the interop suite (docs/interop.md): llama.cpp's /v1/responses refuses an input item with a role but
    no ``"type": "message"`` (HTTP 400 "Cannot determine type of 'item'"), so every
    request after an answer with text failed there; OpenAI accepts the typed form too."""
    server.add({"text": "ok"})
    provider = adapter("responses")
    from crystal_kernel.core.messages import ToolCallPart, ToolResultPart

    messages = [Message.user_text("hi"),
                Message(role="assistant", parts=[TextPart(text="Let me look."), ToolCallPart(id="c1", name="list")]),
                Message(role="user", parts=[ToolResultPart(call_id="c1", name="list", ok=True, text="a")]),
                Message(role="assistant", parts=[TextPart(text="One file.")]),
                Message.user_text("thanks")]
    items = [i async for i in provider.stream(ModelRequest(model="m", system="", messages=messages))]
    assert "".join(i.text for i in items if isinstance(i, TextChunk)) == "ok"
    sent = server.bodies("responses")[0]["input"]
    assistant = [item for item in sent if item.get("role") == "assistant"]
    assert assistant == [{"type": "message", "role": "assistant", "content": "Let me look."},
                         {"type": "message", "role": "assistant", "content": "One file."}]


@pytest.mark.parametrize("used, stop", [(40, "max_tokens"), (39, "end_turn")])
async def test_a_completed_response_that_used_the_whole_output_limit_was_cut_off(used, stop, server: LLMServer,
                                                                                 adapter):
    """Found by the interop suite (docs/interop.md): llama.cpp's /v1/responses says "completed" even when it stopped
    at max_output_tokens; an answer that used the whole limit ends as max_tokens, so the
    person is told it was cut off (text mode exits 1 saying why)."""
    server.add({"text": "a long story", "usage": {"output_tokens": used}})
    provider = adapter("responses")
    request = ModelRequest(model="m", system="", messages=[Message.user_text("story")], max_output_tokens=40)
    items = [i async for i in provider.stream(request)]
    assert server.bodies("responses")[0]["max_output_tokens"] == 40
    assert items[-1].stop_reason == stop
