"""GET sessions, sessions/<id>, status: read from real session documents (SessionStore)."""

from __future__ import annotations

import json
import os

from crystal_kernel.core.messages import Message, TextPart, ToolCallPart, ToolResultPart, dump_transcript
from crystal_kernel.host.store import SessionStore


def write_session(root, session_id="20261130-050000-abc123", topic="Fix the parser", **extra):
    transcript = [
        Message.user_text("Please fix the parser"),
        Message(role="assistant", parts=[TextPart(text="Reading it."),
                                         ToolCallPart(id="c1", name="read", arguments={"path": "p.py"})]),
        Message(role="user", parts=[ToolResultPart(call_id="c1", name="read", ok=True, text="x = 1")]),
        Message(role="assistant", parts=[TextPart(text="Done: the parser is fixed.")]),
    ]
    doc = {"version": 1, "id": session_id, "created": "2026-11-30T05:00:00+00:00",
           "updated": extra.pop("updated", "2026-11-30T05:10:00+00:00"), "topic": topic,
           "mode": "work", "approval": "edit", "provider": "openai", "model": "gpt-test", "turns": 1,
           "transcript": dump_transcript(transcript), "history": dump_transcript(transcript),
           "usage": {"inputTokens": 120, "outputTokens": 30}, **extra}
    SessionStore(root).save(doc)
    return doc


def test_sessions_list_shows_id_topic_turns_tokens(api, jp_root_dir):
    write_session(jp_root_dir)
    write_session(jp_root_dir, "20261130-060000-def456", topic=None, updated="2026-11-30T06:00:00+00:00")
    status, data = api("GET", "sessions")
    assert status == 200
    assert [s["id"] for s in data["sessions"]] == ["20261130-060000-def456", "20261130-050000-abc123"]
    first = data["sessions"][1]
    assert first["topic"] == "Fix the parser" and first["turns"] == 1 and first["tokens"] == 150


def test_sessions_list_is_empty_without_a_sessions_folder(api, jp_root_dir):
    status, data = api("GET", "sessions")
    assert status == 200 and data["sessions"] == []
    assert data["workspace"] == str(jp_root_dir.resolve())


def test_session_transcript_in_reading_form(api, jp_root_dir):
    write_session(jp_root_dir)
    status, data = api("GET", "sessions", "20261130-050000-abc123")
    assert status == 200
    assert data["topic"] == "Fix the parser" and data["mode"] == "work" and data["model"] == "gpt-test"
    kinds = [[p["kind"] for p in m["parts"]] for m in data["messages"]]
    assert kinds == [["text"], ["text", "tool_call"], ["tool_result"], ["text"]]
    assert data["messages"][1]["parts"][1] == {"kind": "tool_call", "id": "c1", "name": "read",
                                               "arguments": '{"path": "p.py"}'}
    assert data["messages"][3]["parts"][0]["text"] == "Done: the parser is fixed."


def test_session_transcript_cuts_huge_text(api, jp_root_dir):
    doc = write_session(jp_root_dir)
    doc["history"][0]["parts"][0]["text"] = "y" * 50_000
    SessionStore(jp_root_dir).save(doc)
    status, data = api("GET", "sessions", doc["id"])
    text = data["messages"][0]["parts"][0]["text"]
    assert status == 200 and len(text) < 21_000 and "more characters not shown" in text


def test_unknown_session_is_404_with_json_error(api):
    status, data = api("GET", "sessions", "20990101-000000-ffffff")
    assert status == 404 and "No session" in data["error"]


def test_bad_session_ids_are_400(api):
    for bad in ("..", ".hidden", "a b", "x" * 200):
        status, data = api("GET", "sessions", bad)
        assert status == 400, bad
        assert "not a valid session id" in data["error"]


def test_encoded_traversal_never_leaves_the_root(api, jp_root_dir, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"id": "secret", "transcript": [], "topic": "SECRET"}))
    for bad in ("../../secret", "..%2F..%2Fsecret", "%2e%2e"):
        status, data = api("GET", "sessions", bad)
        assert status in (400, 404), bad
        assert "SECRET" not in json.dumps(data)


def test_symlinked_session_document_outside_root_is_refused(api, jp_root_dir, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"id": "linked", "topic": "SECRET", "transcript": []}))
    folder = jp_root_dir / ".crystal" / "sessions"
    folder.mkdir(parents=True)
    os.symlink(outside, folder / "linked.json")
    status, data = api("GET", "sessions", "linked")
    assert status == 400 and "outside the server's root" in data["error"]


def test_corrupt_session_document_is_400_and_left_alone(api, jp_root_dir):
    folder = jp_root_dir / ".crystal" / "sessions"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{not json")
    status, data = api("GET", "sessions", "broken")
    assert status == 400 and "not valid JSON" in data["error"]
    assert (folder / "broken.json").read_text() == "{not json"
    # The listing skips it instead of failing.
    assert api("GET", "sessions")[1]["sessions"] == []


def test_workspace_argument_picks_a_folder_under_the_root(api, jp_root_dir):
    sub = jp_root_dir / "project"
    sub.mkdir()
    write_session(sub, "20261130-070000-aaaaaa")
    status, data = api("GET", "sessions", params={"workspace": "project"})
    assert status == 200 and [s["id"] for s in data["sessions"]] == ["20261130-070000-aaaaaa"]
    # Without the argument, the root's list includes the Crystal folders under it.
    assert [(s["id"], s["workspace"]) for s in api("GET", "sessions")[1]["sessions"]] == [
        ("20261130-070000-aaaaaa", "project")]


def test_workspace_outside_the_root_is_400(api, jp_root_dir):
    for bad in ("..", "../..", "/etc", "project/../../x"):
        status, data = api("GET", "sessions", params={"workspace": bad})
        assert status == 400, bad
        assert "error" in data


def test_status_reads_mode_approval_model_and_prompt_set(api, jp_root_dir):
    write_session(jp_root_dir)
    status, data = api("GET", "status", params={"session": "20261130-050000-abc123"})
    assert status == 200
    assert (data["mode"], data["approval"], data["provider"], data["model"], data["promptSet"]) == (
        "work", "edit", "openai", "gpt-test", "default")


def test_status_needs_a_valid_session(api):
    assert api("GET", "status")[0] == 400
    assert api("GET", "status", params={"session": "../x"})[0] == 400
    assert api("GET", "status", params={"session": "nope"})[0] == 404
