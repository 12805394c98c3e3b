"""Sessions stored as append-only journals (SPEC §11 Sessions): a turn appends
its lines, the old single-document format is still read, unknown fields survive, a
corrupt line is reported and the file left as it is, a torn last line is dropped."""

from __future__ import annotations

import gc
import json

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.session import Session
from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply


def make_session(workspace, replies):
    config = load_config(overrides={"approval": "full", "topicNaming": False})
    return Session(workspace=workspace, config=config, provider=ScriptedProvider(replies), person_present=False)


async def turn(session, prompt):
    events = [e async for e in run_turn(session, prompt)]
    assert events[-1].stop_reason == "end_turn", events
    return events


def lines_of(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def user_texts(session):
    return [m.text() for m in session.history if m.role == "user" and m.text()]


async def test_a_turn_appends_to_the_journal_and_never_rewrites_it(workspace):
    session = make_session(workspace, [text_reply("one"), tool_reply([("read", {"path": "a.txt"})]),
                                       text_reply("two")])
    (workspace / "a.txt").write_text("hello\n")
    await turn(session, "first")
    path = SessionStore(workspace).journal_path(session.id)
    before, inode = path.read_bytes(), path.stat().st_ino
    await turn(session, "second")
    after = path.read_bytes()
    # Appended: the first turn's bytes are still there, in the same file.
    assert after.startswith(before) and path.stat().st_ino == inode
    added = [json.loads(line) for line in after[len(before):].decode().splitlines()]
    # Each save ends with the Home key's signature (TRUST-5, host/journal_sign.py).
    assert [line["t"] for line in added] == ["msg", "msg", "msg", "msg", "add", "add", "set", "sig"]
    assert [line["k"] for line in added if line["t"] == "add"] == ["audit", "usage.turns"]
    assert [line["to"] for line in added if line["t"] == "msg"] == ["both"] * 4
    assert added[-2]["k"]["turns"] == 2 and "updated" in added[-2]["k"]
    # The message lines are written once each, not once per list.
    assert sum(1 for line in lines_of(path) if line["t"] == "msg") == 6
    again = make_session(workspace, [])
    again.resume(session.id)
    assert user_texts(again) == ["first", "second"] and again.turns == 2
    assert [m.model_dump() for m in again.transcript] == [m.model_dump() for m in session.transcript]
    assert again.transcript[0] is again.history[0]  # one object for both lists
    assert [s.id for s in SessionStore(workspace).list()] == [session.id]
    assert SessionStore(workspace).list()[0].turns == 2


async def test_an_old_single_document_session_is_read_and_continued(workspace):
    """The older format (<id>.json, one document) resumes; unknown fields survive the
    first save, which writes the journal and removes the old document."""
    folder = workspace / ".crystal" / "sessions"
    folder.mkdir(parents=True)
    message = {"role": "user", "parts": [{"kind": "text", "text": "from the old days", "tone": "kept"}],
               "future": {"x": 1}}
    answer = {"role": "assistant", "parts": [{"kind": "text", "text": "old answer"}]}
    doc = {"version": 1, "id": "old-1", "created": "2026-01-01T00:00:00+00:00",
           "updated": "2026-01-01T00:00:00+00:00", "topic": "Old topic", "mode": "work", "turns": 1,
           "transcript": [message, answer], "history": [message, answer], "todos": [],
           "usage": {"inputTokens": 3, "outputTokens": 4, "turns": [{"inputTokens": 3, "outputTokens": 4}]},
           "audit": [], "directories": [], "pluginData": {"keep": True}}
    (folder / "old-1.json").write_text(json.dumps(doc))
    assert [(s.id, s.topic, s.turns) for s in SessionStore(workspace).list()] == [("old-1", "Old topic", 1)]
    session = make_session(workspace, [text_reply("new answer")])
    session.resume("old-1")
    await turn(session, "and now")
    assert not (folder / "old-1.json").exists()
    saved = SessionStore(workspace).load("old-1")
    assert saved["pluginData"] == {"keep": True} and saved["topic"] == "Old topic" and saved["turns"] == 2
    assert saved["history"][0]["future"] == {"x": 1} and saved["history"][0]["parts"][0]["tone"] == "kept"
    assert [m["parts"][0]["text"] for m in saved["history"]] == [
        "from the old days", "old answer", "and now", "new answer"]
    assert saved["usage"]["inputTokens"] == 13 and len(saved["usage"]["turns"]) == 2


async def test_unknown_lines_and_fields_survive_appends_and_snapshots(workspace):
    session = make_session(workspace, [text_reply("one"), text_reply("two"), text_reply("three")])
    await turn(session, "first")
    path = SessionStore(workspace).journal_path(session.id)
    lines = path.read_text().splitlines()
    msg = json.loads(lines[1])
    msg["m"]["parts"][0]["lang"] = "en"
    msg["extra"] = 1
    lines[1] = json.dumps(msg)
    lines.append(json.dumps({"t": "bookmark", "at": 1, "label": "a newer version wrote this"}))
    path.write_text("\n".join(lines) + "\n")
    resumed = make_session(workspace, [text_reply("two"), text_reply("three")])
    resumed.resume(session.id)
    await turn(resumed, "second")
    # A snapshot (what compaction writes) keeps them too.
    resumed.transcript[:] = resumed.transcript[2:]
    resumed.save()
    written = lines_of(path)
    assert written[0]["t"] == "snapshot"
    assert {"t": "bookmark", "at": 1, "label": "a newer version wrote this"} in written
    doc = SessionStore(workspace).load(session.id)
    assert doc["history"][0]["parts"][0]["lang"] == "en"
    assert [m["parts"][0]["text"] for m in doc["transcript"]] == ["second", "two"]
    assert [m["parts"][0]["text"] for m in doc["history"]] == ["first", "one", "second", "two"]
    again = make_session(workspace, [text_reply("three")])
    again.resume(session.id)
    await turn(again, "third")
    assert [m.text() for m in again.transcript] == ["second", "two", "third", "three"]
    assert SessionStore(workspace).load(session.id)["journalUnknownLines"] == [
        {"t": "bookmark", "at": 1, "label": "a newer version wrote this"}]


@pytest.mark.parametrize("damage", ["not json", '{"t": "msg", "m": ', "[1, 2]", "caf\xe9".encode("latin-1")])
async def test_a_corrupt_line_in_the_middle_is_one_line_and_the_file_is_left(workspace, damage):
    session = make_session(workspace, [text_reply("one"), text_reply("two")])
    await turn(session, "first")
    await turn(session, "second")
    path = SessionStore(workspace).journal_path(session.id)
    raw = path.read_bytes().split(b"\n")
    raw[2] = damage if isinstance(damage, bytes) else damage.encode()
    path.write_bytes(b"\n".join(raw))
    before = path.read_bytes()
    other = make_session(workspace, [text_reply("never")])
    with pytest.raises(UserError) as caught:
        other.resume(session.id)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message and "line 3" in message and "left as it is" in message
    assert path.read_bytes() == before and other.transcript == []
    assert gc.isenabled()  # a failed resume leaves the collector on (core/gc_pause.py)


async def test_a_torn_last_line_is_dropped_and_cut_before_the_next_append(workspace):
    session = make_session(workspace, [text_reply("one")])
    await turn(session, "first")
    path = SessionStore(workspace).journal_path(session.id)
    complete = path.read_bytes()
    with open(path, "ab") as handle:  # what a crash halfway through a write leaves
        handle.write(b'{"t":"msg","to":"both","m":{"role":"user","parts":[{"kind":"text","text":"lo')
    resumed = make_session(workspace, [text_reply("two")])
    resumed.resume(session.id)
    assert user_texts(resumed) == ["first"]
    await turn(resumed, "second")
    data = path.read_bytes()
    assert data.startswith(complete) and data.endswith(b"\n") and b'"text":"lo' not in data
    again = make_session(workspace, [])
    again.resume(session.id)
    assert user_texts(again) == ["first", "second"]


async def test_a_journal_another_process_wrote_meanwhile_is_replaced_whole(workspace):
    """Two sessions on one id (two fronts): a save never appends to a file it did not
    read last; the last writer's whole session is on disk, readable."""
    first = make_session(workspace, [text_reply("one"), text_reply("three")])
    await turn(first, "first")
    second = make_session(workspace, [text_reply("two")])
    second.resume(first.id)
    await turn(second, "second")
    await turn(first, "third")
    doc = SessionStore(workspace).load(first.id)
    assert [m["parts"][0]["text"] for m in doc["history"]] == ["first", "one", "third", "three"]


async def test_fork_and_resume_read_the_journal(workspace):
    session = make_session(workspace, [text_reply("one")])
    await turn(session, "first")
    child = session.fork()
    store = SessionStore(workspace)
    assert store.journal_path(child.id).exists()
    assert [m["parts"][0]["text"] for m in store.load(child.id)["history"]] == ["first", "one"]
    assert store.load(child.id)["forkedFrom"] == session.id
    assert {s.id for s in store.list()} == {session.id, child.id}


async def test_a_save_that_fails_halfway_leaves_the_journal_as_it_was(workspace):
    """A write the disk refuses partway (file size limit: the first bytes are written,
    then EFBIG) is cut back: no half line stays behind, the turn says it was not saved."""
    import resource

    session = make_session(workspace, [text_reply("one"), text_reply("two " * 5000)])
    await turn(session, "first")
    path = SessionStore(workspace).journal_path(session.id)
    before = path.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100, hard))
    try:
        events = [e async for e in run_turn(session, "second")]
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert events[-1].stop_reason == "error"
    assert path.read_bytes() == before
    # The next save, with room again, writes the whole session (a snapshot).
    session.provider.add(text_reply("three"))
    await turn(session, "third")
    again = make_session(workspace, [])
    again.resume(session.id)
    assert user_texts(again) == ["first", "second", "third"]


