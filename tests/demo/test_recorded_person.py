"""The person's side of a cassette (host/recorded_person.py): recorded while a person
answers, replayed when nobody is there; a live person still answers for themselves.

Real parts: a real Session on a real workspace, the real turn loop and tools, the real
replay and recording providers on cassette files. The one stand-in is the "live person"
of the recording test (a class that answers like a person clicking), since no person
can sit in a test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.events import ApprovalEvent, ToolResultEvent
from crystal_kernel.core.interaction import NoPerson, PersonDecision
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.host.loop import run_turn
from crystal_kernel.host.recorded_person import (
    RecordingPerson,
    ReplayedPerson,
    adopt_replayed_person,
    person_for,
)
from crystal_kernel.providers.replay import RecordingProvider, ReplayProvider, load_cassette

COLOUR = {"header": "Colour", "question": "Which colour should the note use?",
          "options": [{"label": "Blue", "description": "calm"}, {"label": "Red", "description": "loud"}]}


def script() -> list[dict[str, Any]]:
    """A model that asks a question, then writes a file (an 'ask' in the default mode)."""
    return [
        {"match": {}, "reply": [{"text": "Let me ask."},
                                {"tool_call": {"id": "call_q", "name": "question", "arguments": {"questions": [COLOUR]}}}]},
        {"match": {}, "reply": [{"tool_call": {"id": "call_w", "name": "write",
                                               "arguments": {"path": "note.txt", "content": "blue\n"}}}]},
        {"match": {}, "reply": [{"text": "Done."}]},
    ]


def write_cassette(path: Path, interactions: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"version": 1, "interactions": interactions}), encoding="utf-8")
    return path


def replay_session(workspace: Path, cassette: Path, monkeypatch: pytest.MonkeyPatch, unattended: bool = True):
    monkeypatch.setenv("CRYSTAL_CASSETTE", str(cassette))
    session = open_session(SessionOptions(workspace, overrides={"provider": "replay", "approval": "default"},
                           person_present=not unattended, notebook=False))
    adopt_replayed_person(session, unattended)
    return session


async def run(session: Any, interaction: Any) -> list[Any]:
    return [event async for event in run_turn(session, "Write a note.", interaction)]


async def test_replayed_person_answers_the_form_and_the_approval(tmp_path: Path, monkeypatch) -> None:
    interactions = script()
    interactions[0]["person"] = [{"call": "call_q", "answers": [["Blue"]]}]
    interactions[1]["person"] = [{"call": "call_w", "approval": "allow_once"}]
    session = replay_session(tmp_path, write_cassette(tmp_path / "c.json", interactions), monkeypatch)
    assert "question" in [t.name for t in (await session.prepare_tools())]  # unattended, yet the cassette answers it
    shown: list[tuple[str, Any]] = []
    interaction = person_for(session, None, on_answer=lambda kind, asked, answer: shown.append((kind, answer)))
    assert isinstance(interaction, ReplayedPerson)
    events = await run(session, interaction)
    results = {e.name: e for e in events if isinstance(e, ToolResultEvent)}
    assert results["question"].ok and json.loads(results["question"].text) == [["Blue"]]
    assert results["write"].ok
    assert (tmp_path / "note.txt").read_text() == "blue\n"
    decided = [(e.name, e.outcome, e.by) for e in events if isinstance(e, ApprovalEvent) and e.outcome != "ask"]
    assert ("write", "allow", "person") in decided
    assert [kind for kind, _ in shown] == ["questions", "approval"]
    await session.close()


async def test_without_a_recorded_answer_the_form_is_dismissed_and_the_call_denied(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    session = replay_session(tmp_path, write_cassette(tmp_path / "c.json", script()), monkeypatch)
    events = await run(session, person_for(session, None))
    results = {e.name: e for e in events if isinstance(e, ToolResultEvent)}
    assert not results["question"].ok and "dismissed" in results["question"].text
    assert not results["write"].ok and "recording holds no decision" in results["write"].text
    assert not (tmp_path / "note.txt").exists()
    await session.close()


class ClickingPerson:
    """Stands in for a person at the keyboard (no person can run in a test)."""

    person_present = True

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def ask_questions(self, questions: list[Any]) -> list[list[str]] | None:
        self.asked.append("questions")
        return [["Red"]]

    async def ask_approval(self, request: Any) -> PersonDecision:
        self.asked.append(request.tool)
        return PersonDecision(outcome="allow_once")


async def test_a_live_person_answers_for_themselves_under_replay(tmp_path: Path, monkeypatch) -> None:
    interactions = script()
    interactions[0]["person"] = [{"call": "call_q", "answers": [["Blue"]]}]
    session = replay_session(tmp_path, write_cassette(tmp_path / "c.json", interactions), monkeypatch,
                             unattended=False)
    person = ClickingPerson()
    assert person_for(session, person) is person
    events = await run(session, person)
    results = {e.name: e for e in events if isinstance(e, ToolResultEvent)}
    assert json.loads(results["question"].text) == [["Red"]]  # the person's answer, not the recording's
    assert person.asked == ["questions", "write"]
    await session.close()


async def test_recording_keeps_the_persons_answers_and_they_replay_with_nobody_there(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    # The "live model" is itself a replay of a script: no network is needed to record.
    source = write_cassette(tmp_path / "script.json", script())
    recorded = tmp_path / "recorded.json"
    first = tmp_path / "first"
    first.mkdir()
    session = open_session(SessionOptions(first, overrides={"approval": "default"}, notebook=False,
                           provider=RecordingProvider(ReplayProvider(source), recorded)))
    person = ClickingPerson()
    interaction = person_for(session, person)
    assert isinstance(interaction, RecordingPerson)
    await run(session, interaction)
    await session.close()
    entries = [i.get("person") for i in load_cassette(recorded)["interactions"]]
    assert entries == [[{"call": "call_q", "answers": [["Red"]]}], [{"call": "call_w", "approval": "allow_once"}],
                       None]
    # Replayed with nobody there, the recording's person gives the same answers.
    second = tmp_path / "second"
    second.mkdir()
    session = replay_session(second, recorded, monkeypatch)
    events = await run(session, person_for(session, None))
    results = {e.name: e for e in events if isinstance(e, ToolResultEvent)}
    assert json.loads(results["question"].text) == [["Red"]]
    assert (second / "note.txt").read_text() == "blue\n"
    await session.close()


def test_no_replay_and_nobody_there_is_no_person() -> None:
    class Plain:
        provider = object()

    assert isinstance(person_for(Plain(), None), NoPerson)
