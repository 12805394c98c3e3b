"""A person's answers (allow once, allow for the session by tool / exact pattern / glob,
deny with a reason), /approval switching, and the audit log in the session document."""

from __future__ import annotations

from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.host.commands import run_command
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.store import SessionStore
from crystal_kernel.testing.scripted import text_reply, tool_reply

from .conftest import Person, collect, make_session, verdict


async def test_allow_session_exact_pattern_never_widens(workspace):
    (workspace / "build").mkdir()
    session = make_session(workspace, "default", [
        tool_reply([("bash", {"command": "rm -rf build/*"})]),
        tool_reply([("bash", {"command": "rm -rf build/*"})]),
        tool_reply([("bash", {"command": "rm -rf /tmp/nothing-here-*"})]),
        text_reply("ok"),
    ], person=True)
    person = Person(PersonDecision(outcome="allow_session"), PersonDecision(outcome="deny", reason="too wide"))
    events = await collect(run_turn(session, "clean", person))
    # Asked for the first call, not the identical second, and again for the different third.
    assert [r.arguments["command"] for r in person.requests] == ["rm -rf build/*", "rm -rf /tmp/nothing-here-*"]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.ok for r in results] == [True, True, False]
    assert "denied by the person" in results[2].text and "too wide" in results[2].text


async def test_allow_session_for_the_whole_tool_or_a_glob(workspace):
    session = make_session(workspace, "default", [
        tool_reply([("bash", {"command": "echo one"})]),
        tool_reply([("bash", {"command": "echo two"})]),
        tool_reply([("write", {"path": "src/a.py", "content": "a"})]),
        tool_reply([("write", {"path": "src/b.py", "content": "b"})]),
        tool_reply([("write", {"path": "README.md", "content": "r"})]),
        text_reply("ok"),
    ], person=True)
    person = Person(PersonDecision(outcome="allow_session", session_scope="tool"),
                    PersonDecision(outcome="allow_session", session_scope="src/*"),
                    PersonDecision(outcome="allow_once"))
    events = await collect(run_turn(session, "go", person))
    assert [r.tool for r in person.requests] == ["bash", "write", "write"]
    assert person.requests[2].arguments["path"] == "README.md"
    assert all(e.ok for e in events if isinstance(e, ToolResultEvent))


async def test_audit_reviews_even_calls_allowed_for_the_session(workspace):
    session = make_session(workspace, "audit", [
        tool_reply([("write", {"path": "a.txt", "content": "1"})]),
        verdict("low", "high"),
        tool_reply([("write", {"path": "a.txt", "content": "2"})]),
        verdict("low", "high", rationale="second"),
        text_reply("ok"),
    ], person=True)
    person = Person(PersonDecision(outcome="allow_session"))
    events = await collect(run_turn(session, "write a.txt twice", person))
    assert len(person.requests) == 1
    last = [e for e in events if isinstance(e, ApprovalEvent)][-1]
    assert (last.outcome, last.by, last.reason) == ("allow", "person", "allowed for this session")
    assert last.verdict.rationale == "second"
    assert (workspace / "a.txt").read_text() == "2"


async def test_audit_log_is_saved_with_the_session(workspace):
    session = make_session(workspace, "review", [
        tool_reply([("read", {"path": "a.txt"}), ("bash", {"command": "ls"})]),
        verdict("medium", "low", rationale="Nobody asked to list files."),
        text_reply("ok"),
    ])
    (workspace / "a.txt").write_text("x")
    await collect(run_turn(session, "read a.txt"))
    doc = SessionStore(workspace).load(session.id)
    read_entry, bash_entry = doc["audit"]
    assert read_entry["call"]["name"] == "read" and (read_entry["outcome"], read_entry["by"]) == ("allow", "host")
    assert read_entry["classification"] == {"risk": "read", "authority": "workspace", "external": False,
                                             "level": "low"}
    assert bash_entry["call"]["arguments"] == {"command": "ls"}
    assert bash_entry["classification"]["risk"] == "execute"
    assert bash_entry["verdict"]["rationale"] == "Nobody asked to list files."
    assert (bash_entry["outcome"], bash_entry["by"], bash_entry["mode"]) == ("deny", "reviewer", "review")
    assert bash_entry["time"]


async def test_approval_command_switches_mode_and_refreshes_the_system_text(workspace):
    session = make_session(workspace, "default", [
        tool_reply([("write", {"path": "x.txt", "content": "x"})]),
        text_reply("ok"),
    ])
    assert "Approval mode: default" in session.system_text()
    result = await run_command(session, "/approval edit")
    assert result.text == "Approval mode is now edit. Saved as your default in ~/.crystal/config.json."
    assert "Approval mode: edit" in session.system_text()  # PH-12
    events = await collect(run_turn(session, "write x"))
    assert next(e for e in events if isinstance(e, ApprovalEvent)).by == "host"
    assert (workspace / "x.txt").exists()
    assert "Approval mode: edit" in session.provider.requests[0].system


async def test_long_arguments_are_shortened_in_the_audit_log(workspace):
    big = "y" * 10_000
    session = make_session(workspace, "full", [tool_reply([("write", {"path": "big.txt", "content": big})]),
                                               text_reply("ok")])
    await collect(run_turn(session, "write big"))
    logged = session.audit[-1]["call"]["arguments"]["content"]
    assert len(logged) < 2_100 and "characters more" in logged
    assert (workspace / "big.txt").read_text() == big
