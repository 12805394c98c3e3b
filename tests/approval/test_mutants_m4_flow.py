"""host/approval_flow.py, second hand-mutation pass (``M4-..`` rows of
docs/mutants.md; REV-1, SPEC §13 "Waits"). Real Session, real tools, real files."""

from __future__ import annotations

import asyncio

from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.core.interaction import PersonDecision
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import text_reply, tool_reply

from .conftest import Person, collect, make_session


class _SilentReviewer:
    """A reviewer plugged in through the Reviewer protocol that never answers (a hung
    request with no timeout of its own)."""

    def __init__(self) -> None:
        self.asked = 0

    async def review(self, session, tool, arguments, c):
        self.asked += 1
        await asyncio.Event().wait()


async def test_a_plugged_reviewer_that_never_returns_does_not_hang_the_turn__M4_16(workspace):
    """The host gives up on the reviewer after reviewTimeoutSeconds plus 5 s and asks
    the person, who decides; the turn ends (on the change it waited forever)."""
    session = make_session(workspace, "review", [
        tool_reply([("write", {"path": "a.txt", "content": "x"})]),
        text_reply("done"),
    ], person=True)
    session.config.raw["reviewTimeoutSeconds"] = 0.5
    reviewer = _SilentReviewer()
    session.reviewer = reviewer
    person = Person(PersonDecision(outcome="allow_once"))
    events = await asyncio.wait_for(collect(run_turn(session, "go", person)), 30)
    approvals = [e for e in events if isinstance(e, ApprovalEvent)]
    assert reviewer.asked == 1 and len(person.requests) == 1
    assert approvals[0].outcome == "ask" and "did not answer in time" in (approvals[0].verdict.error or "")
    assert (approvals[-1].outcome, approvals[-1].by) == ("allow", "person")
    assert [e.ok for e in events if isinstance(e, ToolResultEvent)] == [True]
    assert (workspace / "a.txt").read_text() == "x"
