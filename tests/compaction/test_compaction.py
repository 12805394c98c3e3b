"""Compaction: automatic near the context window and /compact on demand, with the
compaction.system / compaction.user prompts and every PH-7 slot. The scripted provider
plays the agent and the summariser; the transcript is built from real messages."""

from __future__ import annotations

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import ProviderError, UserError
from crystal_kernel.core.events import Compacted, Note, TextDelta, TurnStarted
from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.core.todos import Todo
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.compaction import choose_cut, estimate_tokens, threshold_tokens
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply

SUMMARY = "## Goal\nRefactor the parser.\n\n## Next steps\nRun the tests."


def make_session(workspace, replies=(), **config):
    session = Session(workspace=workspace, config=load_config(overrides={"approval": "full"}),
                      provider=ScriptedProvider(list(replies)), person_present=False)
    for key, value in config.items():
        setattr(session.config, key, value)
    run_to_completion(session.prepare_tools())  # build_request sends the catalog's specs
    return session


def old_turn(n: int, size: int = 2_400) -> list[Message]:
    """One earlier turn: a prompt, a tool call, its (long) result, an answer."""
    call = ToolCallPart(id=f"old_{n}", name="read", arguments={"path": f"file{n}.py"})
    return [
        Message.user_text(f"Old request number {n}"),
        Message(role="assistant", parts=[TextPart(text=f"Reading file{n}."), call]),
        Message(role="user", parts=[ToolResultPart(call_id=f"old_{n}", name="read", ok=True,
                                                   text=f"content of file{n} " + "x" * size)]),
        Message(role="assistant", parts=[TextPart(text=f"Done with request {n}.")]),
    ]


def fill(session, turns: int, size: int = 2_400) -> None:
    for n in range(turns):
        for message in old_turn(n, size):
            session.transcript.append(message)
            session.history.append(message)


def fixed_tokens(session) -> int:
    request = session.build_request()
    request.messages = []
    return estimate_tokens(request)


async def collect(turn):
    return [e async for e in turn]


async def test_past_threshold_compacts_once_keeps_todos_and_shrinks_the_request(workspace):
    session = make_session(workspace, [text_reply(SUMMARY), text_reply("Carrying on.")])
    await session.prepare_tools()  # the catalog is built asynchronously (fixed_tokens needs it)
    # A window where the system text and tools take about half, the threshold 80 %.
    session.config.context_window = fixed_tokens(session) * 2
    session.todos[:] = [Todo(content="Refactor parser", status="in_progress"),
                        Todo(content="Write tests", status="pending")]
    fill(session, 8)
    before = estimate_tokens(session.build_request())
    assert before >= threshold_tokens(session)
    history_before = len(session.history)

    events = await collect(run_turn(session, "Now run the tests please"))

    purposes = [r.purpose for r in session.provider.requests]
    assert purposes == ["compaction", "turn"]  # once, before the agent's request
    compaction, agent = session.provider.requests
    assert compaction.tools == [] and "You summarise a working session" in compaction.system
    after = estimate_tokens(agent)
    assert after < threshold_tokens(session) and after < before
    # The summary leads the transcript; the newest prompt is kept verbatim after it.
    first = session.transcript[0]
    assert first.meta["kind"] == "summary" and "Refactor the parser." in first.text()
    assert "[~] Refactor parser" in first.text() and "[ ] Write tests" in first.text()
    assert session.transcript[-2].text() == "Now run the tests please"
    assert [t.content for t in session.todos] == ["Refactor parser", "Write tests"]  # todos kept
    # The full record stays in history and in the saved document.
    assert len(session.history) == history_before + 2
    doc = SessionStore(workspace).load(session.id)
    assert len(doc["history"]) == history_before + 2 and doc["transcript"][0]["meta"]["kind"] == "summary"
    # A typed event says so: the sizes, and the sentence every front shows.
    assert isinstance(events[0], TurnStarted) and events[0].session_id == session.id
    compacted = [e for e in events if isinstance(e, Compacted)]
    assert len(compacted) == 1 and compacted[0].before_tokens > compacted[0].after_tokens > 0
    assert compacted[0].kept >= 1 and compacted[0].summarised >= 1
    assert compacted[0].line().startswith("Compacted the conversation")
    assert compacted[0].to_json()["type"] == "compacted" and "beforeTokens" in compacted[0].to_json()
    assert not any(isinstance(e, Note) and e.text.startswith("Compacted") for e in events)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Carrying on."
    assert session.usage.by_purpose["compaction"]["inputTokens"] == 10

    # The next turn is below the threshold: no second compaction.
    session.provider.add(text_reply("Still fine."))
    await collect(run_turn(session, "and then?"))
    assert [r.purpose for r in session.provider.requests] == ["compaction", "turn", "turn"]


