"""The turn loop with the in-process scripted provider and real tools on real files."""

from __future__ import annotations

import asyncio
import json

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import ProviderError
from crystal_kernel.core.events import ApprovalEvent, ErrorEvent, TextDelta, ToolResultEvent, TurnEnd
from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.providers.base import Capabilities, TextChunk
from crystal_kernel.testing.scripted import HANG, Fail, ScriptedProvider, text_reply, tool_reply
from tests.approval.conftest import Person


def make_session(workspace, replies, *, approval="full", person=False, **kw):
    config = load_config(overrides={"approval": approval})
    provider = ScriptedProvider(replies, **kw)
    return Session(workspace=workspace, config=config, provider=provider, person_present=person)


async def collect(turn):
    return [e async for e in turn]


async def test_text_turn_streams_and_saves(workspace):
    session = make_session(workspace, [text_reply("Hello there", chunk=3)])
    events = await collect(run_turn(session, "hi"))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == "Hello there" and len(deltas) == 4
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "end_turn"
    doc = SessionStore(workspace).load(session.id)
    assert doc["transcript"][0]["parts"][0]["text"] == "hi"
    assert doc["transcript"][1]["parts"][0]["text"] == "Hello there"
    assert doc["usage"]["inputTokens"] == 10


async def test_several_calls_in_one_reply_run_in_order(workspace):
    session = make_session(
        workspace,
        [
            tool_reply([("write", {"path": "a.txt", "content": "one\n"}),
                        ("read", {"path": "a.txt"})]),
            text_reply("done"),
        ],
    )
    events = await collect(run_turn(session, "write then read"))
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.name for r in results] == ["write", "read"]
    assert all(r.ok for r in results)
    assert "one" in results[1].text
    assert (workspace / "a.txt").read_text() == "one\n"
    # The second request carried both results back to the model.
    second = session.provider.requests[1]
    sent = [p for m in second.messages for p in m.parts if p.kind == "tool_result"]
    assert [p.name for p in sent] == ["write", "read"]


async def test_invalid_arguments_come_back_to_the_model(workspace):
    session = make_session(workspace, [tool_reply([("read", {"nope": 1})]), tool_reply([("read", "{not json")]),
                                       text_reply("ok")])
    events = await collect(run_turn(session, "x"))
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert not results[0].ok and "Invalid arguments for read" in results[0].text
    assert not results[1].ok and "not a valid JSON object" in results[1].text
    assert events[-1].stop_reason == "end_turn"


async def test_unknown_tool_is_a_failed_result(workspace):
    session = make_session(workspace, [tool_reply([("teleport", {})]), text_reply("ok")])
    events = await collect(run_turn(session, "x"))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and "Unknown tool 'teleport'" in result.text


async def test_output_is_truncated_to_the_limit(workspace):
    (workspace / "big.txt").write_text("x" * 200 + "\n")
    session = make_session(workspace, [tool_reply([("read", {"path": "big.txt"})]), text_reply("ok")])
    session.config.tool_output_limit = 100
    events = await collect(run_turn(session, "x"))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert "characters cut" in result.text and "tool output limit is 100" in result.text


