"""Usage per turn and per session with cost from config ``prices`` (/usage), and topic
naming after the first turn (PH-11, SPEC §11 ``topicNaming``)."""

from __future__ import annotations

from crystal_kernel.core.config import load_config
from crystal_kernel.core.events import Note, TurnEnd
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.host.usage import price_for
from crystal_kernel.testing.scripted import HANG, ScriptedProvider, text_reply, tool_reply


def make_session(workspace, replies, **config):
    session = Session(workspace=workspace, config=load_config(overrides={"approval": "full"}),
                      provider=ScriptedProvider(list(replies), model="gpt-test"), person_present=False)
    for key, value in config.items():
        setattr(session.config, key, value)
    return session


async def collect(turn):
    return [e async for e in turn]


async def test_usage_per_turn_and_session_with_cost(workspace):
    session = make_session(workspace, [
        tool_reply([("read", {"path": "."})], usage=(1_000, 100)),
        text_reply("one", usage=(2_000, 200)),
        text_reply("two", usage=(500_000, 50_000)),
    ], prices={"gpt-test": {"input": 2.0, "output": 8.0}})
    await collect(run_turn(session, "first"))
    await collect(run_turn(session, "second"))
    assert session.usage.turns == [
        {"inputTokens": 3_000, "outputTokens": 300, "model": "gpt-test"},
        {"inputTokens": 500_000, "outputTokens": 50_000, "model": "gpt-test"},
    ]
    result = await run_command(session, "/usage")
    lines = result.text.splitlines()
    assert lines[0] == f"Session {session.id}: 553,300 tokens (503,000 input + 50,300 output) over 2 turns."
    assert lines[1] == "Last turn: 500,000 input + 50,000 output ($1.4000)."
    # 503000 * 2 / 1e6 + 50300 * 8 / 1e6 = 1.006 + 0.4024
    assert lines[-1] == "Cost: $1.4084"
    assert abs(result.data["usage"]["cost"] - 1.4084) < 1e-9
    doc = SessionStore(workspace).load(session.id)
    assert doc["usage"]["byModel"] == {"gpt-test": {"inputTokens": 503_000, "outputTokens": 50_300}}


async def test_usage_without_a_price_says_how_to_set_one(workspace):
    session = make_session(workspace, [text_reply("hi")])
    await collect(run_turn(session, "x"))
    text = (await run_command(session, "/usage")).text
    assert "Last turn: 10 input + 5 output (no price)." in text
    assert "Cost: no price known for gpt-test (set config 'prices'" in text


async def test_review_tokens_are_counted_apart_and_priced(workspace):
    session = make_session(workspace, [
        tool_reply([("write", {"path": "a.txt", "content": "a"})], usage=(100, 10)),
        text_reply('{"risk_level": "low", "user_authorization": "high"}', usage=(50, 5)),
        text_reply("ok", usage=(100, 10)),
    ], approval="review", prices={"gpt-*": {"input": 1.0, "output": 1.0}})
    session.approval = "review"
    await collect(run_turn(session, "write a"))
    text = (await run_command(session, "/usage")).text
    assert "over 1 turn." in text and "250 input + 25 output" in text
    assert "Side requests (input + output): review 50 + 5." in text
    assert "Cost: $0.0003" in text  # 275 tokens at $1 per million


def test_price_lookup_exact_provider_and_glob():
    prices = {"m": {"input": 1, "output": 2}, "openai:m": {"input": 3, "output": 4},
              "claude-*": {"input": 5, "output": 6}, "bad": {"input": "x"}}
    assert price_for(prices, "m").input == 1
    assert price_for(prices, "m", "openai").input == 3
    assert price_for(prices, "claude-sonnet-4-5", "anthropic").output == 6
    assert price_for(prices, "bad") is None and price_for(prices, "unknown") is None
    assert price_for("not a table", "m") is None


async def test_topic_named_after_first_turn_and_saved(workspace, monkeypatch):
    monkeypatch.delenv("CRYSTAL_TOPIC_NAMING", raising=False)
    session = make_session(workspace, [text_reply("Sure, here is the fix."),
                                       text_reply('"Fix flaky login test."\n'), text_reply("again")])
    events = await collect(run_turn(session, "the login test fails sometimes, fix it"))
    assert isinstance(events[-1], TurnEnd)
    assert session.topic == "Fix flaky login test"
    topic_request = session.provider.requests[1]
    assert topic_request.purpose == "topic" and topic_request.tools == []
    assert "short title" in topic_request.system
    assert "the login test fails sometimes" in topic_request.messages[0].text()
    doc = SessionStore(workspace).load(session.id)
    assert doc["topic"] == "Fix flaky login test"
    listing = (await run_command(session, "/sessions")).text
    assert "Fix flaky login test" in listing
    # Only after the first turn.
    await collect(run_turn(session, "more"))
    assert [r.purpose for r in session.provider.requests] == ["turn", "topic", "turn"]


async def test_topic_naming_off_by_config(workspace, monkeypatch):
    monkeypatch.delenv("CRYSTAL_TOPIC_NAMING", raising=False)
    session = make_session(workspace, [text_reply("hi")], topic_naming=False)
    await collect(run_turn(session, "x"))
    assert session.topic is None and [r.purpose for r in session.provider.requests] == ["turn"]


async def test_topic_failure_leaves_the_session_unnamed_with_a_note(workspace, monkeypatch):
    monkeypatch.delenv("CRYSTAL_TOPIC_NAMING", raising=False)
    monkeypatch.setattr("crystal_kernel.host.topic.TOPIC_TIMEOUT", 0.2)
    session = make_session(workspace, [text_reply("hi"), [HANG]])
    events = await collect(run_turn(session, "x"))
    assert session.topic is None
    notes = [e.text for e in events if isinstance(e, Note)]
    assert notes == ["The session was left unnamed: the topic request took longer than 0.2 s."]
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "end_turn"
