"""The six approval modes of DESIGN.md across read, write, execute, outside and external
calls, through the real turn loop, real tools and real files.

Without a person "ask" resolves to deny (SPEC §11 crystal run); with one, the person is
asked and the call runs. In review mode the scripted provider also plays the reviewer,
which answers risk low / authorization medium for every call: the host floors (REV-2)
then decide which of those the reviewer may allow.
"""

from __future__ import annotations

import pytest

from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import text_reply, tool_reply

from .conftest import Person, collect, make_session, verdict

KINDS = ("read", "write", "execute", "outside", "external")

# mode -> outcome per kind when nobody is present: (final outcome, decided by).
ALLOW_HOST = ("allow", "host")
ASK_DENIED = ("deny", "host")
TABLE = {
    "plan": [ALLOW_HOST, ASK_DENIED, ASK_DENIED, ASK_DENIED, ASK_DENIED],
    "default": [ALLOW_HOST, ASK_DENIED, ASK_DENIED, ASK_DENIED, ASK_DENIED],
    "edit": [ALLOW_HOST, ALLOW_HOST, ASK_DENIED, ASK_DENIED, ASK_DENIED],
    # Reviewer: low risk, medium authorization. Floors: write/external low, execute
    # medium, outside high; REV-1 allows only low risk at medium authorization.
    "review": [ALLOW_HOST, ("allow", "reviewer"), ASK_DENIED, ASK_DENIED, ("allow", "reviewer")],
    "audit": [ALLOW_HOST, ASK_DENIED, ASK_DENIED, ASK_DENIED, ASK_DENIED],
    "full": [ALLOW_HOST, ALLOW_HOST, ALLOW_HOST, ALLOW_HOST, ALLOW_HOST],
}


def call_for(kind, workspace, outside):
    return {
        "read": ("read", {"path": "a.txt"}),
        "write": ("write", {"path": "new.txt", "content": "written\n"}),
        "execute": ("bash", {"command": "echo ran > ran.txt"}),
        "outside": ("write", {"path": str(outside / "o.txt"), "content": "outside\n"}),
        "external": ("shout", {"text": "hi"}),
    }[kind]


def effect(kind, workspace, outside, result):
    """Whether the call really ran, judged by what it left behind."""
    return {
        "read": result.ok and "alpha" in result.text,
        "write": (workspace / "new.txt").exists(),
        "execute": (workspace / "ran.txt").exists(),
        "outside": (outside / "o.txt").exists(),
        "external": result.ok and "HI" in result.text,
    }[kind]


def setup(workspace, tmp_path, mode, kind, person):
    (workspace / "a.txt").write_text("alpha\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    name, args = call_for(kind, workspace, outside)
    replies = [tool_reply([(name, args)])]
    if mode in ("review", "audit") and kind != "read":
        replies.append(verdict("low", "medium"))
    replies.append(text_reply("done"))
    session = make_session(workspace, mode, replies, person=person, mode="work")
    # /access add: the outside folder is writable, so an allowed call succeeds there.
    session.access.add(outside, "rw")
    return session, outside


@pytest.mark.parametrize("mode", list(TABLE))
@pytest.mark.parametrize("kind", KINDS)
async def test_mode_table_without_a_person(workspace, tmp_path, exec_tool, mode, kind):
    session, outside = setup(workspace, tmp_path, mode, kind, person=False)
    events = await collect(run_turn(session, "please do it"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    expected = TABLE[mode][KINDS.index(kind)]
    assert (approvals[-1].outcome, approvals[-1].by) == expected, [a.to_json() for a in approvals]
    assert effect(kind, workspace, outside, result) == (expected[0] == "allow")
    if expected == ASK_DENIED:
        assert [a.outcome for a in approvals] == ["ask", "deny"]
        assert "No person is present" in result.text
    # The reviewer was consulted exactly for the non-read calls of review and audit.
    reviews = [r for r in session.provider.requests if r.purpose == "review"]
    assert len(reviews) == (1 if mode in ("review", "audit") and kind != "read" else 0)
    assert session.audit[-1]["outcome"] == expected[0]


@pytest.mark.parametrize("mode", list(TABLE))
@pytest.mark.parametrize("kind", KINDS)
async def test_mode_table_with_a_person_who_allows(workspace, tmp_path, exec_tool, mode, kind):
    session, outside = setup(workspace, tmp_path, mode, kind, person=True)
    person = Person(PersonDecision(outcome="allow_once"))
    events = await collect(run_turn(session, "please do it", person))
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    expected = TABLE[mode][KINDS.index(kind)]
    asked = expected == ASK_DENIED
    assert len(person.requests) == (1 if asked else 0)
    assert effect(kind, workspace, outside, result)
    last = [e for e in events if isinstance(e, ApprovalEvent)][-1]
    assert (last.outcome, last.by) == (("allow", "person") if asked else expected)
    if asked and mode in ("review", "audit"):
        # The person sees the reviewer's classification (audit) or why it asked (review).
        shown = person.requests[0].verdict
        assert shown.risk_level == "low" and shown.user_authorization == "medium"
        assert shown.effective_risk in ("medium", "high", "low")


async def test_audit_shows_classification_and_asks_even_when_reviewer_would_allow(workspace):
    session = make_session(workspace, "audit", [
        tool_reply([("write", {"path": "n.txt", "content": "1"})]),
        verdict("low", "high", rationale="The user asked for this file."),
        text_reply("done"),
    ], person=True)
    person = Person(PersonDecision(outcome="deny", reason="not now"))
    events = await collect(run_turn(session, "write n.txt", person))
    request = person.requests[0]
    assert request.verdict.outcome == "allow" and "asked for this file" in request.verdict.rationale
    assert (request.risk, request.authority) == ("write", "workspace")
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert [(a.outcome, a.by) for a in approvals] == [("ask", "host"), ("deny", "person")]
    assert approvals[0].verdict.rationale == "The user asked for this file."
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert not result.ok and "not now" in result.text
    assert not (workspace / "n.txt").exists()