async def test_ask_without_person_denies(workspace):
    session = make_session(workspace, [tool_reply([("write", {"path": "a.txt", "content": "x"})]), text_reply("ok")],
                           approval="default")
    events = await collect(run_turn(session, "x"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approvals[-1].outcome == "deny" and approvals[-1].by == "host"
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and "No person is present" in result.text
    assert not (workspace / "a.txt").exists()
    assert session.audit[-1]["outcome"] == "deny"


async def test_person_allows_for_session(workspace):
    session = make_session(workspace, [
        tool_reply([("write", {"path": "a.txt", "content": "1"})]),
        tool_reply([("write", {"path": "a.txt", "content": "2"})]),
        text_reply("ok"),
    ], approval="default")
    person = Person(PersonDecision(outcome="allow_session"))
    events = await collect(run_turn(session, "x", person))
    assert len(person.requests) == 1  # the second write was allowed by the session allowance
    bys = [(e.outcome, e.by) for e in events if isinstance(e, ApprovalEvent)]
    assert ("allow", "person") in bys
    assert (workspace / "a.txt").read_text() == "2"


async def test_forbidden_rule_beats_full(workspace):
    session = make_session(workspace, [tool_reply([("write", {"path": "secret/x.txt", "content": "1"})]),
                                       text_reply("ok")], approval="full")
    session.config.forbidden = [{"tool": "write", "pattern": "secret/*"}]
    events = await collect(run_turn(session, "x"))
    approval = next(e for e in events if isinstance(e, ApprovalEvent))
    assert (approval.outcome, approval.by) == ("deny", "policy")
    assert not (workspace / "secret").exists()


async def test_broken_stream_keeps_partial_answer(workspace):
    session = make_session(workspace, [[TextChunk("partial "), Fail(ProviderError("The stream broke."))]])
    events = await collect(run_turn(session, "x"))
    assert any(isinstance(e, ErrorEvent) and "stream broke" in e.message for e in events)
    assert events[-1].stop_reason == "error"
    assert session.transcript[-1].interrupted and session.transcript[-1].text() == "partial "


async def test_cancel_during_hanging_stream(workspace):
    session = make_session(workspace, [[TextChunk("thinking"), HANG]])
    turn = run_turn(session, "x")
    events = []

    async def consume():
        async for e in turn:
            events.append(e)
            if isinstance(e, TextDelta):
                turn.cancel()

    await asyncio.wait_for(consume(), 2)
    assert events[-1].stop_reason == "cancelled"
    assert session.transcript[-1].interrupted
    assert not session.busy


async def test_step_limit(workspace):
    replies = [tool_reply([("read", {"path": "."})]) for _ in range(3)]
    session = make_session(workspace, replies)
    session.config.max_steps = 2
    events = await collect(run_turn(session, "x"))
    assert events[-1].stop_reason == "max_steps"


async def test_images_refused_on_text_only_model(workspace):
    from crystal_kernel.core.messages import ImagePart
    from crystal_kernel.host.loop import NO_IMAGES
    from crystal_kernel.tools.base import Tool, ToolResult

    class Pic(Tool):
        name = "pic"

        async def run(self, args, ctx):
            return ToolResult(ok=True, text="", images=[ImagePart(mime_type="image/png", data="AA==")])

    session = make_session(workspace, [tool_reply([("pic", {})]), text_reply("ok")],
                           capabilities=Capabilities(images=False))
    (await session.prepare_tools()).append(Pic())
    events = await collect(run_turn(session, "x"))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and result.text == NO_IMAGES


async def test_resume_continues_the_conversation(workspace):
    session = make_session(workspace, [text_reply("first")])
    await collect(run_turn(session, "one"))
    again = make_session(workspace, [text_reply("second")])
    again.resume(session.id)
    await collect(run_turn(again, "two"))
    texts = [m.text() for m in again.provider.requests[0].messages]
    assert texts == ["one", "first", "two"]


@pytest.mark.parametrize("field, value", [("usage", {"inputTokens": "many"}), ("turns", "x"),
                                          ("transcript", [{"role": "robot"}]), ("todos", [{"status": "later"}])])
async def test_corrupt_document_is_one_line_and_changes_nothing(workspace, field, value):
    from crystal_kernel.core.errors import UserError

    session = make_session(workspace, [text_reply("first")])
    await collect(run_turn(session, "one"))
    # A document in the older single-document format (still read).
    store = SessionStore(workspace)
    doc = store.load(session.id)
    store.journal_path(session.id).unlink()
    path = store.document_path(session.id)
    doc[field] = value
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    other = make_session(workspace, [])
    with pytest.raises(UserError, match="is corrupt"):
        other.resume(session.id)
    assert other.transcript == [] and other.id != session.id
    assert path.read_bytes() == before


async def test_a_session_that_cannot_be_saved_ends_the_turn_with_an_error(workspace):
    sessions = workspace / ".crystal" / "sessions"
    sessions.mkdir(parents=True)
    sessions.chmod(0o500)  # root ignores this, so also make the target a folder
    session = make_session(workspace, [text_reply("done")])
    (sessions / f"{session.id}.jsonl").mkdir()
    try:
        events = await collect(run_turn(session, "x"))
    finally:
        sessions.chmod(0o700)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors and f"Could not save the session document {sessions / (session.id + '.jsonl')}" in errors[0].message
    assert events[-1].stop_reason == "error"


async def test_a_tool_whose_classify_raises_fails_only_that_call(workspace):
    from crystal_kernel.tools.base import Tool

    class Broken(Tool):
        name = "broken"

        def classify(self, args, ctx):
            raise KeyError("oops")

    session = make_session(workspace, [tool_reply([("broken", {}), ("list", {"path": "."})]), text_reply("ok")])
    (await session.prepare_tools()).append(Broken())
    events = await collect(run_turn(session, "x"))
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert not results[0].ok and "Internal error in broken" in results[0].text
    assert results[1].ok and events[-1].stop_reason == "end_turn"
