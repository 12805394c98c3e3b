"""Resume parses only what the next request needs (SPEC §11 Sessions; scale target:
resume of a 50 MB session < 0.5 s): the history-only lines a compaction left behind
stay unread until something reads the history, and the resumed session behaves as one
that read everything — same history, same transcript, same next request, a save that
appends, a fork that carries the whole record."""

from __future__ import annotations

import pickle

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.message_log import MessageLog, RawMessage
from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply

SUMMARY = "## Goal\nKeep reading.\n\n## Next steps\nRead more."


def make_session(workspace, replies=()):
    config = load_config(overrides={"approval": "full", "topicNaming": False})
    return Session(workspace=workspace, config=config, provider=ScriptedProvider(list(replies)),
                   person_present=False)


def old_turn(n: int) -> list[Message]:
    call = ToolCallPart(id=f"c{n}", name="read", arguments={"path": f"f{n}.py"})
    return [Message.user_text(f"request {n}"),
            Message(role="assistant", parts=[TextPart(text=f"Reading f{n}."), call]),
            Message(role="user", parts=[ToolResultPart(call_id=f"c{n}", name="read", ok=True,
                                                       text=f"content {n} " + "x" * 500)]),
            Message(role="assistant", parts=[TextPart(text=f"Done {n}.")])]


async def compacted_session(workspace) -> Session:
    """Six turns, compacted (a snapshot: the first turns become history-only lines),
    then one more turn appended."""
    session = make_session(workspace, [text_reply(SUMMARY), text_reply("after")])
    for n in range(6):
        for message in old_turn(n):
            session.transcript.append(message)
            session.history.append(message)
    session.save()
    result = await run_command(session, "/compact")
    assert result.text.startswith("Compacted the conversation")
    events = [e async for e in run_turn(session, "next question")]
    assert events[-1].stop_reason == "end_turn"
    return session


def unread(log) -> int:
    return sum(1 for item in list.__iter__(log) if type(item) is RawMessage and item._message is None)


async def test_resume_leaves_compacted_history_unread_and_behaves_as_before(workspace):
    session = await compacted_session(workspace)
    path = SessionStore(workspace).journal_path(session.id)
    assert b'"to":"history"' in path.read_bytes()
    resumed = make_session(workspace, [text_reply("again")])
    resumed.resume(session.id)
    assert isinstance(resumed.history, MessageLog) and unread(resumed.history) > 0
    # The transcript (what the next request sends) was read; the old part was not.
    assert [m.model_dump() for m in resumed.transcript] == [m.model_dump() for m in session.transcript]
    before = path.read_bytes()
    events = [e async for e in run_turn(resumed, "one more")]
    assert events[-1].stop_reason == "end_turn"
    sent = resumed.provider.requests[-1].messages
    assert [m.model_dump() for m in sent[:-1]] == [m.model_dump() for m in session.transcript]
    assert sent[-1].text() == "one more"
    assert unread(resumed.history) > 0  # a turn reads none of the old history
    # The save appended; the unread lines were not rewritten.
    assert path.read_bytes().startswith(before)
    # Reading the history gives the whole record, as the original session holds it.
    texts = [m.text() for m in resumed.history]
    assert texts == [m.text() for m in session.history] + ["one more", "again"]
    assert texts[0] == "request 0" and unread(resumed.history) == 0
    # And a third resume sees everything the second one saved.
    third = make_session(workspace)
    third.resume(session.id)
    assert [m.text() for m in third.history] == texts
    assert [m.text() for m in third.transcript] == [m.text() for m in resumed.transcript]


async def test_a_lazy_history_acts_as_a_list_of_messages(workspace):
    session = await compacted_session(workspace)
    resumed = make_session(workspace)
    resumed.resume(session.id)
    log = resumed.history
    expected = list(session.history)
    assert len(log) == len(expected)
    assert log[0].text() == "request 0" and log[-1].text() == "after"
    assert [m.text() for m in log[1:3]] == [m.text() for m in expected[1:3]]
    assert [m.text() for m in reversed(log)] == [m.text() for m in reversed(expected)]
    assert log == expected and not (log != expected)
    assert log[2] in log and log.index(log[2]) == 2 and log.count(log[2]) == 1
    assert [m.text() for m in log + []] == [m.text() for m in expected]
    assert [m.text() for m in [] + log] == [m.text() for m in expected]
    assert all(isinstance(m, Message) for m in pickle.loads(pickle.dumps(log)))
    assert all(isinstance(m, Message) for m in log.copy())
    assert "RawMessage" not in repr(log)


async def test_fork_of_a_resumed_session_carries_the_whole_history(workspace):
    session = await compacted_session(workspace)
    resumed = make_session(workspace)
    resumed.resume(session.id)
    child = resumed.fork()
    saved = SessionStore(workspace).load(child.id)
    assert [m["parts"][0]["text"] for m in saved["history"]] == [m.text() or m.parts[0].model_dump().get("text")
                                                                  for m in session.history]
    assert len(saved["transcript"]) == len(session.transcript)


async def test_a_corrupt_unread_line_is_one_line_when_read_and_the_file_is_left(workspace):
    session = await compacted_session(workspace)
    path = SessionStore(workspace).journal_path(session.id)
    lines = path.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"t":"msg","to":"history"'))
    lines[at] = lines[at][:60] + b"#" + lines[at][61:]
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    resumed = make_session(workspace)
    resumed.resume(session.id)  # the next request does not need that line
    with pytest.raises(UserError) as caught:
        [m.text() for m in resumed.history]
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and f"line {at + 1}" in message
    assert "left as it is" in message and path.read_bytes() == before
