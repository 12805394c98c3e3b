"""The reviewing model (REV-1 … REV-3): every cell of the outcome table, the host floors,
forbidden rules, and reviewers that fail. The scripted provider plays both the agent and
the reviewer; the review request is a separate, tool-less request."""

from __future__ import annotations

import json

import pytest

from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.host.approval import host_risk_level, review_outcome
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.review import parse_verdict_json
from crystal_kernel.testing.scripted import HANG, Fail, text_reply, tool_reply
from crystal_kernel.tools.base import Authority, Classification, Risk

from .conftest import Person, collect, make_session, verdict

# REV-1: (risk, authorization, harm_unrequested) -> outcome.
REV1 = {
    ("low", "low"): "deny", ("low", "medium"): "allow", ("low", "high"): "allow",
    ("medium", "low"): "deny", ("medium", "medium"): "ask", ("medium", "high"): "allow",
    ("high", "low"): "deny", ("high", "medium"): "ask", ("high", "high"): "allow",
}
CELLS = [(r, a, h) for (r, a) in REV1 for h in (False, True)]


def expected(risk, auth, harm):
    return "deny" if harm else REV1[(risk, auth)]


@pytest.mark.parametrize("risk, auth, harm", CELLS)
def test_rev1_table_derivation(risk, auth, harm):
    assert review_outcome(risk, auth, harm) == expected(risk, auth, harm)


@pytest.mark.parametrize("risk, auth, harm", CELLS)
async def test_rev1_every_cell_through_the_reviewer(workspace, risk, auth, harm):
    """A workspace write has the lowest floor, so the reviewer's levels decide."""
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "f.txt", "content": "x"})]),
        verdict(risk, auth, harm, rationale=f"{risk}/{auth}"),
        text_reply("done"),
    ])
    events = await collect(run_turn(session, "write f.txt"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    outcome = expected(risk, auth, harm)
    if outcome == "ask":  # nobody present: the reviewer's ask becomes the host's deny
        assert [(a.outcome, a.by) for a in approvals] == [("ask", "reviewer"), ("deny", "host")]
    else:
        assert [(a.outcome, a.by) for a in approvals] == [(outcome, "reviewer")]
        assert approvals[0].reason == f"{risk}/{auth}"
    assert approvals[0].verdict.risk_level == risk
    assert approvals[0].verdict.user_authorization == auth
    assert (workspace / "f.txt").exists() == (outcome == "allow")
    entry = session.audit[-1]
    assert entry["verdict"]["rationale"] == f"{risk}/{auth}" and entry["call"]["name"] == "write"
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    if outcome == "deny":
        assert "denied by the reviewer" in result.text and f"{risk}/{auth}" in result.text


def test_host_floor_mapping():
    assert host_risk_level(Classification(Risk.READ)) == "low"
    assert host_risk_level(Classification(Risk.WRITE)) == "low"
    assert host_risk_level(Classification(Risk.READ, external=True)) == "low"
    assert host_risk_level(Classification(Risk.EXECUTE)) == "medium"
    assert host_risk_level(Classification(Risk.WRITE, Authority.OUTSIDE)) == "high"
    assert host_risk_level(Classification(Risk.READ, Authority.OUTSIDE)) == "high"


@pytest.mark.parametrize("auth, outcome", [("medium", "ask"), ("high", "allow")])
async def test_floor_execute_is_at_least_medium(workspace, auth, outcome):
    """REV-2: a reviewer calling a shell command low risk cannot lower the host's floor."""
    session = make_session(workspace, "review", [
        tool_reply([("bash", {"command": "echo hi > out.txt"})]),
        verdict("low", auth),
        text_reply("done"),
    ])
    events = await collect(run_turn(session, "run it"))
    first = next(e for e in events if isinstance(e, ApprovalEvent))
    assert first.outcome == outcome
    assert first.verdict.risk_level == "low" and first.verdict.effective_risk == "medium"
    assert (workspace / "out.txt").exists() == (outcome == "allow")


@pytest.mark.parametrize("auth, outcome", [("medium", "ask"), ("high", "allow")])
async def test_floor_outside_workspace_is_high(workspace, tmp_path, auth, outcome):
    other = tmp_path / "other"
    other.mkdir()
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": str(other / "x.txt"), "content": "x"})]),
        verdict("low", auth),
        text_reply("done"),
    ])
    session.access.add(other, "rw")
    events = await collect(run_turn(session, "write there"))
    first = next(e for e in events if isinstance(e, ApprovalEvent))
    assert first.outcome == outcome and first.verdict.effective_risk == "high"
    assert (other / "x.txt").exists() == (outcome == "allow")


