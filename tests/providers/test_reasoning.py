"""Reasoning end to end on the three wire protocols (SPEC §12 reasoningEffort, the
``reasoning`` event): whole turns through the real adapters and the official
SDKs against the loopback server, which streams each API's documented reasoning shapes
(Chat Completions ``reasoning_content`` / ``reasoning`` deltas, Responses reasoning
summary events and encrypted items, Anthropic ``thinking_delta`` + ``signature_delta``
and ``redacted_thinking``). The assertions are on what a person sees (reasoning apart
from the answer) and on what the model receives in its NEXT request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import ReasoningDelta, TextDelta, ToolCallStarted, ToolResultEvent, UsageEvent
from crystal_kernel.core.messages import ReasoningPart
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.providers.replay import RecordingProvider, ReplayProvider
from crystal_kernel.testing.llm_server import LLMServer
from tests.providers.conftest import make_adapter

THOUGHT = "The person wants the files.\n\nI will list them first."
CALL = {"id": "call_list_1", "name": "list", "arguments": {"path": "."}}


def first_reply(kind: str) -> dict[str, Any]:
    reply: dict[str, Any] = {"reasoning": THOUGHT, "tool_calls": [CALL],
                             "usage": {"input_tokens": 40, "output_tokens": 30, "reasoning_tokens": 21}}
    if kind == "anthropic":
        reply.update(signature="EqQBCkYIBxgCKkD-signed-by-the-server", redacted_thinking=["RED-ACTED-opaque=="])
    if kind == "responses":
        reply["encrypted"] = "gAAAAB-encrypted-reasoning-item"
    return reply


def make_session(workspace, provider, effort: str | None = "high") -> Session:
    config = load_config(overrides={"approval": "full", "reasoningEffort": effort})
    return Session(workspace=workspace, config=config, provider=provider, person_present=False)


async def collect(turn) -> list[Any]:
    return [e async for e in turn]


@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
async def test_reasoning_is_shown_apart_and_sent_back_on_the_next_request(kind, workspace):
    (workspace / "a.txt").write_text("a\n")
    with LLMServer([first_reply(kind), {"text": "There is a.txt."}]) as server:
        provider = make_adapter(kind, server)
        session = make_session(workspace, provider)
        events = await collect(run_turn(session, "what files are here?"))
        bodies = server.bodies()
        await provider.aclose()

    # Shown: streamed as reasoning events, before the call and the answer, never in it.
    thought = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert thought == THOUGHT
    kinds = [type(e) for e in events]
    assert kinds.index(ReasoningDelta) < kinds.index(ToolCallStarted) < kinds.index(TextDelta)
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert answer == "There is a.txt." and "list them" not in answer
    assert [e.status for e in events if isinstance(e, ToolResultEvent)] == ["ok"]

    # Asked for: the effort, in each API's own words.
    first, second = bodies
    if kind == "chat":
        assert first["reasoning_effort"] == "high"
        assert first["max_tokens"] == 16384
    elif kind == "responses":
        assert first["reasoning"] == {"effort": "high", "summary": "auto"}
        assert first["include"] == ["reasoning.encrypted_content"] and first["store"] is False
        assert first["max_output_tokens"] == 16384
    else:
        assert first["thinking"]["type"] == "enabled"
        assert 1024 <= first["thinking"]["budget_tokens"] < first["max_tokens"] == 16384

    # Sent back: what the next request of the turn carries.
    if kind == "responses":
        items = second["input"]
        reasoning = [i for i in items if i.get("type") == "reasoning"]
        assert reasoning == [{"type": "reasoning", "encrypted_content": "gAAAAB-encrypted-reasoning-item",
                              "summary": [{"type": "summary_text", "text": THOUGHT}]}]
        assert items.index(reasoning[0]) < next(n for n, i in enumerate(items) if i.get("type") == "function_call")
    elif kind == "anthropic":
        assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
        assert assistant["content"][0] == {"type": "thinking", "thinking": THOUGHT,
                                           "signature": "EqQBCkYIBxgCKkD-signed-by-the-server"}
        assert assistant["content"][1] == {"type": "redacted_thinking", "data": "RED-ACTED-opaque=="}
        assert assistant["content"][2]["type"] == "tool_use"
        assert second["thinking"]["type"] == "enabled"
    else:
        assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
        # Not null beside tool calls (llama-cpp-python's server fails on it), no reasoning back.
        assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "list"
        assert "reasoning_content" not in assistant and THOUGHT not in json.dumps(second)

    # Counted apart: reasoning tokens (Anthropic does not report them separately).
    usage = [e for e in events if isinstance(e, UsageEvent)]
    expected = 0 if kind == "anthropic" else 21
    assert session.usage.reasoning_tokens == expected
    assert (usage[0].to_json().get("reasoningTokens") or 0) == expected


@pytest.mark.parametrize("kind", ["responses", "anthropic"])
async def test_a_resumed_session_sends_the_kept_reasoning_again(kind, workspace):
    with LLMServer([first_reply(kind), {"text": "There is nothing."}]) as server:
        provider = make_adapter(kind, server)
        session = make_session(workspace, provider)
        await collect(run_turn(session, "what files are here?"))
        await provider.aclose()
    doc = SessionStore(workspace).load(session.id)
    kept = [p for m in doc["transcript"] for p in m["parts"] if p["kind"] == "reasoning"]
    assert kept and kept[0]["provider"] == ("anthropic" if kind == "anthropic" else "openai-responses")

    with LLMServer([{"text": "Still nothing."}]) as server:
        provider = make_adapter(kind, server)
        resumed = make_session(workspace, provider)
        resumed.resume(session.id)
        await collect(run_turn(resumed, "and now?"))
        body = server.bodies()[0]
        await provider.aclose()
    wire = json.dumps(body)
    if kind == "responses":
        assert "gAAAAB-encrypted-reasoning-item" in wire
    else:
        assert "EqQBCkYIBxgCKkD-signed-by-the-server" in wire and "RED-ACTED-opaque==" in wire


async def test_ollama_reasoning_field_and_no_effort_sends_nothing(workspace):
    reply = {"reasoning": "Hmm, a greeting.", "reasoning_field": "reasoning", "text": "Hello!"}
    with LLMServer([reply]) as server:
        provider = make_adapter("chat", server)
        session = make_session(workspace, provider, effort=None)
        events = await collect(run_turn(session, "hi"))
        body = server.bodies()[0]
        await provider.aclose()
    assert "reasoning_effort" not in body
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Hmm, a greeting."
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello!"
    assert session.transcript[-1].text() == "Hello!"


async def test_responses_without_an_effort_asks_reasoning_models_for_encrypted_items_only(workspace):
    with LLMServer([{"text": "a"}, {"text": "b"}]) as server:
        for model in ("gpt-5", "gpt-4.1"):
            provider = make_adapter("responses", server, model=model)
            await collect(run_turn(make_session(workspace, provider, effort=None), "hi"))
            await provider.aclose()
        reasoning_model, plain = server.bodies()
    assert reasoning_model["reasoning"] == {"summary": "auto"}
    assert reasoning_model["include"] == ["reasoning.encrypted_content"]
    assert "reasoning" not in plain and "include" not in plain


async def test_anthropic_effort_none_leaves_thinking_off(workspace):
    with LLMServer([{"text": "ok"}]) as server:
        provider = make_adapter("anthropic", server)
        await collect(run_turn(make_session(workspace, provider, effort="none"), "hi"))
        body = server.bodies()[0]
        await provider.aclose()
    assert "thinking" not in body


async def test_cassette_records_and_replays_reasoning_with_its_signature(workspace, tmp_path):
    cassette = tmp_path / "thinking.json"
    with LLMServer([first_reply("anthropic"), {"text": "Done."}]) as server:
        live = make_adapter("anthropic", server)
        recorder = RecordingProvider(live, cassette)
        await collect(run_turn(make_session(workspace, recorder), "what files are here?"))
        await recorder.aclose()
    recorded = json.loads(cassette.read_text())["interactions"][0]["reply"]
    assert recorded[0] == {"reasoning": {"text": THOUGHT, "provider": "anthropic",
                                         "signature": "EqQBCkYIBxgCKkD-signed-by-the-server"}}
    assert recorded[1] == {"reasoning": {"text": "", "provider": "anthropic", "encrypted": "RED-ACTED-opaque==",
                                         "redacted": True}}

    replayed = make_session(workspace, ReplayProvider(cassette))
    events = await collect(run_turn(replayed, "what files are here?"))
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == THOUGHT
    parts = [p for m in replayed.transcript for p in m.parts if isinstance(p, ReasoningPart)]
    assert [(p.signature, p.redacted) for p in parts] == [("EqQBCkYIBxgCKkD-signed-by-the-server", False),
                                                          (None, True)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Done."


async def test_reasoning_command_and_usage_show_it(workspace):
    from crystal_kernel.core.errors import UserError
    from crystal_kernel.host.commands import run_command

    session = make_session(workspace, ReplayProvider(workspace / "none.json"), effort=None)
    assert (await run_command(session, "/reasoning")).text == "Reasoning: default (the provider decides)."
    said = (await run_command(session, "/reasoning medium")).text
    assert said.startswith("Reasoning is now medium. Saved as your default in ")
    assert json.loads(session.config.path.read_text())["reasoningEffort"] == "medium"
    await session.prepare_tools()
    assert session.build_request().reasoning_effort == "medium"
    assert session.build_request("compaction").reasoning_effort is None  # side requests: provider default
    with pytest.raises(UserError, match="/reasoning must be one of none, low, medium, high"):
        await run_command(session, "/reasoning extreme")
    assert session.config.reasoning_effort == "medium"  # a bad value changes nothing
    session.usage.add(100, 50, model="gpt-5", reasoning_tokens=30)
    session.usage.turns.append({"inputTokens": 100, "outputTokens": 50, "reasoningTokens": 30, "model": "gpt-5"})
    text = (await run_command(session, "/usage")).text
    assert "Reasoning: 30 of the output tokens." in text
    assert "Last turn: 100 input + 50 output, 30 of them reasoning" in text


def test_anthropic_thinking_stays_off_when_the_tool_step_has_no_signed_thinking():
    """The API refuses thinking when the turn continues after a tool call whose assistant
    message holds no thinking block (made by another model, or before thinking was on)."""
    from crystal_kernel.core.messages import Message, ReasoningPart, ToolCallPart, ToolResultPart
    from crystal_kernel.providers.base import ModelRequest

    provider = make_adapter("anthropic", "http://127.0.0.1:9")
    unsigned = [Message.user_text("go"), Message(role="assistant", parts=[ToolCallPart(id="c1", name="list")]),
                Message(role="user", parts=[ToolResultPart(call_id="c1", name="list", ok=True, text="a")])]
    body = provider.body(ModelRequest(model="claude-sonnet-4-6", system="", messages=unsigned,
                                      reasoning_effort="high", max_output_tokens=16384))
    assert "thinking" not in body
    signed = list(unsigned)
    signed[1] = Message(role="assistant", parts=[ReasoningPart(text="t", provider="anthropic", signature="s"),
                                                 ToolCallPart(id="c1", name="list")])
    body = provider.body(ModelRequest(model="claude-sonnet-4-6", system="", messages=signed,
                                      reasoning_effort="high", max_output_tokens=16384))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 15360}
    assert body["messages"][1]["content"][0] == {"type": "thinking", "thinking": "t", "signature": "s"}
    # Reasoning another protocol produced is never sent to this one.
    foreign = list(unsigned)
    foreign[1] = Message(role="assistant", parts=[ReasoningPart(text="x", provider="openai-responses",
                                                                encrypted="enc"), ToolCallPart(id="c1", name="list")])
    body = provider.body(ModelRequest(model="claude-sonnet-4-6", system="", messages=foreign,
                                      reasoning_effort="low", max_output_tokens=16384))
    assert "thinking" not in body and "enc" not in json.dumps(body["messages"])
