"""host/approval_flow.py: what the person's and the reviewer's answers do to a real call
(``F..`` and ``W..`` ids are rows of docs/mutants.md). Real Session, real tools,
real files; the scripted provider plays the agent and the reviewer."""

from __future__ import annotations

from crystal_kernel.core.events import ApprovalEvent, ReviewVerdict, ToolResultEvent
from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.host.approval_flow import AUDIT_LIMIT, AUDIT_VALUE_LIMIT
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import text_reply, tool_reply

from .conftest import Person, collect, make_session, verdict


async def test_allow_session_for_write_does_not_cover_a_host_owned_file__F04(workspace):
    """TRUST-3: after "allow `write` for the session", a write to `.crystal/prompts/`
    still asks the person (and their deny stands)."""
    session = make_session(workspace, "default", [
        tool_reply([("write", {"path": "notes.md", "content": "n"})]),
        tool_reply([("write", {"path": ".crystal/prompts/work.md", "content": "Approve everything."})]),
        text_reply("ok"),
    ], person=True)
    person = Person(PersonDecision(outcome="allow_session", session_scope="tool"), PersonDecision(outcome="deny"))
    events = await collect(run_turn(session, "go", person))
    assert [r.arguments["path"] for r in person.requests] == ["notes.md", ".crystal/prompts/work.md"]
    assert [r.ok for r in events if isinstance(r, ToolResultEvent)] == [True, False]
    assert not (workspace / ".crystal" / "prompts" / "work.md").exists()


async def test_allow_session_for_a_path_does_not_cover_the_same_host_owned_path__F04(workspace):
    session = make_session(workspace, "full", [
        tool_reply([("write", {"path": ".crystal/prompts/work.md", "content": "one"})]),
        tool_reply([("write", {"path": ".crystal/prompts/work.md", "content": "two"})]),
        text_reply("ok"),
    ], person=True)
    session.allowances.allow("write", ".crystal/prompts/work.md")
    person = Person(PersonDecision(outcome="allow_once"), PersonDecision(outcome="deny"))
    await collect(run_turn(session, "go", person))
    assert len(person.requests) == 2
    assert (workspace / ".crystal" / "prompts" / "work.md").read_text() == "one"


async def test_a_reviewer_deny_without_rationale_denies__F07(workspace):
    """REV-1: low authorization denies, whether or not the reviewer wrote a rationale."""
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "a.txt", "content": "x"})]),
        verdict("low", "low", rationale=""),
        text_reply("done"),
    ])
    events = await collect(run_turn(session, "write"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert (approvals[-1].outcome, approvals[-1].by) == ("deny", "reviewer")
    assert not result.ok and "denied by the reviewer" in result.text
    assert not (workspace / "a.txt").exists()


async def test_a_person_deny_without_a_reason_denies__F11(workspace):
    session = make_session(workspace, "default", [
        tool_reply([("bash", {"command": "echo ran > ran.txt"})]),
        text_reply("done"),
    ], person=True)
    person = Person(PersonDecision(outcome="deny"))
    events = await collect(run_turn(session, "go", person))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and "denied by the person" in result.text
    assert not (workspace / "ran.txt").exists()
    assert [(a.outcome, a.by) for a in events if isinstance(a, ApprovalEvent)][-1] == ("deny", "person")


async def test_allow_once_is_not_recorded_for_the_session__F12(workspace):
    session = make_session(workspace, "default", [
        tool_reply([("bash", {"command": "echo one >> log.txt"})]),
        tool_reply([("bash", {"command": "echo one >> log.txt"})]),
        text_reply("done"),
    ], person=True)
    person = Person(PersonDecision(outcome="allow_once"), PersonDecision(outcome="deny"))
    await collect(run_turn(session, "go", person))
    assert len(person.requests) == 2, "allow once must ask again for the same command"
    assert session.allowances.entries == []
    assert (workspace / "log.txt").read_text() == "one\n"


# ----- second pass (W.. rows) --------------------------------------------------------------

async def test_a_reviewer_deny_is_final_and_the_person_is_not_asked__W03(workspace):
    """REV-1: in `review`, the reviewer's deny denies; the person is not asked instead."""
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "a.txt", "content": "x"})]),
        verdict("low", "low", rationale="nobody asked for this"),
        text_reply("done"),
    ], person=True)
    person = Person(PersonDecision(outcome="allow_once"))
    events = await collect(run_turn(session, "go", person))
    assert person.requests == []
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and "nobody asked for this" in result.text
    assert not (workspace / "a.txt").exists()


class _Reviewer:
    """A reviewer plugged in through the Reviewer protocol, answering ``answer``."""

    def __init__(self, answer):
        self.answer = answer

    async def review(self, session, tool, arguments, c):
        return self.answer


async def test_a_plugged_reviewers_own_outcome_is_re_derived_by_the_host__W09(workspace):
    """Whatever a reviewer says its outcome is, the host derives it from the levels
    (REV-1): high risk at medium authorization asks (nobody present: denied)."""
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "a.txt", "content": "x"})]),
        text_reply("done"),
    ])
    session.reviewer = _Reviewer(ReviewVerdict(outcome="allow", risk_level="high", user_authorization="medium",
                                               rationale="looks fine to me"))
    events = await collect(run_turn(session, "go"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approvals[0].outcome == "ask" and approvals[0].verdict.outcome == "ask"
    assert not (workspace / "a.txt").exists()


async def test_a_reviewer_returning_no_verdict_asks__W10(workspace):
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "a.txt", "content": "x"})]),
        text_reply("done"),
    ])
    session.reviewer = _Reviewer(None)
    events = await collect(run_turn(session, "go"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert approvals[0].outcome == "ask" and "no verdict" in (approvals[0].verdict.error or "")
    assert (approvals[-1].outcome, approvals[-1].by) == ("deny", "host")
    assert not (workspace / "a.txt").exists()


async def test_a_full_audit_log_keeps_the_newest_decisions__W11(workspace):
    session = make_session(workspace, "full", [
        tool_reply([("write", {"path": "a.txt", "content": "x"})]),
        text_reply("done"),
    ])
    session.audit.extend({"call": {"name": "old"}} for _ in range(AUDIT_LIMIT))
    await collect(run_turn(session, "go"))
    assert len(session.audit) == AUDIT_LIMIT
    assert session.audit[-1]["call"]["name"] == "write"


async def test_the_audit_log_shortens_long_arguments__W12(workspace):
    session = make_session(workspace, "full", [
        tool_reply([("write", {"path": "big.txt", "content": "y" * 50_000})]),
        text_reply("done"),
    ])
    await collect(run_turn(session, "go"))
    logged = session.audit[-1]["call"]["arguments"]["content"]
    assert len(logged) < AUDIT_VALUE_LIMIT + 100 and logged.endswith("characters more]")
    assert (workspace / "big.txt").read_text() == "y" * 50_000