async def test_forbidden_rule_beats_full_and_the_reviewer(workspace):
    for mode in ("full", "review", "edit"):
        session = make_session(workspace, mode, [
            tool_reply([("bash", {"command": "cd sub && rm -rf ."}),
                        ("write", {"path": ".git/config", "content": "x"})]),
            text_reply("ok"),
        ], forbidden=[{"tool": "bash", "pattern": "rm -rf*"}, {"tool": "write", "pattern": "**/.git/**"}])
        events = await collect(run_turn(session, "clean up"))
        approvals = [(e.name, e.outcome, e.by) for e in events if isinstance(e, ApprovalEvent)]
        assert approvals == [("bash", "deny", "policy"), ("write", "deny", "policy")], mode
        # The reviewer was never asked.
        assert [r.purpose for r in session.provider.requests] == ["turn", "turn"]
        result = next(e for e in events if isinstance(e, ToolResultEvent))
        assert "forbidden rule" in result.text and "every approval mode" in result.text
    assert not (workspace / ".git").exists()


@pytest.mark.parametrize("answer", [
    "Looks fine to me!",
    '{"risk_level": "tiny", "user_authorization": "medium"}',
    '{"risk": "low"}',
    "",
])
async def test_garbage_verdict_asks_and_no_person_denies(workspace, answer):
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "g.txt", "content": "x"})]),
        text_reply(answer),
        text_reply("ok"),
    ])
    events = await collect(run_turn(session, "write g.txt"))
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert [(a.outcome, a.by) for a in approvals] == [("ask", "reviewer"), ("deny", "host")]
    assert approvals[0].verdict.error
    assert not (workspace / "g.txt").exists()


async def test_reviewer_timeout_asks_the_person(workspace):
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "t.txt", "content": "x"})]),
        [HANG],
        text_reply("ok"),
    ], person=True)
    session.config.raw = {"reviewTimeoutSeconds": 0.3}
    person = Person(PersonDecision(outcome="allow_once"))
    events = await collect(run_turn(session, "write t.txt", person))
    assert "longer than 0.3 s" in person.requests[0].verdict.error
    approvals = [(e.outcome, e.by) for e in events if isinstance(e, ApprovalEvent)]
    assert approvals == [("ask", "reviewer"), ("allow", "person")]
    assert (workspace / "t.txt").exists()
    assert session.provider.cancelled == 1  # the hung review stream was closed


async def test_reviewer_failure_asks(workspace):
    from crystal_kernel.core.errors import ProviderError

    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "t.txt", "content": "x"})]),
        [Fail(ProviderError("HTTP 500 from the reviewer"))],
        text_reply("ok"),
    ])
    events = await collect(run_turn(session, "write t.txt"))
    first = next(e for e in events if isinstance(e, ApprovalEvent))
    assert first.outcome == "ask" and "HTTP 500 from the reviewer" in first.verdict.error
    assert not (workspace / "t.txt").exists()


async def test_review_request_is_separate_and_carries_ph7_slots(workspace):
    session = make_session(workspace, "review", [
        tool_reply([("bash", {"command": "pytest -q"})]),
        verdict("low", "high"),
        text_reply("ok"),
    ])
    await collect(run_turn(session, "please run the tests"))
    review = session.provider.requests[1]
    assert review.purpose == "review" and review.tools == []
    assert "You are the reviewer" in review.system
    user = review.messages[0].text()
    assert "please run the tests" in user          # conversation
    assert "Tool: bash" in user                     # tool_name
    assert '"command": "pytest -q"' in user         # tool_arguments
    assert "risk execute, authority workspace" in user  # host_risk, host_authority
    assert "floor for your risk_level is medium" in user  # classification_summary
    assert "{{" not in user
    # The review's tokens count in the session, apart from the agent's.
    assert session.usage.by_purpose["review"] == {"inputTokens": 10, "outputTokens": 5}