async def test_compaction_user_text_has_every_ph7_slot(workspace):
    session = make_session(workspace, [text_reply(SUMMARY), text_reply("second summary")])
    session.todos[:] = [Todo(content="Keep me", status="pending")]
    fill(session, 3, size=200)
    await run_command(session, "/compact")
    user = session.provider.requests[0].messages[0].text()
    assert "Old request number 0" in user and "Result of read (ok)" in user       # conversation
    assert "The user asked to compact the conversation now." in user             # summary_task
    assert "## Open problems" in user and "## Next steps" in user                # output_template
    assert "[ ] Keep me" in user                                                 # todos_section
    assert "prior_summary" not in user and "{{" not in user                      # no prior summary yet
    # A second compaction hands the first summary in as prior_summary_section.
    for message in old_turn(7, 200) + old_turn(8, 200):
        session.transcript.append(message)
    await run_command(session, "/compact focus on the parser")
    user = session.provider.requests[1].messages[0].text()
    assert "<prior_summary>" in user and "Refactor the parser." in user
    assert "focus on: focus on the parser" in user
    assert "Old request number 0" not in user  # already summarised before
    assert "second summary" in session.transcript[0].text()


async def test_compact_command_on_demand_keeps_the_latest_turn(workspace):
    session = make_session(workspace, [text_reply(SUMMARY)])
    fill(session, 3, size=100)
    result = await run_command(session, "/compact")
    assert result.text.startswith("Compacted the conversation: 8 older messages became a summary, 4 recent")
    assert [m.meta.get("kind") for m in session.transcript][:1] == ["summary"]
    assert session.transcript[1].text() == "Old request number 2"
    assert len(session.history) == 12
    saved = SessionStore(workspace).load(session.id)
    assert saved["transcript"][0]["meta"]["kind"] == "summary"


async def test_compact_command_with_nothing_to_compact_and_while_busy(workspace):
    session = make_session(workspace, [])
    session.transcript[:] = [Message.user_text("hi"), Message(role="assistant", parts=[TextPart(text="hello")])]
    result = await run_command(session, "/compact")
    assert result.text.startswith("Nothing to compact yet")
    assert session.provider.requests == []
    session.busy = True
    with pytest.raises(UserError, match="while a turn is running"):
        await run_command(session, "/compact")


async def test_failed_compaction_changes_nothing(workspace):
    session = make_session(workspace, [ProviderError("HTTP 500 from the model")])
    fill(session, 3, size=100)
    before = list(session.transcript)
    with pytest.raises(UserError, match="Compaction failed: .*HTTP 500"):
        await run_command(session, "/compact")
    assert session.transcript == before


async def test_automatic_compaction_failure_is_a_note_and_the_turn_goes_on(workspace):
    session = make_session(workspace, [ProviderError("HTTP 500 from the model"), text_reply("answer anyway")])
    await session.prepare_tools()  # the catalog is built asynchronously (fixed_tokens needs it)
    session.config.context_window = fixed_tokens(session) * 2
    fill(session, 8)
    events = await collect(run_turn(session, "go on"))
    notes = [e.text for e in events if isinstance(e, Note)]
    assert any("Compaction failed" in n and "kept as it was" in n for n in notes)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "answer anyway"
    assert session.transcript[0].text() == "Old request number 0"


def test_cut_never_separates_a_call_from_its_result():
    messages = [m for n in range(4) for m in old_turn(n, 400)]
    for budget in range(0, 2_000, 25):
        cut = choose_cut(messages, budget, manual=False)
        assert cut is not None
        assert not messages[cut].tool_results()  # the tail never starts with results
        kept_calls = {c.id for m in messages[cut:] for c in m.tool_calls()}
        kept_results = {r.call_id for m in messages[cut:] for r in m.tool_results()}
        assert kept_results <= kept_calls


def test_cut_inside_one_long_turn():
    """A single turn with many tool steps can still be cut between steps."""
    messages = [Message.user_text("do a lot")]
    for n in range(6):
        call = ToolCallPart(id=f"c{n}", name="bash", arguments={"command": f"step {n}"})
        messages.append(Message(role="assistant", parts=[call]))
        messages.append(Message(role="user", parts=[ToolResultPart(call_id=f"c{n}", name="bash", ok=True,
                                                                   text="y" * 2_000)]))
    cut = choose_cut(messages, 1_200, manual=False)
    assert cut is not None and messages[cut].role == "assistant" and cut > 1