async def test_resume_builds_a_long_sessions_messages_without_a_garbage_collection(workspace):
    """docs/benchmarks.md: every message resume builds stays alive, so the collections its objects
    started found nothing and, as the heap grew, came again over all of it (a 50 MiB
    session resumed in twice the time). The collector is paused while the session is
    read and on again after it."""
    session = make_session(workspace, [text_reply("one")])
    await turn(session, "first")
    for n in range(400):  # what turns append: 1,600 more messages
        call = Message(role="assistant", parts=[ToolCallPart(id=f"c{n}", name="read", arguments={"path": "a"})])
        result = Message(role="user", parts=[ToolResultPart(call_id=f"c{n}", name="read", ok=True, text="x" * 200)])
        for message in (Message.user_text(f"ask {n}"), call, result, Message(role="assistant",
                                                                             parts=[TextPart(text="ok")])):
            session.transcript.append(message)
            session.history.append(message)
    session.save()
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    again = make_session(workspace, [])
    gc.callbacks.append(count)
    try:
        again.resume(session.id)
    finally:
        gc.callbacks.remove(count)
    assert len(again.transcript) == len(session.transcript) == 1602
    # At most the one collection its end lets the collector make (it was off meanwhile).
    assert len(collections) <= 1 and gc.isenabled(), collections