def test_verdict_parsing_tolerates_fences_and_prose():
    obj = {"risk_level": "low", "user_authorization": "high", "harm_unrequested": False, "rationale": "ok {x}"}
    assert parse_verdict_json("```json\n" + json.dumps(obj) + "\n```") == obj
    assert parse_verdict_json("Here you go: " + json.dumps(obj) + " Hope that helps.") == obj
    assert parse_verdict_json('{"note": 1} then ' + json.dumps(obj)) == obj
    assert parse_verdict_json("no json at all") is None


async def test_harm_unrequested_given_as_text_still_denies(workspace):
    """A reviewer writing harm_unrequested as the string "true" still means harm."""
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "h.txt", "content": "x"})]),
        text_reply('{"risk_level": "low", "user_authorization": "high", "harm_unrequested": "true"}'),
        text_reply("ok"),
    ])
    events = await collect(run_turn(session, "write"))
    assert next(e for e in events if isinstance(e, ApprovalEvent)).outcome == "deny"


async def test_review_model_from_config_is_a_separate_provider(workspace, monkeypatch):
    """reviewModel "openai:gpt-reviewer": the agent stays on its provider while reviews go
    through the real OpenAI adapter to the loopback server."""
    from crystal_kernel.testing.llm_server import LLMServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    reply = {"text": '{"risk_level": "low", "user_authorization": "high", "harm_unrequested": false, '
                     '"rationale": "asked for"}'}
    with LLMServer([reply]) as server:
        session = make_session(workspace, "review", [
            tool_reply([("write", {"path": "r.txt", "content": "x"})]),
            text_reply("done"),
        ], review_model="openai:gpt-reviewer", base_url=server.base_url)
        try:
            events = await collect(run_turn(session, "write r.txt"))
        finally:
            await session.close()
        bodies = server.bodies("chat")
    first = next(e for e in events if isinstance(e, ApprovalEvent))
    assert (first.outcome, first.by, first.reason) == ("allow", "reviewer", "asked for")
    assert [b["model"] for b in bodies] == ["gpt-reviewer"] and not bodies[0].get("tools")
    assert [r.purpose for r in session.provider.requests] == ["turn", "turn"]
    assert session.usage.by_model["gpt-reviewer"] == {"inputTokens": 11, "outputTokens": 7}


async def test_bad_review_model_asks_with_a_reason(workspace):
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "r.txt", "content": "x"})]),
        text_reply("done"),
    ], review_model="nosuch:model", provider="nosuch")
    events = await collect(run_turn(session, "write r.txt"))
    first = next(e for e in events if isinstance(e, ApprovalEvent))
    assert first.outcome == "ask" and "could not be set up" in first.verdict.error


async def test_a_plugged_in_reviewer_cannot_skip_the_floor(workspace):
    """A custom Reviewer that claims "allow" for a low-risk shell command still gets the
    host's outcome: execute is at least medium, so medium authorization asks."""
    from crystal_kernel.core.events import ReviewVerdict

    class Lenient:
        async def review(self, session, tool, arguments, c):
            return ReviewVerdict(outcome="allow", risk_level="low", user_authorization="medium",
                                 harm_unrequested=False, rationale="trust me")

    session = make_session(workspace, "review", [
        tool_reply([("bash", {"command": "echo x > x.txt"})]),
        text_reply("ok"),
    ])
    session.reviewer = Lenient()
    events = await collect(run_turn(session, "go"))
    first = next(e for e in events if isinstance(e, ApprovalEvent))
    assert (first.outcome, first.verdict.effective_risk) == ("ask", "medium")
    assert not (workspace / "x.txt").exists()
