"""SPEC §13 "Waits": the host bounds every wait for a person, for every
front (host/person_deadline.py, applied to each turn's interaction in host/loop.py).
The ACP front is attacked for real in tests/acp/test_acp_person_timeout.py; here a
front that never answers stands in for any other (a test double: it is the front's
behaviour under test, not a part that could run here)."""

from __future__ import annotations

import asyncio
import json

from crystal_kernel.core.interaction import ApprovalRequest, PersonDecision, Question
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.loop import run_turn
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply, tool_reply


class NeverAnswers:
    person_present = True

    def __init__(self) -> None:
        self.asked = 0

    async def ask_approval(self, request: ApprovalRequest) -> PersonDecision:
        self.asked += 1
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def ask_questions(self, questions: list[Question]) -> list[list[str]] | None:
        self.asked += 1
        await asyncio.Event().wait()
        return None


async def run(workspace, private_home, seconds: float) -> tuple[NeverAnswers, list, ScriptedProvider]:
    (private_home / "config.json").write_text(json.dumps({"personTimeoutSeconds": seconds}))
    provider = ScriptedProvider([tool_reply([("bash", {"command": "echo hi > b.txt"})]), text_reply("ok")])
    session = open_session(SessionOptions(workspace, provider=provider))
    person = NeverAnswers()
    turn = run_turn(session, "make b.txt", person)
    events = [e async for e in turn]
    await session.close()
    assert turn.stop_reason == "end_turn"
    return person, events, provider


async def test_an_unanswered_approval_is_denied_after_the_timeout(workspace, private_home):
    person, events, _ = await run(workspace, private_home, 0.5)
    assert person.asked == 1
    assert not (workspace / "b.txt").exists()
    notes = [e.text for e in events if type(e).__name__ == "Note"]
    assert any("Nobody answered within 0.5 seconds (personTimeoutSeconds). The bash call was denied." in n
               for n in notes)


async def test_zero_means_nobody_is_asked(workspace, private_home):
    person, events, _ = await run(workspace, private_home, 0)
    assert person.asked == 0
    assert not (workspace / "b.txt").exists()
    assert any("personTimeoutSeconds is 0" in e.text for e in events if type(e).__name__ == "Note")
